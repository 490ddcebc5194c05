//! Batch operations and the collection traits, checked against the
//! reference table and by value (serde has its own file, `serde.rs`).

use handle_pool::{pin, Handle, HandlePool, ReferenceTable};
use proptest::prelude::*;

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
    use std::sync::Arc;
    let marker = Arc::new(());
    let mut pool = HandlePool::new();
    let hs = pool.insert_many((0..64).map(|_| Arc::clone(&marker)));
    let guard = pin();
    let held = pool.get(hs[3], &guard).map(Arc::clone);
    assert_eq!(pool.remove_many(&hs), 64);
    assert_eq!(held.map(|a| Arc::strong_count(&a)), Some(66));
    drop(guard);
    pool.reclaim();
    assert_eq!(Arc::strong_count(&marker), 1);
}

#[test]
fn collect_extend_into_iter_and_get_disjoint_mut() {
    let mut pool: HandlePool<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    pool.extend(["d".to_string()]);
    assert_eq!(pool.len(), 4);
    let handles: Vec<Handle> = pool.iter(&pin()).map(|(h, _)| h).collect();
    {
        let [x, y] = pool.get_disjoint_mut([handles[0], handles[3]]).unwrap();
        x.push('!');
        y.push('?');
    }
    assert!(pool.get_disjoint_mut([handles[1], handles[1]]).is_none());
    let stale = pool.insert("e".into());
    pool.remove(stale);
    assert!(pool.get_disjoint_mut([handles[1], stale]).is_none());
    for (_, v) in &mut pool {
        v.make_ascii_uppercase();
    }
    let mut all: Vec<(Handle, String)> = pool.into_iter().collect();
    all.sort();
    let values: Vec<&str> = all.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(values, ["A!", "B", "C", "D?"]);
}

#[test]
fn into_iter_drops_what_it_does_not_yield() {
    use std::sync::Arc;
    let marker = Arc::new(());
    let pool: HandlePool<Arc<()>> = (0..10).map(|_| Arc::clone(&marker)).collect();
    let mut it = pool.into_iter();
    let first = it.next();
    assert!(first.is_some());
    drop(it);
    drop(first);
    assert_eq!(Arc::strong_count(&marker), 1);
}

#[derive(Debug, Clone)]
enum Op {
    InsertMany(Vec<u16>),
    RemoveMany(Vec<usize>),
    Reclaim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u16>(), 0..20).prop_map(Op::InsertMany),
        proptest::collection::vec(any::<usize>(), 0..20).prop_map(Op::RemoveMany),
        Just(Op::Reclaim),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Batch operations agree with one-at-a-time operations on the reference table.
    #[test]
    fn batch_operations_match_the_reference_table(ops in proptest::collection::vec(op(), 1..40)) {
        let mut pool = HandlePool::with_config(handle_pool::Config {
            first_bucket_shift: 0,
            max_generation: 3,
            batch: 2,
            ..Default::default()
        });
        let mut table = ReferenceTable::with_limits(3, u64::MAX);
        // Every handle ever issued, pool side and reference side.
        let mut issued: Vec<(Handle, Handle)> = Vec::new();
        for op in ops {
            match op {
                Op::InsertMany(values) => {
                    let hs = pool.insert_many(values.iter().copied());
                    prop_assert_eq!(hs.len(), values.len());
                    for (h, v) in hs.into_iter().zip(values) {
                        issued.push((h, table.insert(v).unwrap()));
                    }
                }
                Op::RemoveMany(picks) => {
                    let chosen: Vec<(Handle, Handle)> = picks.iter().filter(|_| !issued.is_empty()).map(|p| issued[p % issued.len()]).collect();
                    let pool_handles: Vec<Handle> = chosen.iter().map(|c| c.0).collect();
                    let removed = pool.remove_many(&pool_handles);
                    let expected = chosen.iter().filter(|c| table.remove(c.1).is_some()).count();
                    prop_assert_eq!(removed, expected);
                }
                Op::Reclaim => pool.reclaim(),
            }
            prop_assert_eq!(pool.len(), table.len());
            for &(p, r) in &issued {
                prop_assert_eq!(pool.get_cloned(p), table.get(r).copied());
            }
        }
    }
}

/// An iterator whose `size_hint` claims an exact length it does not have.
struct Lying {
    claimed: usize,
    actual: std::ops::Range<u32>,
}

impl Iterator for Lying {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        self.actual.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.claimed, Some(self.claimed))
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
