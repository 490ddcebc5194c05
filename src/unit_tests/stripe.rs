//! The length identity: pops − removals + corrections, summed over stripes.

use super::*;
use crate::lists::Chain;
use crate::slot::{SlotWord, NIL};
use crate::storage::Storage;

#[test]
fn len_sum_is_pops_minus_removals_plus_corrections() {
    let storage = Storage::<u32>::new(0);
    storage.ensure(0, 8);
    for index in 0..8 {
        let link = if index == 7 { NIL } else { index + 1 };
        let word = SlotWord::free(1, link).to_bits();
        storage.slot(index).word.store(word, Ordering::Relaxed);
    }
    let stripes = Stripes::new(2);
    let (first, second) = (StripeIndex(0), StripeIndex(1));
    assert_eq!(stripes.len_sum(), 0);
    stripes[first]
        .free
        .push(&storage, Chain { first: 0, last: 7 });
    assert_eq!(stripes.len_sum(), 0, "a push is no insert");
    // Five inserts on the first stripe.
    assert!(stripes[first].free.pop(&storage).is_some());
    assert_eq!(stripes[first].free.pop_run(&storage, 4), Some((1, 4)));
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
