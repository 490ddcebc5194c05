//! The handle API: bit packing, `Option` niche, `Debug`, ordering and
//! hashing, typed handles, and what the pool does with bad input (forged,
//! out-of-range, stale and doubly removed handles). Foreign and unprotected
//! guards do not compile: see the `Guard` docs.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use handle_pool::{
    new_handle_type, pin, Handle, HandlePool, PoolHandle, MAX_GENERATION, MAX_INDEX,
};
use proptest::prelude::*;

new_handle_type! {
    /// A typed handle for the tests.
    pub struct EntityHandle;
    /// Another one, to check that the two are distinct types.
    struct TextureHandle;
}

fn bits(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

fn hash_of<T: Hash>(value: &T) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[test]
fn constants_match_the_documented_layout() {
    assert_eq!(MAX_INDEX, u32::MAX - 1);
    assert_eq!(MAX_GENERATION, (1 << 30) - 1);
}

#[test]
fn from_bits_rejects_impossible_handles() {
    // Index u32::MAX ends the free lists inside the pool: never a handle
    // a pool hands out, only the null handle's (at MAX_GENERATION).
    assert_eq!(Handle::from_bits(bits(u32::MAX, 1)), None);
    assert_eq!(
        Handle::from_bits(bits(u32::MAX, MAX_GENERATION)),
        Some(Handle::null())
    );
    // Generation 0 is never handed out (and keeps the niche).
    assert_eq!(Handle::from_bits(0), None);
    assert_eq!(Handle::from_bits(bits(0, 0)), None);
    assert_eq!(Handle::from_bits(bits(12345, 0)), None);
    assert_eq!(Handle::from_bits(bits(MAX_INDEX, 0)), None);
    // Generations above the limit.
    assert_eq!(Handle::from_bits(bits(0, MAX_GENERATION + 1)), None);
    assert_eq!(Handle::from_bits(bits(7, u32::MAX)), None);
    assert_eq!(Handle::from_bits(u64::MAX), None);
}

#[test]
fn from_bits_accepts_the_extremes() {
    for (index, generation) in [
        (0, 1),
        (MAX_INDEX, 1),
        (0, MAX_GENERATION),
        (MAX_INDEX, MAX_GENERATION),
        (4_000_000_000, 17),
    ] {
        let h = Handle::from_bits(bits(index, generation)).expect("valid bits");
        assert_eq!(h.index(), index);
        assert_eq!(h.generation(), generation);
        assert_eq!(h.to_bits(), bits(index, generation));
    }
}

/// Random `u64`s, plus index and generation fields near their limits.
fn interesting_bits() -> impl Strategy<Value = u64> {
    let index = prop_oneof![
        any::<u32>(),
        Just(0),
        Just(MAX_INDEX),
        Just(u32::MAX),
        Just(4_000_000_000)
    ];
    let generation = prop_oneof![
        any::<u32>(),
        0..=MAX_GENERATION + 2,
        Just(0),
        Just(1),
        Just(MAX_GENERATION),
        Just(MAX_GENERATION + 1),
        Just(u32::MAX)
    ];
    prop_oneof![
        any::<u64>(),
        (index, generation).prop_map(|(i, g)| bits(i, g)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn from_bits_is_exact(raw in interesting_bits()) {
        let index = raw as u32;
        let generation = (raw >> 32) as u32;
        let null = raw == Handle::null().to_bits();
        let valid = null || (index <= MAX_INDEX && (1..=MAX_GENERATION).contains(&generation));
        match Handle::from_bits(raw) {
            Some(h) => {
                prop_assert!(valid, "accepted {raw:#x}");
                prop_assert_eq!(h.to_bits(), raw);
                prop_assert_eq!(h.index(), index);
                prop_assert_eq!(h.generation(), generation);
                let typed = EntityHandle::from_bits(raw).expect("typed accepts the same bits");
                prop_assert_eq!(typed.to_bits(), raw);
                prop_assert_eq!(Handle::from(typed), h);
            }
            None => {
                prop_assert!(!valid, "rejected {raw:#x}");
                prop_assert!(EntityHandle::from_bits(raw).is_none());
            }
        }
    }

    #[test]
    fn from_bits_round_trips_every_valid_pair(
        index in 0..=MAX_INDEX,
        generation in 1..=MAX_GENERATION,
    ) {
        let raw = bits(index, generation);
        let h = Handle::from_bits(raw).expect("valid pair");
        prop_assert_eq!((h.index(), h.generation(), h.to_bits()), (index, generation, raw));
        prop_assert_eq!(Handle::from_bits(h.to_bits()), Some(h));
    }

    #[test]
    fn ordering_is_by_index_then_generation(a in any::<u64>(), b in any::<u64>()) {
        if let (Some(x), Some(y)) = (Handle::from_bits(a), Handle::from_bits(b)) {
            prop_assert_eq!(x.cmp(&y), (x.index(), x.generation()).cmp(&(y.index(), y.generation())));
            prop_assert_eq!(x == y, a == b);
            let (tx, ty) = (TextureHandle::from_bits(a).unwrap(), TextureHandle::from_bits(b).unwrap());
            prop_assert_eq!(tx.cmp(&ty), x.cmp(&y));
        }
    }
}

#[test]
fn option_handle_is_eight_bytes() {
    assert_eq!(std::mem::size_of::<Handle>(), 8);
    assert_eq!(std::mem::size_of::<Option<Handle>>(), 8);
    assert_eq!(std::mem::size_of::<EntityHandle>(), 8);
    assert_eq!(std::mem::size_of::<Option<EntityHandle>>(), 8);
}

#[test]
fn debug_shows_index_and_generation() {
    // One format for every handle type: `Name(IvG)`.
    let h = Handle::from_bits(bits(42, 7)).unwrap();
    assert_eq!(format!("{h:?}"), "Handle(42v7)");
    let e = EntityHandle::from_bits(bits(42, 7)).unwrap();
    assert_eq!(format!("{e:?}"), "EntityHandle(42v7)");
    let t = TextureHandle::from_bits(bits(3, 9)).unwrap();
    assert_eq!(format!("{t:?}"), "TextureHandle(3v9)");
    assert_eq!(format!("{:?}", Handle::null()), "Handle(null)");
    assert_eq!(format!("{:?}", EntityHandle::null()), "EntityHandle(null)");
    assert_eq!(format!("{:?}", Some(h)), "Some(Handle(42v7))");
}

#[test]
fn ord_eq_and_hash_agree() {
    let a = Handle::from_bits(bits(1, 5)).unwrap();
    let b = Handle::from_bits(bits(2, 1)).unwrap();
    let c = Handle::from_bits(bits(2, 3)).unwrap();
    assert!(a < b && b < c && a < c, "index first, then generation");
    let mut sorted = vec![c, a, b];
    sorted.sort();
    assert_eq!(sorted, vec![a, b, c]);

    let a2 = Handle::from_bits(a.to_bits()).unwrap();
    assert_eq!(a, a2);
    assert_eq!(hash_of(&a), hash_of(&a2));
    assert_ne!(a, b);
    let set: HashSet<Handle> = [a, b, c, a2].into_iter().collect();
    assert_eq!(set.len(), 3);
}

#[test]
fn pool_handles_are_distinct_and_start_at_generation_one() {
    let pool = HandlePool::new();
    let handles: Vec<Handle> = (0..200).map(|i| pool.insert(i)).collect();
    let set: HashSet<Handle> = handles.iter().copied().collect();
    assert_eq!(set.len(), handles.len());
    for (i, h) in handles.iter().enumerate() {
        assert_eq!(h.generation(), 1, "fresh slots give generation 1");
        assert_eq!(Handle::from_bits(h.to_bits()), Some(*h));
        assert_eq!(pool.get_cloned(*h), Some(i));
    }
}

#[test]
fn typed_handles_work_with_their_pool() {
    let entities: HandlePool<&str, EntityHandle> = HandlePool::with_handle_type();
    let textures: HandlePool<u32, TextureHandle> = HandlePool::with_capacity_and_handle_type(4);
    assert!(textures.capacity() >= 4);
    let e = entities.insert("player");
    let t = textures.insert(99);
    assert_eq!(entities.with(e, |v| *v), Some("player"));
    assert_eq!(textures.get_cloned(t), Some(99));

    // Round trip through bits and through the raw handle.
    let e2 = EntityHandle::from_bits(e.to_bits()).unwrap();
    assert_eq!(e2, e);
    assert_eq!(entities.with(e2, |v| v.len()), Some(6));
    let raw: Handle = e.into();
    assert_eq!(raw.to_bits(), e.to_bits());
    assert_eq!(<EntityHandle as PoolHandle>::from_handle(raw), e);
    assert_eq!(e.handle(), raw);

    // Same bits, different types: the type system keeps them apart, and a
    // handle converted by hand is only checked like any other.
    let forged = EntityHandle::from_bits(t.to_bits()).unwrap();
    assert_eq!(entities.contains(forged), forged == e);
    let guard = pin();
    let seen: Vec<_> = entities.iter(&guard).collect();
    assert_eq!(seen, vec![(e, &"player")]);
    drop(guard);

    assert!(entities.remove(e));
    assert!(!entities.contains(e2));
    assert!(!entities.remove(e2));
}

#[test]
fn bad_handles_find_nothing_and_never_panic() {
    let mut pool: HandlePool<String> = HandlePool::new();
    let live = pool.insert("live".to_string());
    let removed = pool.insert("removed".to_string());
    assert!(pool.remove(removed));

    let past_the_end = Handle::from_bits(bits(4_000_000_000, 1)).unwrap();
    let max_index = Handle::from_bits(bits(MAX_INDEX, 1)).unwrap();
    let wrong_generation = Handle::from_bits(bits(live.index(), live.generation() + 1)).unwrap();
    let max_generation = Handle::from_bits(bits(live.index(), MAX_GENERATION)).unwrap();
    let forged_neighbour = Handle::from_bits(bits(live.index() + 1000, 1)).unwrap();

    for bad in [
        removed,
        past_the_end,
        max_index,
        wrong_generation,
        max_generation,
        forged_neighbour,
    ] {
        assert!(!pool.contains(bad), "{bad:?}");
        {
            let guard = pin();
            assert_eq!(pool.get(bad, &guard), None, "{bad:?}");
        }
        assert_eq!(pool.with(bad, |s| s.clone()), None, "{bad:?}");
        assert_eq!(pool.get_cloned(bad), None, "{bad:?}");
        assert!(!pool.remove(bad), "{bad:?}");
        assert_eq!(pool.get_mut(bad), None, "{bad:?}");
        assert_eq!(pool.take(bad), None, "{bad:?}");
    }
    // Double remove: the second one fails, as do lookups.
    assert!(pool.remove(live));
    assert!(!pool.remove(live));
    assert_eq!(pool.get_cloned(live), None);
    assert_eq!(pool.take(live), None);
    assert!(pool.is_empty());
    // Still usable, and the stale handles stay stale after reclamation.
    pool.reclaim();
    let again = pool.insert("again".to_string());
    assert_ne!(again, live);
    assert_ne!(again, removed);
    assert!(!pool.contains(live) && !pool.contains(removed));
    assert_eq!(pool.len(), 1);
}

#[test]
fn forged_bits_of_a_live_handle_resolve_to_it() {
    // A handle made from bits is checked like any other: if the bits are
    // those of a live handle, it is that handle.
    let pool = HandlePool::new();
    let h = pool.insert(5u8);
    let forged = Handle::from_bits(h.to_bits()).unwrap();
    assert_eq!(pool.get_cloned(forged), Some(5));
    assert!(pool.remove(forged));
    assert!(!pool.contains(h));
}

#[test]
fn a_pool_before_its_first_insert_rejects_everything() {
    let pool: HandlePool<u8> = HandlePool::new();
    assert_eq!(pool.capacity(), 0);
    for raw in [bits(0, 1), bits(1, 1), bits(MAX_INDEX, MAX_GENERATION)] {
        let h = Handle::from_bits(raw).unwrap();
        assert!(!pool.contains(h));
        assert!(!pool.remove(h));
        assert_eq!(pool.get_cloned(h), None);
    }
}
