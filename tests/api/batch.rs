//! Batch operations, `insert_many` and `remove_many`: checked by value and
//! against one-at-a-time operations on the reference table.

use handle_pool::{pin, Config, Handle, HandlePool, ReferenceTable};
use proptest::prelude::*;

use crate::common::{self, Alive, Lying, Op, Target};

#[test]
fn insert_many_fresh_handles_are_consecutive() {
    let pool = HandlePool::new();
    let first = pool.insert_many(0..1000u32);
    assert!(first.windows(2).all(|w| w[1].index() == w[0].index() + 1));
    for (i, &h) in first.iter().enumerate() {
        assert_eq!(pool.get_cloned(h), Some(i as u32));
    }
    assert_eq!(pool.len(), 1000);
}

#[test]
fn insert_many_reuses_free_slots_before_fresh_ones() {
    let mut pool = HandlePool::new();
    let old = pool.insert_many(0..100u32);
    assert_eq!(pool.remove_many(&old[..50]), 50);
    pool.reclaim();
    let capacity = pool.capacity();
    let new = pool.insert_many(100..150u32);
    let old_indices: std::collections::HashSet<u32> = old[..50].iter().map(|h| h.index()).collect();
    assert!(
        new.iter().all(|h| old_indices.contains(&h.index())),
        "reused slots first"
    );
    assert_eq!(pool.capacity(), capacity);
    for h in &old[..50] {
        assert!(!pool.contains(*h));
    }
    assert_eq!(pool.len(), 100);
}

#[test]
fn remove_many_skips_stale_forged_and_repeated_handles() {
    let pool = HandlePool::new();
    let hs = pool.insert_many(0..10u8);
    let forged = Handle::from_bits((7 << 32) | 3).unwrap();
    let mut mixed = vec![hs[0], hs[0], forged, hs[1]];
    mixed.extend_from_slice(&hs[5..]);
    assert_eq!(pool.remove_many(&mixed), 7);
    assert_eq!(pool.remove_many(&mixed), 0);
    assert_eq!(pool.len(), 3);
}

#[test]
fn remove_many_values_are_dropped_after_the_grace_period() {
    let alive = Alive::new();
    let mut pool = HandlePool::new();
    let hs = pool.insert_many(alive.values(64));
    let guard = pin();
    let held = pool.get(hs[3], &guard).cloned();
    assert_eq!(pool.remove_many(&hs), 64);
    // The 64 removed values wait for the guard; the clone makes 65.
    assert_eq!(held.map(|_| alive.count()), Some(65));
    drop(guard);
    pool.reclaim();
    assert_eq!(alive.count(), 0);
}

/// Each pair of handles (pool, table) one insert issued.
#[derive(Default)]
struct Pairs {
    all: Vec<(Handle, Handle)>,
    live: Vec<(Handle, Handle)>,
    stale: Vec<(Handle, Handle)>,
}

