//! The lists alone, over a tiny storage, without the pool around them: pops
//! and pushes racing on a free list; a run moved between stripes racing a
//! pop; a sealed list's push racing a take.

use loom::sync::Arc;
use loom::thread;

use super::harness::Reached;
use crate::lists::{Chain, FreeList, SealedBatch};
use crate::reclaim::Reclaimer;
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

/// A sealer numbers a batch and pushes it onto its stripe's sealed list
/// while another thread does what an adopter's marker and a reclaimer do:
/// records everything numbered so far as past its grace period, then takes
/// the list. In the execution that matters the number is taken, the marker
/// runs and the reclaimer takes the (empty) list before the push; the push
/// must then leave the hint up (`StripeBatches::put` lowers `taken`), so
/// that a later reclamation finds the batch with no new marker. In every
/// execution the batch is reclaimed exactly once.
#[test]
fn a_batch_pushed_after_a_reclaimers_take_is_not_stranded() {
    let late_push = Reached::default();
    let seen = late_push.clone();
    loom::model(move || {
        let storage = Arc::new(Storage::<u32>::new(0, 0, u32::MAX));
        storage.ensure(0, 1);
        let slot = storage.slot(0);
        // SAFETY: slot 0 is fresh and only this thread has it.
        unsafe { slot.write_value(7) };
        slot.word
            .store(SlotWord::removed(1, NIL).to_bits(), Ordering::Relaxed);
        let reclaimer = Arc::new(Reclaimer::new(1));
        let stripe = Stripes::new(1, false).home();

        let sealer_reclaimer = Arc::clone(&reclaimer);
        let sealer = thread::spawn(move || {
            let batch = SealedBatch {
                head: 0,
                count: 1,
                last: NIL,
            };
            assert_eq!(sealer_reclaimer.seal_without_marker(stripe, batch), 1);
        });
        reclaimer.grace_as_adopter(stripe);
        let first = reclaimer.reclaim_ready(stripe, &storage, 8).found;
        sealer.join().unwrap();
        if !first && reclaimer.has_ready(stripe) {
            // Graced and taken before the push, which lowered `taken`.
            seen.mark();
        }
        reclaimer.grace_as_adopter(stripe);
        let second = reclaimer.reclaim_ready(stripe, &storage, 8).found;
        assert!(first != second, "the batch is reclaimed exactly once");
        assert_eq!(
            SlotWord::from_bits(slot.word.load(Ordering::Relaxed)).state(),
            State::Free,
            "the slot is free again"
        );
    });
    late_push.assert("a reclaimer took the list between the numbering and the push");
}
