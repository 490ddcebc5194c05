//! Generation exhaustion and the capacity limit: a slot is reused until its
//! occupant reaches the generation limit, then retired for good; a stale
//! handle never aliases a later value; a pool out of slot indices gives the
//! value back (`try_insert`) or panics (`insert`); `reclaim` makes pending
//! slots reusable at once.

use std::collections::{BTreeMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use handle_pool::{pin, Handle, HandlePool};

use crate::common::{self, predictable as config};

/// Every handle the pool has issued, to check that none is issued twice and
/// that the stale ones stay stale.
#[derive(Default)]
struct Issued {
    all: HashSet<Handle>,
    stale: Vec<Handle>,
}

impl Issued {
    fn record(&mut self, h: Handle) {
        assert!(self.all.insert(h), "handle {h:?} issued twice");
    }

    fn retire(&mut self, h: Handle) {
        self.stale.push(h);
    }

    fn check_stale<T: Clone>(&self, pool: &HandlePool<T>) {
        let guard = pin();
        for &h in &self.stale {
            assert!(!pool.contains(h), "stale {h:?} resolves");
            assert!(pool.get(h, &guard).is_none(), "stale {h:?} resolves");
        }
    }
}

#[test]
fn a_slot_is_reused_until_the_generation_limit_then_retired() {
    let mut pool: HandlePool<u32> = HandlePool::with_config(config(3, 100, 64));
    let mut issued = Issued::default();
    // Exclusive removal (`take`) frees the slot at once, so the single free
    // slot is reused by the next insert: generations 1, 2, 3 in slot 0.
    for generation in 1..=3 {
        let h = pool.insert(generation);
        issued.record(h);
        assert_eq!((h.index(), h.generation()), (0, generation));
        issued.check_stale(&pool);
        assert_eq!(pool.take(h), Some(generation));
        issued.retire(h);
    }
    // Slot 0 is retired: the next inserts go to fresh slots, never slot 0.
    for i in 0..10 {
        let h = pool.insert(100 + i);
        issued.record(h);
        assert_ne!(h.index(), 0, "a retired slot was handed out again");
        issued.check_stale(&pool);
    }
    assert_eq!(pool.len(), 10);
}

#[test]
fn retirement_through_remove_and_reclaim() {
    let mut pool: HandlePool<u32> = HandlePool::with_config(config(3, 100, 64));
    let mut issued = Issued::default();
    for generation in 1..=3 {
        let h = pool.insert(generation);
        issued.record(h);
        assert_eq!((h.index(), h.generation()), (0, generation));
        assert!(pool.remove(h));
        issued.retire(h);
        issued.check_stale(&pool);
        pool.reclaim();
        issued.check_stale(&pool);
    }
    let h = pool.insert(7);
    issued.record(h);
    assert_eq!((h.index(), h.generation()), (1, 1));
    issued.check_stale(&pool);
}

#[test]
fn a_full_budget_is_exactly_slots_times_generations() {
    // With every removal exclusive (no burnt generations), a pool of `s`
    // slots with generation limit `g` accepts exactly `s * g` inserts, each
    // slot carrying generations 1..=g exactly once.
    for (max_generation, max_slots) in [(1, 1), (1, 5), (3, 8), (5, 3), (7, 16)] {
        let mut pool: HandlePool<u64> =
            HandlePool::with_config(config(max_generation, max_slots, 64));
        let mut issued = Issued::default();
        let mut per_slot: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let mut live: Vec<Handle> = Vec::new();
        let mut count = 0u64;
        loop {
            match pool.try_insert(count) {
                Ok(h) => {
                    issued.record(h);
                    assert!(h.index() < max_slots);
                    assert!((1..=max_generation).contains(&h.generation()));
                    per_slot.entry(h.index()).or_default().push(h.generation());
                    live.push(h);
                    count += 1;
                }
                Err(e) => {
                    assert_eq!(e.into_inner(), count, "the value is given back");
                    if live.is_empty() {
                        break;
                    }
                    // Free every live slot and keep going.
                    for h in live.drain(..) {
                        assert!(pool.take(h).is_some());
                        issued.retire(h);
                    }
                }
            }
            // Churn: take the oldest live value every other insert.
            if count % 2 == 0 && !live.is_empty() {
                let h = live.remove(0);
                assert!(pool.take(h).is_some());
                issued.retire(h);
            }
            assert!(
                count <= u64::from(max_slots * max_generation),
                "too many inserts"
            );
        }
        issued.check_stale(&pool);
        assert_eq!(
            count,
            u64::from(max_slots * max_generation),
            "slots {max_slots}, generations {max_generation}"
        );
        assert_eq!(per_slot.len(), max_slots as usize);
        for (index, generations) in &per_slot {
            let expected: Vec<u32> = (1..=max_generation).collect();
            assert_eq!(generations, &expected, "slot {index}");
        }
        assert!(pool.is_empty());
        // Permanently full: reclaim changes nothing.
        pool.reclaim();
        assert!(pool.try_insert(0).is_err());
    }
}

#[test]
fn remove_and_reclaim_churn_also_uses_every_generation_once() {
    let (max_generation, max_slots) = (3, 8);
    let mut pool: HandlePool<u64> =
        HandlePool::with_config(common::striped(max_generation, max_slots, 2));
    let mut issued = Issued::default();
    let mut per_slot: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut count = 0u64;
    let mut failures_in_a_row = 0;
    while failures_in_a_row < 2 {
        match pool.try_insert(count) {
            Ok(h) => {
                failures_in_a_row = 0;
                issued.record(h);
                per_slot.entry(h.index()).or_default().push(h.generation());
                assert_eq!(pool.get_cloned(h), Some(count));
                assert!(pool.remove(h));
                issued.retire(h);
                count += 1;
            }
            Err(e) => {
                assert_eq!(e.into_inner(), count);
                failures_in_a_row += 1;
                // `reclaim` makes every removed slot reusable at once. (The
                // pins and flushes after it touch only crossbeam-epoch's own
                // state, which the pool's reclamation no longer goes
                // through.)
                pool.reclaim();
                for _ in 0..1000 {
                    pin().flush();
                }
            }
        }
        assert!(count <= u64::from(max_slots * max_generation));
    }
    issued.check_stale(&pool);
    for (index, generations) in &per_slot {
        let mut sorted = generations.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            &sorted, generations,
            "slot {index}: generations out of order"
        );
        assert!(generations
            .iter()
            .all(|&g| (1..=max_generation).contains(&g)));
    }
    eprintln!(
        "remove/reclaim churn: {count} of {} inserts",
        max_slots * max_generation
    );
    // Every slot was used, and nothing beyond the budget was handed out.
    // (`reclaim` after each failure frees every removed slot, so the whole
    // budget is used: 24 of 24 in every run seen. The assert below asks
    // less.)
    assert_eq!(per_slot.len(), max_slots as usize);
    assert!(count >= u64::from(max_slots), "only {count} inserts");
}

