//! The lists alone, over a tiny storage, without the pool around them: pops
//! and pushes racing on a free list; a run moved between stripes racing a
//! pop; a sealed list's push racing a take.

use loom::sync::Arc;
use loom::thread;

use super::harness::Reached;
use crate::lists::{Chain, FreeList, SealedBatch};
use crate::reclaim::{Horizon, Reclaimer};
use crate::slot::{SlotWord, State, NIL};
use crate::storage::Storage;
use crate::stripe::Stripes;
use crate::sync::Ordering;

const SLOTS: u32 = 3;

/// A storage whose `SLOTS` slots are `FREE`, linked 0 → 1 → …, and that chain.
fn free_slots() -> (Arc<Storage<u32>>, Chain) {
    let storage = Arc::new(Storage::<u32>::new(0, 0, u32::MAX));
    storage.ensure(0, SLOTS);
    for index in 0..SLOTS {
        let link = if index + 1 == SLOTS { NIL } else { index + 1 };
        let word = SlotWord::free(1, link).to_bits();
        storage.slot(index).word.store(word, Ordering::Relaxed);
    }
    let chain = Chain {
        first: 0,
        last: SLOTS - 1,
    };
    (storage, chain)
}

/// Pops one slot, and asserts the list had one.
fn pop(list: &FreeList, storage: &Storage<u32>) -> u32 {
    list.pop(storage).expect("a free slot").0
}

/// One thread pops two slots and pushes one of them back while another pops
/// one. In every execution each slot ends exactly once either held by a
/// thread or on the list (none lost, none handed out twice), and the tag
/// counts the successful pops.
#[test]
fn free_list_pop_push_race() {
    loom::model(|| {
        let (storage, chain) = free_slots();
        let list = Arc::new(FreeList::new());
        list.push(&storage, chain);

        let (list2, storage2) = (Arc::clone(&list), Arc::clone(&storage));
        let popper = thread::spawn(move || {
            let kept = pop(&list2, &storage2);
            let given_back = pop(&list2, &storage2);
            let chain = Chain {
                first: given_back,
                last: given_back,
            };
            list2.push(&storage2, chain);
            kept
        });
        let mine = pop(&list, &storage);
        let kept = popper.join().unwrap();

        assert_eq!(list.pops(), 3, "the tag counts the three pops");
        let mut on_list = Vec::new();
        while let Some((index, ..)) = list.pop(&storage) {
            on_list.push(index);
        }
        assert_eq!(on_list.len(), 1, "one slot left on the list: {on_list:?}");
        let mut everywhere = vec![mine, kept];
        everywhere.extend(on_list);
        everywhere.sort_unstable();
        assert_eq!(everywhere, [0, 1, 2], "each slot exactly once");
    });
}

/// Three free slots on the owner's stripe. The owner pops one (an insert)
/// while another thread moves a run of up to three to its own stripe. In
/// every execution each slot ends exactly once either popped by the owner,
/// or on one of the two lists; the length counts the owner's pop and not
/// the move; the move takes what the pop left.
#[test]
fn a_run_moved_between_stripes_races_the_owners_pop() {
    let moved_all = Reached::default();
    let seen = moved_all.clone();
    loom::model(move || {
        let (storage, chain) = free_slots();
        let stripes = Arc::new(Stripes::new(2, false));
        let owner = stripes.home();
        let mover = stripes.others(owner).next().expect("two stripes");
        stripes[owner].free.push(&storage, chain);

        let (stripes2, storage2) = (Arc::clone(&stripes), Arc::clone(&storage));
        let popper =
            thread::spawn(move || stripes2[owner].free.pop(&storage2).map(|(index, ..)| index));
        assert!(stripes.move_run(&storage, owner, mover, SLOTS));
        let popped = popper.join().unwrap();

        assert_eq!(
            stripes.len_sum(),
            u32::from(popped.is_some()),
            "the pop is an insert, the move is not"
        );
        let drain = |stripe| {
            std::iter::from_fn(|| stripes[stripe].free.pop(&storage).map(|(index, ..)| index))
                .collect::<Vec<_>>()
        };
        let (left, moved) = (drain(owner), drain(mover));
        assert!(
            left.is_empty(),
            "the move took everything the pop left: {left:?}"
        );
        if moved.len() == SLOTS as usize {
            seen.mark();
        }
        let mut everywhere: Vec<u32> = popped.into_iter().chain(moved).collect();
        everywhere.sort_unstable();
        assert_eq!(everywhere, [0, 1, 2], "each slot exactly once");
    });
    moved_all.assert("the move ran before the pop and took all three");
}

/// Two sealed batches of one stripe, one sealed in the setup and one by a
/// sealer racing a reclaimer: the sealer takes its position and pushes its
/// batch onto the sealed list (then lowers the `lowest` hint) while the
/// reclaimer reads the hint, takes the list and reclaims what is past its
/// horizon. In the execution that matters the reclaimer takes the list
/// (with the first batch) before the push; the push must then leave the
/// hint up (`StripeBatches::put` lowers it after pushing), so that a later
/// reclamation finds the second batch. In every execution each batch is
/// reclaimed exactly once, and both slots end free.
#[test]
fn a_batch_pushed_after_a_reclaimers_take_is_not_stranded() {
    let late_push = Reached::default();
    let seen = late_push.clone();
    loom::model(move || {
        let storage = Arc::new(Storage::<u32>::new(0, 0, u32::MAX));
        storage.ensure(0, 2);
        for index in 0..2 {
            let slot = storage.slot(index);
            // SAFETY: the slots are fresh and only this thread has them.
            unsafe { slot.write_value(7) };
            slot.word
                .store(SlotWord::removed(1, NIL).to_bits(), Ordering::Relaxed);
        }
        let batch = |head| SealedBatch {
            head,
            count: 1,
            last: NIL,
        };
        let reclaimer = Arc::new(Reclaimer::new(1));
        let stripe = Stripes::new(1, false).home();
        reclaimer.seal(stripe, batch(0));

        let sealer_reclaimer = Arc::clone(&reclaimer);
        let sealer = thread::spawn(move || sealer_reclaimer.seal(stripe, batch(1)));
        let first = reclaimer
            .reclaim_ready(stripe, &storage, 8, &mut Horizon::unread())
            .free;
        sealer.join().unwrap();
        let first_count = chain_length(first, &storage);
        if first_count == 1 && reclaimer.has_sealed(stripe) {
            // Taken before the second batch's push, which raised the hint.
            seen.mark();
        }
        let second = reclaimer
            .reclaim_ready(stripe, &storage, 8, &mut Horizon::unread())
            .free;
        assert_eq!(
            first_count + chain_length(second, &storage),
            2,
            "each batch is reclaimed exactly once"
        );
        assert!(!reclaimer.has_sealed(stripe), "nothing is left sealed");
        for index in 0..2 {
            assert_eq!(
                SlotWord::from_bits(storage.slot(index).word.load(Ordering::Relaxed)).state(),
                State::Free,
                "slot {index} is free again"
            );
        }
    });
    late_push.assert("a reclaimer took the list between the first batch and the second's push");
}

/// How many slots `chain` links, following the words' links.
fn chain_length(chain: Option<Chain>, storage: &Storage<u32>) -> usize {
    let Some(chain) = chain else {
        return 0;
    };
    let mut index = chain.first;
    let mut length = 1;
    while index != chain.last {
        index = SlotWord::from_bits(storage.slot(index).word.load(Ordering::Relaxed)).link();
        length += 1;
    }
    length
}
