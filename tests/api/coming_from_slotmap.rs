//! What a slotmap user reaches for first, each as the README's "Coming from
//! slotmap" table gives it: the null handle, handle accessors, the value
//! back from a concurrent remove, iteration from both ends with honest
//! lengths, and loops over `&mut pool` and `&pool.reader()`.

use handle_pool::{new_handle_type, pin, Config, Handle, HandlePool, PoolHandle};

new_handle_type! {
    /// A typed handle, as `slotmap::new_key_type!` would make.
    struct Entity;
}

/// A pool whose slots live in buckets of 1, 2, 4… (no flat region), with
/// holes: some values removed.
fn bucketed(values: u32) -> (HandlePool<u32>, Vec<Handle>) {
    let pool = HandlePool::with_config(Config::tiny(1 << 20, 4));
    let handles: Vec<Handle> = (0..values).map(|v| pool.insert(v)).collect();
    for h in handles.iter().step_by(3) {
        assert!(pool.remove(*h));
    }
    (pool, handles)
}

#[test]
fn the_null_handle_finds_nothing_anywhere() {
    let mut pool: HandlePool<String> = HandlePool::new();
    let live = pool.insert("live".into());
    // A pool big enough to reach past its flat region, and one with no
    // flat region at all.
    pool.reserve(1 << 16);
    let nothing = Handle::null();
    assert!(nothing.is_null() && !live.is_null());
    assert_eq!(Handle::default(), nothing);
    assert_eq!(
        (nothing.index(), nothing.generation()),
        (u32::MAX, handle_pool::MAX_GENERATION)
    );
    assert_eq!(Handle::from_bits(nothing.to_bits()), Some(nothing));
    assert!(!pool.contains(nothing));
    assert_eq!(pool.get(nothing, &pin()), None);
    assert_eq!(pool.with(nothing, |s| s.clone()), None);
    assert_eq!(pool.get_cloned(nothing), None);
    assert_eq!(pool.reader().get(nothing), None);
    assert!(!pool.reader().contains(nothing));
    assert!(!pool.remove(nothing));
    assert_eq!(pool.remove_get(nothing, &pin()), None);
    assert_eq!(pool.remove_with(nothing, |s| s.clone()), None);
    assert_eq!(pool.remove_many(&[nothing, nothing]), 0);
    assert_eq!(pool.get_mut(nothing), None);
    assert!(pool.get_disjoint_mut([live, nothing]).is_none());
    assert_eq!(pool.take(nothing), None);
    assert_eq!(pool.len(), 1);
    assert!(!pool.keys(&pin()).any(|h| h.is_null()));

    let buckets: HandlePool<u8> = HandlePool::with_config(Config::tiny(8, 1));
    buckets.insert(1);
    assert!(!buckets.contains(nothing));
    assert!(!buckets.remove(nothing));

    let entities: HandlePool<&str, Entity> = HandlePool::with_handle_type();
    entities.insert("e");
    assert!(Entity::default().is_null());
    assert_eq!(Entity::null().handle(), nothing);
    assert!(!entities.contains(Entity::null()));
    assert!(!entities.remove(Entity::default()));
}

#[test]
fn typed_handles_have_the_plain_handles_accessors() {
    let entities: HandlePool<&str, Entity> = HandlePool::with_handle_type();
    entities.insert("first");
    let e = entities.insert("second");
    assert_eq!(
        (e.index(), e.generation()),
        (e.handle().index(), e.handle().generation())
    );
    assert_eq!(e.generation(), 1);
    assert_eq!(format!("{e:?}"), format!("Entity({}v1)", e.index()));
    assert_eq!(Entity::from_bits(e.to_bits()), Some(e));
}

#[test]
fn a_concurrent_remove_hands_the_value_over() {
    let pool = HandlePool::new();
    let a = pool.insert(String::from("a"));
    let b = pool.insert(String::from("b"));
    let guard = pin();
    let value = pool.remove_get(a, &guard);
    assert_eq!(value.map(String::as_str), Some("a"));
    assert_eq!(pool.remove_get(a, &guard), None);
    assert_eq!(pool.remove_with(b, String::clone).as_deref(), Some("b"));
    assert_eq!(pool.remove_with(b, String::clone), None);
    assert!(pool.is_empty());
    assert_eq!(
        value.map(String::len),
        Some(1),
        "readable while the guard lives"
    );
}