#[test]
fn stale_handles_never_alias_across_reuse() {
    let mut pool: HandlePool<u64> = HandlePool::with_config(config(4, 3, 64));
    let mut issued = Issued::default();
    let mut value = 0;
    while let Ok(h) = pool.try_insert(value) {
        issued.record(h);
        issued.check_stale(&pool);
        assert_eq!(pool.get_cloned(h), Some(value));
        // Every stale handle with the same index misses this value.
        for &old in &issued.stale {
            if old.index() == h.index() {
                assert_eq!(pool.get_cloned(old), None);
                assert!(!pool.remove(old));
                assert_eq!(pool.take(old), None);
            }
        }
        assert!(pool.remove(h));
        issued.retire(h);
        pool.reclaim();
        value += 1;
    }
    assert_eq!(value, 12, "3 slots x 4 generations");
    issued.check_stale(&pool);
}

#[test]
fn try_insert_gives_the_value_back_when_full() {
    let pool: HandlePool<String> = HandlePool::with_config(config(3, 4, 64));
    let handles: Vec<Handle> = (0..4).map(|i| pool.insert(i.to_string())).collect();
    let err = pool.try_insert("extra".to_string()).unwrap_err();
    assert!(err.to_string().contains("full"), "{err}");
    assert_eq!(format!("{err:?}"), "CapacityError(..)");
    assert_eq!(err.into_inner(), "extra");
    assert_eq!(pool.len(), 4);
    for (i, h) in handles.iter().enumerate() {
        assert_eq!(pool.get_cloned(*h), Some(i.to_string()));
    }
}

#[test]
#[should_panic(expected = "full")]
fn insert_panics_when_full() {
    let pool: HandlePool<u8> = HandlePool::with_config(config(3, 2, 64));
    pool.insert(1);
    pool.insert(2);
    pool.insert(3);
}

#[test]
#[should_panic(expected = "full")]
fn insert_with_panics_when_full() {
    let pool: HandlePool<u8> = HandlePool::with_config(config(3, 1, 64));
    pool.insert(1);
    pool.insert_with(|_| 2);
}

