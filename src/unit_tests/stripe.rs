//! The length identity (inserts − removals + corrections, summed over
//! stripes), moves between stripes, and quiet stripes.

use super::*;
use crate::lists::Chain;
use crate::slot::{SlotWord, NIL};
use crate::storage::Storage;

#[test]
fn len_sum_is_inserts_minus_removals_plus_corrections() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let stripes = eight_free_on_the_first(&storage);
    let (first, second) = (StripeIndex(0), StripeIndex(1));
    assert_eq!(stripes.len_sum(), 0, "a push is no insert");
    // Five inserts on the first stripe.
    assert!(stripes[first].free.pop(&storage).is_some());
    assert_eq!(
        stripes[first].free.pop_run(&storage, 4),
        Some((Chain { first: 1, last: 4 }, 4))
    );
    assert_eq!(stripes.len_sum(), 5);
    // Two removals on the second stripe, one of them sealing a batch.
    let removals = &stripes[second].removals;
    assert!(removals.push(0, 1, removals.head().1, 2, |_| {}).is_none());
    assert!(removals.push(1, 1, removals.head().1, 2, |_| {}).is_some());
    assert_eq!(stripes[second].len_share(), 2u32.wrapping_neg());
    assert_eq!(stripes.len_sum(), 3);
    // Fresh inserts (+3) and an exclusive removal (-1) are corrections.
    stripes[second].adjust_len(3);
    stripes[first].adjust_len(-1);
    assert_eq!(stripes.len_sum(), 5 - 2 + 3 - 1);
    let shares: u32 = stripes
        .all_from(second)
        .map(|s| stripes[s].len_share())
        .fold(0, u32::wrapping_add);
    assert_eq!(shares, stripes.len_sum());
}

/// `Stripes` over eight `FREE` slots 0 → … → 7, all on the first stripe.
fn eight_free_on_the_first(storage: &Storage<u32>) -> Stripes {
    storage.ensure(0, 8);
    for index in 0..8 {
        let link = if index == 7 { NIL } else { index + 1 };
        let word = SlotWord::free(1, link).to_bits();
        storage.slot(index).word.store(word, Ordering::Relaxed);
    }
    let stripes = Stripes::new(2, false);
    stripes[StripeIndex(0)]
        .free
        .push(storage, Chain { first: 0, last: 7 });
    stripes
}

#[test]
fn a_moved_run_changes_no_share_and_pops_from_its_new_stripe() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let stripes = eight_free_on_the_first(&storage);
    let (first, second) = (StripeIndex(0), StripeIndex(1));
    // Two inserts on the first stripe.
    assert!(stripes[first].free.pop(&storage).is_some());
    assert!(stripes[first].free.pop(&storage).is_some());
    assert_eq!(stripes.len_sum(), 2);
    assert!(stripes.move_run(&storage, first, second, 4));
    assert_eq!(
        (stripes[first].len_share(), stripes[second].len_share()),
        (2, 0),
        "a move is no insert"
    );
    // The run 2 → 3 → 4 → 5 is on the second stripe, linked to nothing
    // older; 6 and 7 stay on the first.
    let popped = |stripe: StripeIndex| {
        std::iter::from_fn(|| stripes[stripe].free.pop(&storage).map(|(index, ..)| index))
            .collect::<Vec<_>>()
    };
    assert_eq!(popped(second), [2, 3, 4, 5]);
    assert_eq!(popped(first), [6, 7]);
    assert_eq!(stripes.len_sum(), 8, "each pop after the move is an insert");
    assert!(
        !stripes.move_run(&storage, first, second, 4),
        "nothing left to move"
    );
}

#[test]
fn a_stripe_is_quiet_after_two_notes_without_inserts_until_its_next_insert() {
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let stripes = eight_free_on_the_first(&storage);
    let (first, second) = (StripeIndex(0), StripeIndex(1));
    let stripe = &stripes[first];
    assert!(!stripe.is_quiet(), "nothing noted yet");
    assert!(stripe.free.pop(&storage).is_some());
    stripes.note_inserts();
    assert!(!stripe.is_quiet(), "an insert before the first note");
    stripes.note_inserts();
    assert!(stripe.is_quiet(), "no insert between two notes");
    // Removals do not make it busy: only inserts take from its free list.
    let removals = &stripe.removals;
    assert!(removals.push(0, 1, removals.head().1, 64, |_| {}).is_none());
    stripes.note_inserts();
    assert!(stripe.is_quiet(), "a stripe that only removes is quiet");
    // Slots another thread moves off are not its inserts.
    assert!(stripes.move_run(&storage, first, second, 3));
    assert!(stripe.is_quiet(), "a move is no insert");
    stripes.note_inserts();
    assert!(stripe.is_quiet(), "a move between notes is no insert");
    // Its own next insert makes it busy at once, and at the next note.
    assert!(stripe.free.pop(&storage).is_some());
    assert!(!stripe.is_quiet(), "an insert since the last note");
    stripes.note_inserts();
    assert!(!stripe.is_quiet(), "an insert between the last two notes");
}
