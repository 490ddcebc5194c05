//! slotmap-shaped conveniences: `keys`, `values`, `values_mut`,
//! `try_insert_with`, and the iterators' size hints and lengths.

use handle_pool::{pin, Handle, HandlePool};

use crate::common::predictable;

#[test]
fn keys_and_values_match_iter() {
    let pool: HandlePool<u32> = (0..100).collect();
    let handles: Vec<Handle> = pool.insert_many(100..110);
    for h in &handles[..5] {
        pool.remove(*h);
    }
    let guard = pin();
    let pairs: Vec<(Handle, u32)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
    let keys: Vec<Handle> = pool.keys(&guard).collect();
    let values: Vec<u32> = pool.values(&guard).copied().collect();
    assert_eq!(keys, pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    assert_eq!(values, pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    assert_eq!(keys.len(), 105);
}

#[test]
fn values_mut_visits_each_value_once() {
    let mut pool: HandlePool<u32> = (0..50).collect();
    pool.values_mut().for_each(|v| *v += 1);
    let mut all: Vec<u32> = pool.into_iter().map(|(_, v)| v).collect();
    all.sort();
    assert_eq!(all, (1..=50).collect::<Vec<_>>());
}

#[test]
fn try_insert_with_gives_the_closure_back_when_full() {
    let pool: HandlePool<(Handle, u32)> = HandlePool::with_config(predictable(8, 2, 1));
    let a = pool.try_insert_with(|me| (me, 1)).unwrap();
    let b = pool.try_insert_with(|me| (me, 2)).unwrap();
    assert_eq!(pool.with(a, |v| *v), Some((a, 1)));
    assert_eq!(pool.with(b, |v| *v), Some((b, 2)));
    let called = std::cell::Cell::new(false);
    let full = pool
        .try_insert_with(|me| {
            called.set(true);
            (me, 3)
        })
        .unwrap_err();
    assert!(!called.get());
    // The closure handed back is the one given, not called yet.
    let f = full.into_inner();
    assert_eq!(f(a).1, 3);
    assert!(called.get());
    assert_eq!(pool.len(), 2);
}

#[test]
fn size_hints_are_honest() {
    let mut pool: HandlePool<u32> = (0..100).collect();
    let handles: Vec<Handle> = pool.insert_many(0..20);
    for h in &handles {
        pool.remove(*h);
    }
    {
        let guard = pin();
        for skip in 0..=100 {
            let mut iter = pool.iter(&guard);
            for _ in 0..skip {
                iter.next();
            }
            let (low, high) = iter.size_hint();
            let rest = iter.count();
            assert_eq!(low, 0);
            assert!(high.unwrap() >= rest, "{high:?} < {rest}");
        }
    }
    pool.reclaim();
    let mut iter = pool.iter_mut();
    for left in (0..=100).rev() {
        assert_eq!(iter.size_hint(), (left, Some(left)));
        assert_eq!(iter.next().is_some(), left > 0);
    }
    let mut drain = pool.drain();
    assert_eq!(drain.size_hint(), (100, Some(100)));
    drain.next();
    assert_eq!(drain.size_hint(), (99, Some(99)));
    drop(drain);
    assert!(pool.is_empty());
    pool.extend(0..10);
    let mut owned = pool.into_iter();
    assert_eq!(owned.size_hint(), (10, Some(10)));
    owned.next();
    assert_eq!(owned.size_hint(), (9, Some(9)));
    assert_eq!(owned.count(), 9);
}

/// `iter_mut`, `values_mut`, `drain` and `into_iter` are `ExactSizeIterator`s:
/// their `len` is the values left, also with removals still waiting for
/// reclamation and slots retired at the generation limit.
#[test]
fn exclusive_iterators_know_their_length() {
    let mut pool: HandlePool<u32> = HandlePool::with_config(predictable(2, 1000, 8));
    let handles: Vec<Handle> = (0..60).map(|v| pool.insert(v)).collect();
    // Pending: removed through `&self`, not reclaimed.
    for h in handles.iter().step_by(4) {
        assert!(pool.remove(*h));
    }
    // Retired: taken at generation 2, the limit (an insert reuses a slot
    // reclaimed from the first full batch of removals).
    let reused = pool.insert(100);
    assert_eq!(reused.generation(), 2);
    assert_eq!(pool.take(reused), Some(100));
    let live = pool.len();
    assert_eq!(live, 45);
    let mut iter = pool.iter_mut();
    for left in (0..=live).rev() {
        assert_eq!(iter.len(), left);
        assert_eq!(iter.next().is_some(), left > 0);
    }
    let mut values = pool.values_mut();
    assert_eq!(values.len(), live);
    values.nth(9);
    assert_eq!(values.len(), live - 10);
    let mut drain = pool.drain();
    assert_eq!(drain.len(), live);
    drain.nth(4);
    assert_eq!(drain.len(), live - 5);
    drop(drain);
    assert_eq!(pool.len(), 0);
    pool.extend(0..7);
    let mut owned = pool.into_iter();
    assert_eq!(owned.len(), 7);
    owned.next();
    assert_eq!(owned.len(), 6);
    assert_eq!(owned.count(), 6);
}

/// `reserve` allocates room past the slots handed out, capped at the
/// pool's slot limit, however much is asked for.
#[test]
fn reserve_makes_room_up_to_the_slot_limit() {
    let pool: HandlePool<u64> = HandlePool::new();
    for v in 0..100 {
        pool.insert(v);
    }
    pool.reserve(5000);
    assert!(pool.capacity() >= pool.slots_used() + 5000);
    let capacity = pool.capacity();
    // Room enough: these inserts allocate nothing more.
    for v in 0..4000 {
        pool.insert(v);
    }
    assert_eq!(pool.capacity(), capacity);
    pool.reserve(0);
    assert_eq!(pool.capacity(), capacity);

    let small: HandlePool<u64> = HandlePool::with_config(predictable(10, 100, 8));
    small.reserve(usize::MAX);
    // Its buckets for slots 0..100 hold 108 slots: those past the limit,
    // which no insert can have, are not counted.
    assert_eq!(small.capacity(), 100);
    for v in 0..100 {
        small.insert(v);
    }
    assert!(small.try_insert(100).is_err(), "the limit still holds");
}

#[test]
fn a_leaked_drain_leaves_the_values_it_did_not_yield() {
    let mut pool: HandlePool<u64> = HandlePool::new();
    let handles: Vec<Handle> = (0..10).map(|i| pool.insert(i)).collect();
    let mut drain = pool.drain();
    let (taken, value) = drain.next().expect("ten values");
    std::mem::forget(drain);
    assert_eq!(pool.len(), 9);
    assert_eq!(pool.iter_mut().len(), 9);
    for (i, &h) in handles.iter().enumerate() {
        if h == taken {
            assert_eq!(value, i as u64);
            assert!(!pool.contains(h), "the yielded value's handle is stale");
        } else {
            assert_eq!(pool.get_cloned(h), Some(i as u64), "handle {i}");
        }
    }
    // The pool goes on as usual.
    let fresh = pool.insert(10);
    assert_eq!(pool.drain().count(), 10);
    assert!(!pool.contains(fresh) && pool.is_empty());
}