#[test]
fn every_iterator_runs_from_both_ends() {
    let (mut pool, _) = bucketed(50);
    let guard = pin();
    let forward: Vec<(Handle, u32)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
    assert_eq!(forward.len(), pool.len());
    let mut backward: Vec<(Handle, u32)> = pool.iter(&guard).rev().map(|(h, v)| (h, *v)).collect();
    backward.reverse();
    assert_eq!(backward, forward);
    let keys: Vec<Handle> = pool.keys(&guard).rev().collect();
    assert!(keys.iter().rev().eq(forward.iter().map(|(h, _)| h)));
    let values: Vec<u32> = pool.values(&guard).rev().copied().collect();
    assert!(values.iter().rev().eq(forward.iter().map(|(_, v)| v)));
    drop(guard);

    // From both ends at once: every item once, nothing twice.
    let guard = pin();
    let mut iter = pool.iter(&guard);
    let mut met = Vec::new();
    while let (Some(front), back) = (iter.next(), iter.next_back()) {
        met.push(*front.1);
        met.extend(back.map(|(_, v)| *v));
    }
    met.sort_unstable();
    let mut expected: Vec<u32> = forward.iter().map(|&(_, v)| v).collect();
    expected.sort_unstable();
    assert_eq!(met, expected);
    drop(guard);

    let rev: Vec<u32> = pool.iter_mut().rev().map(|(_, v)| *v).collect();
    assert!(rev.iter().rev().eq(expected.iter()));
    let rev: Vec<u32> = pool.values_mut().rev().map(|v| *v).collect();
    assert!(rev.iter().rev().eq(expected.iter()));
    let rev: Vec<u32> = pool.clone().into_iter().rev().map(|(_, v)| v).collect();
    assert!(rev.iter().rev().eq(expected.iter()));
    let rev: Vec<u32> = pool.drain().rev().map(|(_, v)| v).collect();
    assert!(rev.iter().rev().eq(expected.iter()));
    assert!(pool.is_empty());
}

#[test]
fn exclusive_iterators_stay_exact_from_both_ends() {
    let (mut pool, _) = bucketed(40);
    let live = pool.len();
    let mut iter = pool.iter_mut();
    assert_eq!(iter.len(), live);
    iter.next();
    iter.next_back();
    assert_eq!(iter.len(), live - 2);
    assert_eq!(iter.count(), live - 2);

    let mut drain = pool.clone().into_iter();
    drain.next_back();
    assert_eq!(drain.len(), live - 1);
    assert_eq!(drain.size_hint(), (live - 1, Some(live - 1)));

    let mut drain = pool.drain();
    drain.next_back();
    drain.next();
    assert_eq!(drain.len(), live - 2);
    drop(drain);
    assert!(pool.is_empty());
}

#[test]
fn a_shared_iteration_does_not_claim_a_length() {
    let (pool, _) = bucketed(30);
    let guard = pin();
    let iter = pool.iter(&guard);
    let (low, high) = iter.size_hint();
    assert_eq!(low, 0, "other threads may remove every value meanwhile");
    assert!(high >= Some(pool.len()));
    assert!(high <= Some(pool.slots_used()));
}

#[test]
fn loops_over_a_mutable_pool_and_over_a_reader() {
    let mut pool: HandlePool<u32> = (1..=5).collect();
    for (_, value) in &mut pool {
        *value *= 10;
    }
    let mut sum = 0;
    for (handle, value) in &pool.reader() {
        assert_eq!(pool.get_cloned(handle), Some(*value));
        sum += value;
    }
    assert_eq!(sum, 150);
    let reader = pool.reader();
    assert_eq!(reader.iter().rev().map(|(_, v)| *v).next(), Some(50));
}