impl Pairs {
    /// The pool handle and the table handle a target names, either missing
    /// when that side never issued it.
    fn resolve(&self, target: &Target) -> Option<(Option<Handle>, Option<Handle>)> {
        let (p, r) = match target {
            Target::Live(i) => common::pick(&self.live, *i)?,
            Target::Stale(i) => common::pick(&self.stale, *i)?,
            Target::Forged(f) => {
                let side = |pairs: &[(Handle, Handle)]| -> Vec<Handle> {
                    let pick = |&(p, r): &(Handle, Handle)| if f.on_table { r } else { p };
                    pairs.iter().map(pick).collect()
                };
                let h = f.handle(&side(&self.live), &side(&self.all))?;
                let pair = self
                    .all
                    .iter()
                    .find(|&&(p, r)| h == if f.on_table { r } else { p });
                return Some(match (pair, f.on_table) {
                    (Some(&(p, r)), _) => (Some(p), Some(r)),
                    (None, true) => (None, Some(h)),
                    (None, false) => (Some(h), None),
                });
            }
        };
        Some((Some(p), Some(r)))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Batch operations agree with one-at-a-time operations on the reference table.
    #[test]
    fn batch_operations_match_the_reference_table(
        ops in proptest::collection::vec(common::op(34, 34), 1..40)
    ) {
        let mut pool = HandlePool::with_config(Config {
            first_bucket_shift: 0,
            max_generation: 3,
            ..common::with_batch(2)
        });
        let mut table = ReferenceTable::with_limits(3, u64::MAX);
        let mut pairs = Pairs::default();
        let mut next_value = 0u64;
        for op in ops {
            // The other operations are the model test's subject: here they
            // are batches of one.
            let (inserts, targets) = match op {
                Op::InsertMany(n) => (n, Vec::new()),
                Op::Insert | Op::TryInsert | Op::InsertWith => (1, Vec::new()),
                Op::RemoveMany(targets) => (0, targets),
                Op::Remove(t) | Op::Take(t) | Op::Lookup(t) | Op::GetMut(t, _) => (0, vec![t]),
                Op::Reclaim => {
                    pool.reclaim();
                    (0, Vec::new())
                }
                _ => (0, Vec::new()),
            };
            if inserts > 0 {
                let values: Vec<u64> = (next_value..next_value + inserts as u64).collect();
                next_value += inserts as u64;
                let hs = pool.insert_many(values.iter().copied());
                prop_assert_eq!(hs.len(), values.len());
                for (h, v) in hs.into_iter().zip(values) {
                    let pair = (h, table.insert(v).unwrap());
                    pairs.all.push(pair);
                    pairs.live.push(pair);
                }
            }
            if !targets.is_empty() {
                let chosen: Vec<(Option<Handle>, Option<Handle>)> =
                    targets.iter().filter_map(|t| pairs.resolve(t)).collect();
                let pool_handles: Vec<Handle> = chosen.iter().filter_map(|c| c.0).collect();
                let removed = pool.remove_many(&pool_handles);
                let expected = chosen
                    .iter()
                    .filter(|c| c.1.is_some_and(|r| table.remove(r).is_some()))
                    .count();
                prop_assert_eq!(removed, expected);
                let (live, stale): (Vec<_>, Vec<_>) =
                    pairs.live.iter().partition(|&&(p, _)| pool.contains(p));
                pairs.live = live;
                pairs.stale.extend(stale);
            }
            prop_assert_eq!(pool.len(), table.len());
            for &(p, r) in &pairs.all {
                prop_assert_eq!(pool.get_cloned(p), table.get(r).copied());
            }
        }
    }
}

#[test]
fn insert_many_survives_a_wrong_size_hint() {
    let mut pool = HandlePool::new();
    // Claims 100, yields 10: the other 90 reserved slots are not lost.
    let few = pool.insert_many(Lying {
        claimed: 100,
        actual: 0..10,
    });
    assert_eq!(few.len(), 10);
    assert_eq!(pool.len(), 10);
    // Claims 5, yields 50: the extra values are inserted too.
    let many = pool.insert_many(Lying {
        claimed: 5,
        actual: 100..150,
    });
    assert_eq!(many.len(), 50);
    assert_eq!(pool.len(), 60);
    for (i, &h) in many.iter().enumerate() {
        assert_eq!(pool.get_cloned(h), Some(100 + i as u32));
    }
    // Reused slots too: free some, reclaim, and lie again.
    assert_eq!(pool.remove_many(&few), 10);
    pool.reclaim();
    let used = pool.slots_used();
    let again = pool.insert_many(Lying {
        claimed: 40,
        actual: 0..3,
    });
    assert_eq!(again.len(), 3);
    assert_eq!(pool.len(), 53);
    // Every slot not holding a value is still reusable: no growth.
    let free = used - pool.len();
    let fill = pool.insert_many(0..free as u32);
    assert_eq!(fill.len(), free);
    assert_eq!(pool.slots_used(), used);
    assert_eq!(pool.len(), used);
}