#[test]
fn a_full_pool_stays_usable_after_insert_panics() {
    let pool: HandlePool<u8> = HandlePool::with_config(config(3, 2, 64));
    let a = pool.insert(1);
    let b = pool.insert(2);
    let result = catch_unwind(AssertUnwindSafe(|| pool.insert(3)));
    let message = result.unwrap_err();
    let message = message
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| message.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(message.contains("full"), "{message}");
    assert_eq!(pool.len(), 2);
    assert_eq!(pool.get_cloned(a), Some(1));
    assert_eq!(pool.get_cloned(b), Some(2));
    assert!(pool.remove(a));
    assert_eq!(pool.len(), 1);
}

#[test]
fn a_pool_whose_slots_are_all_retired_is_full_while_empty() {
    let mut pool: HandlePool<u8> = HandlePool::with_config(config(1, 3, 64));
    for _ in 0..3 {
        let h = pool.insert(0);
        assert_eq!(h.generation(), 1);
        assert!(pool.remove(h));
    }
    pool.reclaim();
    assert!(pool.is_empty());
    assert_eq!(pool.try_insert(9).unwrap_err().into_inner(), 9);
    pool.clear();
    assert!(pool.try_insert(9).is_err());
}

#[test]
fn reclaim_makes_pending_slots_reusable_at_once() {
    // batch 64: two removes do not fill a batch, so nothing is sealed;
    // `reclaim` needs no grace period and reuses them at once.
    let mut pool: HandlePool<u32> = HandlePool::with_config(config(5, 2, 64));
    let a = pool.insert(1);
    let b = pool.insert(2);
    assert!(pool.remove(a));
    assert!(pool.remove(b));
    assert!(pool.is_empty());
    pool.reclaim();
    let c = pool.try_insert(3).expect("reclaim frees the slots");
    let d = pool.try_insert(4).expect("reclaim frees the slots");
    let mut reused: Vec<(u32, u32)> = [c, d].iter().map(|h| (h.index(), h.generation())).collect();
    reused.sort_unstable();
    assert_eq!(reused, vec![(0, 2), (1, 2)]);
    assert!(!pool.contains(a) && !pool.contains(b));
    assert_eq!(pool.get_cloned(c), Some(3));
    assert_eq!(pool.get_cloned(d), Some(4));
}

#[test]
fn clear_reclaims_pending_removals_too() {
    let mut pool: HandlePool<u32> = HandlePool::with_config(config(5, 2, 64));
    let a = pool.insert(1);
    pool.insert(2);
    assert!(pool.remove(a));
    pool.clear();
    assert!(pool.is_empty());
    let c = pool.try_insert(3).expect("clear frees every slot");
    let d = pool.try_insert(4).expect("clear frees every slot");
    assert_eq!(c.generation(), 2);
    assert_eq!(d.generation(), 2);
}

#[test]
fn natural_reclamation_makes_a_slot_reusable() {
    // batch 1: every remove seals its slot's batch at once.
    let pool: HandlePool<u32> = HandlePool::with_config(config(3, 1, 1));
    let a = pool.insert(1);
    assert!(pool.remove(a));
    let mut reused = None;
    for _ in 0..100_000 {
        pin().flush();
        if let Ok(h) = pool.try_insert(2) {
            reused = Some(h);
            break;
        }
        std::thread::yield_now();
    }
    let h = reused.expect("the slot was never reclaimed");
    assert_eq!((h.index(), h.generation()), (0, 2));
    assert!(!pool.contains(a));
    assert_eq!(pool.get_cloned(h), Some(2));
}

#[test]
fn a_panicking_insert_with_burns_its_generation() {
    let mut pool: HandlePool<u32> = HandlePool::with_config(config(3, 1, 64));
    let mut shown = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_with(|h| {
            shown = Some(h);
            panic!("no value for you")
        })
    }));
    assert!(result.is_err());
    let shown = shown.unwrap();
    assert_eq!((shown.index(), shown.generation()), (0, 1));
    assert!(!pool.contains(shown));
    assert!(pool.is_empty());
    // The slot is back, with the shown generation used up.
    let h = pool.insert(5);
    assert_eq!((h.index(), h.generation()), (0, 2));
    assert!(!pool.contains(shown));
    assert_eq!(pool.take(h), Some(5));
    // Generation 3 is the last; a panic there retires the slot.
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_with(|h| {
            assert_eq!(h.generation(), 3);
            panic!("again")
        })
    }));
    assert!(result.is_err());
    assert!(pool.try_insert(6).is_err(), "slot 0 is retired");
}
