//! The free list and the removal batch, one thread at a time.

use super::*;

/// A storage whose slots `indices` are `FREE` and linked in that order.
fn free_chain(storage: &Storage<u32>, indices: &[u32]) -> Chain {
    let end = indices.iter().max().unwrap() + 1;
    storage.ensure(0, end);
    for (at, &index) in indices.iter().enumerate() {
        let link = indices.get(at + 1).copied().unwrap_or(NIL);
        let word = SlotWord::free(1, link).to_bits();
        storage.slot(index).word.store(word, Ordering::Relaxed);
    }
    Chain {
        first: indices[0],
        last: *indices.last().unwrap(),
    }
}

/// Pops everything, one at a time.
fn pop_all(list: &FreeList, storage: &Storage<u32>) -> Vec<u32> {
    std::iter::from_fn(|| list.pop(storage).map(|(index, _, _, _)| index)).collect()
}

#[test]
fn an_empty_free_list_pops_none() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let list = FreeList::new();
    assert!(list.looks_empty());
    assert!(list.pop(&storage).is_none());
    assert_eq!(list.pop_run(&storage, 4), None);
    assert_eq!(list.pops(), 0, "a failed pop raises the tag");
}

#[test]
fn a_pushed_chain_pops_in_chain_order_then_the_older_slots() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let list = FreeList::new();
    list.push(&storage, free_chain(&storage, &[4, 5]));
    list.push(&storage, free_chain(&storage, &[2, 0, 3]));
    assert!(!list.looks_empty());
    let (index, slot, word, _) = list.pop(&storage).unwrap();
    assert_eq!(index, 2);
    assert!(std::ptr::eq(slot, storage.slot(2)));
    assert_eq!(word.link(), 0, "the popped word links to the next slot");
    assert_eq!(pop_all(&list, &storage), [0, 3, 4, 5]);
    assert_eq!(list.pops(), 5);
    assert!(list.looks_empty());
}

#[test]
fn pop_run_takes_exactly_max_and_counts_each_pop() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let list = FreeList::new();
    list.push(&storage, free_chain(&storage, &[7, 1, 6, 2, 5]));
    assert_eq!(list.pop_run(&storage, 0), None);
    assert_eq!(list.pops(), 0);
    assert_eq!(
        list.pop_run(&storage, 3),
        Some((Chain { first: 7, last: 6 }, 3))
    );
    assert_eq!(list.pops(), 3);
    // The run is linked through the slot words: 7 → 1 → 6.
    let link = |index| SlotWord::from_bits(storage.slot(index).word.load(Ordering::Relaxed)).link();
    assert_eq!((link(7), link(1)), (1, 6));
    // Asking for more than is left takes what is left.
    assert_eq!(
        list.pop_run(&storage, 10),
        Some((Chain { first: 2, last: 5 }, 2))
    );
    assert_eq!(list.pops(), 5);
    assert_eq!(list.pop_run(&storage, 1), None);
    assert!(list.pop(&storage).is_none());
}

/// Pushes one removed slot (no chain to relink: single-threaded).
fn push_one(batch: &RemovalBatch, index: u32, size: u32) -> Option<SealedBatch> {
    let (_, current) = batch.head();
    batch.push(index, 1, current, size, |_| panic!("no race here"))
}

#[test]
fn a_removal_batch_seals_on_the_push_that_fills_it() {
    let batch = RemovalBatch::new();
    assert_eq!(batch.head().0, NIL);
    assert!(push_one(&batch, 3, 3).is_none());
    assert_eq!(batch.head().0, 3);
    assert!(push_one(&batch, 8, 3).is_none());
    assert_eq!(batch.removal_count(), 2, "pending removals count");
    assert_eq!(batch.head().0, 8, "the last slot removed leads");
    let sealed = push_one(&batch, 5, 3).expect("the third push fills the batch");
    assert_eq!((sealed.head, sealed.count), (5, 3));
    assert_eq!(batch.head(), (NIL, pack(0, NIL)), "the word resets");
    assert_eq!(batch.removal_count(), 3, "sealed removals still count");
    // A chain pushed at once counts every slot in it.
    let (_, current) = batch.head();
    let sealed = batch.push(9, 4, current, 3, |_| panic!("no race here"));
    assert_eq!(sealed.map(|s| (s.head, s.count)), Some((9, 4)));
    assert_eq!(batch.removal_count(), 7);
}

#[test]
fn take_all_empties_the_batch_and_keeps_the_count() {
    let batch = RemovalBatch::new();
    assert!(batch.take_all().is_none());
    assert!(push_one(&batch, 1, 64).is_none());
    assert!(push_one(&batch, 4, 64).is_none());
    let taken = batch.take_all().expect("two pending slots");
    assert_eq!((taken.head, taken.count), (4, 2));
    assert_eq!(batch.head(), (NIL, pack(0, NIL)));
    assert!(batch.take_all().is_none());
    assert_eq!(batch.removal_count(), 2);
    assert!(push_one(&batch, 6, 64).is_none());
    assert_eq!(batch.removal_count(), 3, "pending plus taken");
}

#[test]
fn pop_owned_unless_declines_without_changing_the_list() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let list = FreeList::new();
    list.fill_owned(free_chain(&storage, &[6, 2]).first);
    // The count the pop would leave is 1: declined, nothing moves.
    assert!(list.pop_owned_unless(&storage, |pops| pops == 1).is_none());
    assert_eq!(list.pops(), 0, "a declined pop leaves the count");
    let (index, _, _, pops) = list.pop_owned_unless(&storage, |pops| pops == 2).unwrap();
    assert_eq!((index, pops), (6, 1), "the same slot is still first");
    assert!(list.pop_owned_unless(&storage, |pops| pops == 2).is_none());
    assert_eq!(list.pop_owned(&storage).map(|(index, ..)| index), Some(2));
    assert_eq!(list.pops(), 2);
    assert!(list.pop_owned(&storage).is_none(), "empty");
}

#[test]
fn an_owned_batch_says_full_and_keeps_it_until_taken() {
    let batch = RemovalBatch::new();
    assert!(!batch.push_owned(3, 3));
    assert!(!batch.push_owned(8, 3));
    assert!(batch.push_owned(5, 3), "the third push fills the batch");
    assert_eq!(batch.head_owned(), 5, "the full batch stays in place");
    assert_eq!(batch.removal_count(), 3);
    let sealed = batch.take_owned().expect("a full batch");
    assert_eq!((sealed.head, sealed.count, sealed.last), (5, 3, 3));
    assert_eq!(batch.head(), (NIL, pack(0, NIL)), "the word resets");
    assert_eq!(batch.removal_count(), 3, "taken removals still count");
    assert!(batch.take_owned().is_none());
}

/// The most slots one push can carry: every slot a pool may have
/// (`MAX_INDEX + 1`, `u32::MAX`), `remove_many` of all its handles.
const ALL_SLOTS: u32 = crate::handle::MAX_INDEX + 1;

#[test]
fn a_push_of_every_slot_a_pool_has_seals_with_its_exact_count() {
    // Batches as large as the index space: nothing seals before the last
    // slot, and the sum of the pending slots and the chain (2 + u32::MAX
    // - 2) reaches the largest count a `u32` holds.
    let batch = RemovalBatch::new();
    assert!(push_one(&batch, 3, ALL_SLOTS).is_none());
    assert!(push_one(&batch, 8, ALL_SLOTS).is_none());
    let (_, current) = batch.head();
    let sealed = batch
        .push(9, ALL_SLOTS - 2, current, ALL_SLOTS, |_| {
            panic!("no race here")
        })
        .expect("the push fills the batch");
    assert_eq!((sealed.head, sealed.count), (9, ALL_SLOTS));
    assert_eq!(batch.head(), (NIL, pack(0, NIL)), "the word resets");
    assert_eq!(batch.removal_count(), ALL_SLOTS);
    // The batch's own size limit: a pending count of `size - 1` plus one.
    let (_, current) = batch.head();
    assert!(batch
        .push(4, ALL_SLOTS - 1, current, ALL_SLOTS, |_| panic!(
            "no race here"
        ))
        .is_none());
    assert_eq!(batch.head().1, pack(ALL_SLOTS - 1, 4));
    let sealed = push_one(&batch, 5, ALL_SLOTS).expect("the last slot fills it");
    assert_eq!((sealed.head, sealed.count), (5, ALL_SLOTS));
}

#[test]
fn a_push_against_a_stale_word_that_would_overflow_retries_on_the_real_one() {
    // A remover that read the batch nearly full, before a seal emptied it,
    // pushes a long chain: the stale sum is past `u32::MAX` (in 32 bits it
    // overflowed, a panic in debug builds); the CAS fails, the chain's
    // tail is relinked to the real head, and the push lands.
    let batch = RemovalBatch::new();
    assert!(push_one(&batch, 3, 64).is_none());
    let stale = pack(ALL_SLOTS - 1, 7);
    let relinked = std::cell::Cell::new(None);
    let sealed = batch.push(9, 5, stale, 64, |head| relinked.set(Some(head)));
    assert!(sealed.is_none(), "6 slots do not fill a batch of 64");
    assert_eq!(relinked.get(), Some(3), "the tail links to the real head");
    assert_eq!(batch.head().1, pack(6, 9));
    assert_eq!(batch.removal_count(), 6);
    // The same against a size the stale sum passes: still no seal of the
    // stale count.
    let (_, fresh) = batch.head();
    let stale = pack(ALL_SLOTS - 2, 1);
    let sealed = batch
        .push(11, 60, stale, 64, |head| relinked.set(Some(head)))
        .expect("6 + 60 fill a batch of 64");
    assert_eq!(relinked.get(), Some(low(fresh)));
    assert_eq!((sealed.head, sealed.count), (11, 66));
}
