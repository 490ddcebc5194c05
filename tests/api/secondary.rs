//! `SecondaryMap`, one thread at a time: slotmap's generation rules (older
//! refused, newer replaces, only the exact generation resolves), the rest of
//! the API, typed handles, hostile handles (what they find, what they
//! allocate) and panics in user code.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use handle_pool::{
    new_handle_type, pin, Config, Handle, HandlePool, PoolHandle, SecondaryMap, MAX_GENERATION,
    MAX_INDEX,
};

use crate::common::{predictable, quiet_panics, Alive, Counted};

// ---------------------------------------------------------------------------
// Allocation accounting, per thread (each test runs on a thread of its own).

struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the bookkeeping touches only a const-initialised thread-local,
// which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|total| total.set(total.get() + layout.size()));
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|total| total.set(total.get() + layout.size()));
        // SAFETY: the caller's contract for `alloc_zeroed` is `System`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATED.try_with(|total| total.set(total.get() + new_size));
        // SAFETY: the caller's contract for `realloc` is `System`'s, and
        // `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes this thread allocated during `f`.
fn allocated_by<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCATED.with(Cell::get);
    let result = f();
    (ALLOCATED.with(Cell::get) - before, result)
}

/// The handle of slot `index`, generation `generation`.
fn handle(index: u32, generation: u32) -> Handle {
    Handle::from_bits((u64::from(generation) << 32) | u64::from(index)).unwrap()
}

/// Inserts into `pool` until it hands out a handle of `old`'s slot with a
/// newer generation (the pool's own reuse, not a forged handle); removes
/// and reclaims the others.
fn reuse_of(pool: &mut HandlePool<()>, old: Handle) -> Handle {
    assert!(!pool.contains(old), "`old` is removed");
    pool.reclaim();
    let mut others = Vec::new();
    let new = loop {
        let h = pool.insert(());
        if h.index() == old.index() {
            break h;
        }
        others.push(h);
    };
    for h in others {
        pool.remove(h);
    }
    assert!(new.generation() > old.generation());
    new
}

// ---------------------------------------------------------------------------
// The generation rules.

#[test]
fn a_new_entity_never_sees_the_component_of_the_old_one_in_its_slot() {
    let mut entities = HandlePool::with_config(predictable(MAX_GENERATION, 64, 1));
    let positions = SecondaryMap::new();
    let old = entities.insert(());
    assert!(positions.insert(old, (1.0, 1.0)));
    entities.remove(old);
    let new = reuse_of(&mut entities, old);

    let guard = pin();
    assert_eq!(positions.get(new, &guard), None);
    assert!(!positions.contains(new));
    assert_eq!(positions.with(new, |p| *p), None);
    assert_eq!(positions.get_cloned(new), None);
    assert!(!positions.remove(new), "a remove of another generation");
    // The old entity's component stays until the new one's replaces it.
    assert_eq!(positions.get(old, &guard), Some(&(1.0, 1.0)));
    assert!(positions.insert(new, (2.0, 2.0)));
    assert_eq!(positions.get(new, &guard), Some(&(2.0, 2.0)));
    assert_eq!(positions.get(old, &guard), None);
    assert_eq!(positions.len(), 1);
}

#[test]
fn an_insert_of_an_older_generation_is_refused_and_its_value_dropped() {
    let alive = Alive::new();
    let map = SecondaryMap::new();
    assert!(map.insert(handle(3, 5), alive.value()));
    assert!(!map.insert(handle(3, 4), alive.value()));
    assert!(!map.insert(handle(3, 1), alive.value()));
    assert_eq!(alive.count(), 1, "the refused values were dropped");
    assert!(map.contains(handle(3, 5)));
    assert!(!map.contains(handle(3, 4)));
    assert_eq!(map.len(), 1);
}

#[test]
fn the_null_handle_is_refused_and_never_resolves() {
    let alive = Alive::new();
    let map = SecondaryMap::new();
    let (bytes, stored) = allocated_by(|| map.insert(Handle::null(), alive.value()));
    assert!(!stored, "an insert for the null handle is refused");
    assert_eq!(bytes, 0, "a refused null insert grows nothing");
    assert_eq!(alive.count(), 0, "its value was dropped");
    assert!(!map.contains(Handle::null()));
    assert!(map.get_cloned(Handle::null()).is_none());
    assert!(!map.remove(Handle::null()));
    assert_eq!(map.len(), 0);
    // The highest real index still takes a value.
    assert!(map.insert(handle(MAX_INDEX, 1), alive.value()));
    assert!(!map.contains(Handle::null()));
}

/// A full value pool (four slots here) cannot retire a value taken out of
/// its entry's room: `remove` and a replacing `insert` panic then, and the
/// value stays readable through a reference a guard held before, neither
/// dropped nor written over (it is kept aside until `&mut` of the map).
/// Dropping the cell while unwinding freed the value under the reader: a
/// use after free (ASan). `clear` then drops it, exactly once.
#[test]
fn a_full_value_pool_never_drops_a_value_under_a_reader() {
    let _quiet = quiet_panics(
        "SecondaryMap: the value pool is full (2^31 values live, awaiting reclamation or retired)",
    );
    let alive = Alive::new();
    let mut map: SecondaryMap<(String, Counted)> = SecondaryMap::with_config(Config {
        max_slots: 4,
        ..Config::default()
    });
    // Fill the value pool: each entry's second value goes to the pool.
    let mut full = false;
    for k in 1..=100 {
        map.insert(handle(k, 1), (format!("room {k}"), alive.value()));
        full = catch_unwind(AssertUnwindSafe(|| {
            map.insert(handle(k, 1), (format!("pool {k}"), alive.value()))
        }))
        .is_err();
        map.flush();
        if full {
            break;
        }
    }
    assert!(full, "the value pool fills");
    for replace in [false, true] {
        let victim = handle(1000 + u32::from(replace), 1);
        assert!(map.insert(victim, (String::from("the victim's value"), alive.value())));
        let guard = pin();
        let seen: &String = &map.get(victim, &guard).unwrap().0;
        let outcome = if replace {
            catch_unwind(AssertUnwindSafe(|| {
                map.insert(victim, (String::from("new"), alive.value()));
            }))
        } else {
            catch_unwind(AssertUnwindSafe(|| {
                map.remove(victim);
            }))
        };
        assert!(outcome.is_err(), "the full value pool panics");
        // The room stays held by the value kept aside: nothing is written there.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            map.insert(victim, (String::from("OVERWRITTEN"), alive.value()))
        }));
        assert_eq!(seen, "the victim's value", "replace: {replace}");
        drop(guard);
    }
    // Every value made is in the map or kept aside, none dropped twice (a
    // second drop would make the count go below zero); `clear` drops them
    // all, the kept ones included.
    map.clear();
    assert_eq!(alive.count(), 0, "every value dropped by clear");
}

#[test]
fn an_insert_of_a_newer_generation_replaces_and_a_stale_handle_stops_resolving() {
    let map = SecondaryMap::new();
    assert!(map.insert(handle(9, 1), "one"));
    assert!(map.insert(handle(9, 2), "two"));
    assert!(map.insert(handle(9, MAX_GENERATION), "last"));
    let guard = pin();
    assert_eq!(map.get(handle(9, 1), &guard), None);
    assert_eq!(map.get(handle(9, 2), &guard), None);
    assert_eq!(map.get(handle(9, MAX_GENERATION), &guard), Some(&"last"));
    assert!(!map.remove(handle(9, 2)), "a stale handle removes nothing");
    assert_eq!(map.len(), 1);
}

#[test]
fn an_insert_of_the_same_generation_replaces_the_value() {
    let alive = Alive::new();
    let mut map = SecondaryMap::new();
    let h = handle(0, 1);
    assert!(map.insert(h, (1, alive.value())));
    assert!(map.insert(h, (2, alive.value())));
    assert_eq!(map.with(h, |(n, _)| *n), Some(2));
    assert_eq!(map.len(), 1);
    // A guard another test holds for a moment may hold the reclamation back.
    for _ in 0..10_000 {
        map.flush();
        if alive.count() == 1 {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(alive.count(), 1, "the replaced value was dropped");
    drop(map.take(h));
    assert_eq!(alive.count(), 0);
}

#[test]
fn a_removed_entry_accepts_any_generation_as_in_slotmap() {
    let map = SecondaryMap::new();
    assert!(map.insert(handle(1, 7), 'a'));
    assert!(map.remove(handle(1, 7)));
    assert!(!map.remove(handle(1, 7)));
    assert!(
        map.insert(handle(1, 3), 'b'),
        "vacant: an older generation gets in"
    );
    assert_eq!(map.get_cloned(handle(1, 3)), Some('b'));
    assert_eq!(map.get_cloned(handle(1, 7)), None);
}

#[test]
fn only_the_exact_generation_resolves() {
    let map = SecondaryMap::new();
    map.insert(handle(5, 10), 5);
    for generation in [1, 9, 11, MAX_GENERATION] {
        assert!(!map.contains(handle(5, generation)));
        assert_eq!(map.get_cloned(handle(5, generation)), None);
    }
    for index in [4, 6, 5 + 256, 5 + (1 << 16), 5 + (1 << 24)] {
        assert!(!map.contains(handle(index, 10)));
    }
    assert_eq!(map.get_cloned(handle(5, 10)), Some(5));
}

// ---------------------------------------------------------------------------
// The rest of the API.

#[test]
fn exclusive_operations_follow_the_entries() {
    let alive = Alive::new();
    let mut map = SecondaryMap::new();
    let handles: Vec<Handle> = (0..600).map(|i| handle(i * 7, 1 + i % 3)).collect();
    for (i, &h) in handles.iter().enumerate() {
        assert!(map.insert(h, (i, alive.value())));
    }
    assert_eq!(map.len(), 600);

    map.get_mut(handles[10]).unwrap().0 = 1000;
    assert_eq!(map.with(handles[10], |(n, _)| *n), Some(1000));
    assert!(map.get_mut(handle(70, 9)).is_none());

    let (n, _) = map.take(handles[11]).unwrap();
    assert_eq!(n, 11);
    assert!(map.take(handles[11]).is_none());
    assert!(!map.contains(handles[11]));

    map.retain(|h, (n, _)| h.index() % 2 == 0 || *n == 1000);
    assert!(map.iter(&pin()).all(|(h, _)| h.index() % 2 == 0));
    let kept = map.len();
    assert_eq!(alive.count(), kept);

    let sum =
        |map: &SecondaryMap<(usize, Counted)>| map.values(&pin()).map(|(n, _)| n).sum::<usize>();
    let before = sum(&map);
    for (_, (n, _)) in map.iter_mut() {
        *n += 1;
    }
    for v in map.values_mut() {
        v.0 += 1;
    }
    assert_eq!(sum(&map), before + 2 * kept);

    let drained: Vec<(Handle, usize)> = map.drain().map(|(h, (n, _))| (h, n)).collect();
    assert_eq!(drained.len(), kept);
    assert!(drained.windows(2).all(|w| w[0].0.index() < w[1].0.index()));
    assert!(map.is_empty());
    assert_eq!(alive.count(), 0);
    for &h in &handles {
        assert!(!map.contains(h));
    }
    assert!(map.insert(handles[0], (0, alive.value())));
    map.clear();
    assert!(map.is_empty() && !map.contains(handles[0]));
    assert_eq!(alive.count(), 0);
}

#[test]
fn iteration_visits_every_entry_once_in_index_order_across_leaves_and_nodes() {
    let indices = [
        0,
        1,
        255,
        256,
        257,
        65_535,
        65_536,
        1 << 24,
        (1 << 24) + 3,
        MAX_INDEX,
    ];
    let map: SecondaryMap<u32> = indices.iter().map(|&i| (handle(i, 2), i)).collect();
    let guard = pin();
    let seen: Vec<(Handle, u32)> = map.iter(&guard).map(|(h, v)| (h, *v)).collect();
    let expected: Vec<(Handle, u32)> = indices.iter().map(|&i| (handle(i, 2), i)).collect();
    assert_eq!(seen, expected);
    assert_eq!(
        map.keys(&guard).collect::<Vec<_>>(),
        expected.iter().map(|p| p.0).collect::<Vec<_>>()
    );
    assert_eq!(map.values(&guard).copied().collect::<Vec<_>>(), indices);
    assert_eq!(map.iter(&guard).size_hint().0, 0);
}

#[test]
fn typed_handles_are_keys() {
    new_handle_type! {
        struct Entity;
    }
    let entities: HandlePool<&str, Entity> = HandlePool::with_handle_type();
    let names: SecondaryMap<String, Entity> = SecondaryMap::with_handle_type();
    let ada = entities.insert("ada");
    let bob = entities.insert("bob");
    names.insert(ada, String::from("Ada"));
    names.insert(bob, String::from("Bob"));
    let guard = pin();
    let mut keys: Vec<Entity> = names.keys(&guard).collect();
    keys.sort();
    let mut expected = vec![ada, bob];
    expected.sort();
    assert_eq!(keys, expected);
    assert_eq!(names.get(ada, &guard).map(String::as_str), Some("Ada"));
    let debug = format!("{names:?}");
    assert!(
        debug.starts_with('{') && debug.contains("\"Ada\"") && debug.contains("\"Bob\""),
        "{debug}"
    );
    let with_capacity: SecondaryMap<u8, Entity> = SecondaryMap::with_capacity_and_handle_type(300);
    assert!(with_capacity.capacity() >= 300);
}

#[test]
fn clone_and_collect_keep_every_handle_meaning() {
    let pairs = [
        (handle(2, 1), 20),
        (handle(300, 4), 3000),
        (handle(70_000, 9), 7),
    ];
    let map: SecondaryMap<u64> = pairs.into_iter().collect();
    let copy = map.clone();
    map.remove(pairs[0].0);
    assert_eq!(copy.len(), 3);
    for (h, v) in pairs {
        assert_eq!(copy.get_cloned(h), Some(v));
    }
    let mut more = copy.clone();
    more.extend([(handle(2, 2), 21), (handle(300, 3), 0)]);
    assert_eq!(more.get_cloned(handle(2, 2)), Some(21));
    assert_eq!(
        more.get_cloned(handle(300, 4)),
        Some(3000),
        "the older pair was refused"
    );
    assert_eq!(more.len(), 3);
    let empty: SecondaryMap<u8> = SecondaryMap::default();
    assert_eq!(format!("{empty:?}"), "{}");
}

// ---------------------------------------------------------------------------
// Hostile handles.

#[test]
fn a_forged_handle_at_the_highest_index_allocates_a_few_kib_on_an_empty_map() {
    // A first map on this thread, so that what a thread's first pool use
    // allocates once (its number, its announcement word) is not counted.
    let warm_up: SecondaryMap<u64> = SecondaryMap::new();
    warm_up.insert(handle(0, 1), 0);
    warm_up.insert(handle(MAX_INDEX, 1), 0);

    let low: SecondaryMap<u64> = SecondaryMap::new();
    let (at_zero, stored) = allocated_by(|| low.insert(handle(0, 1), 1));
    assert!(stored);
    let far: SecondaryMap<u64> = SecondaryMap::new();
    let (at_max, stored) = allocated_by(|| far.insert(handle(MAX_INDEX, MAX_GENERATION), 1));
    assert!(stored);
    assert!(
        at_max <= 8 * 1024 && at_zero <= 8 * 1024,
        "an insert at index 2^32 - 2 allocated {at_max} bytes, at index 0 {at_zero}"
    );
    assert_eq!(far.capacity(), 128);
    assert_eq!(far.get_cloned(handle(MAX_INDEX, MAX_GENERATION)), Some(1));
    // Index u32::MAX cannot even be named.
    assert!(Handle::from_bits((1 << 32) | u64::from(u32::MAX)).is_none());
}

#[test]
fn lookups_and_removes_of_forged_handles_find_nothing_and_allocate_nothing() {
    let map: SecondaryMap<u64> = SecondaryMap::new();
    map.insert(handle(100, 3), 1);
    let forged = [
        handle(0, 1),
        handle(100, 2),
        handle(100, 4),
        handle(101, 3),
        handle(356, 3),
        handle(65_636, 3),
        handle(1 << 31, 3),
        handle(MAX_INDEX, MAX_GENERATION),
    ];
    let capacity = map.capacity();
    let guard = pin();
    let (bytes, ()) = allocated_by(|| {
        for h in forged {
            assert!(!map.contains(h));
            assert!(map.get(h, &guard).is_none());
            assert!(map.with(h, |_| ()).is_none());
            assert!(!map.remove(h));
        }
    });
    assert_eq!(bytes, 0);
    assert_eq!(map.capacity(), capacity);
    assert_eq!(map.len(), 1);
}

#[test]
fn inserts_scattered_over_the_index_space_cost_a_leaf_each() {
    let map: SecondaryMap<u8> = SecondaryMap::new();
    let indices: Vec<u32> = (0..64).map(|i| i * 67_108_859).collect();
    let (bytes, ()) = allocated_by(|| {
        for &i in &indices {
            map.insert(handle(i, 1), 1);
        }
    });
    // Index 0 in the dense part, the others a leaf of 128 entries each.
    assert!(map.capacity() <= 64 * 128 + 128, "{}", map.capacity());
    // A leaf (128 entries of 16 bytes for a `u8`) and two nodes of 2 KiB at
    // most per index.
    assert!(bytes <= 64 * 6 * 1024, "{bytes} bytes");
    assert_eq!(map.len(), 64);
}

// ---------------------------------------------------------------------------
// Panics in user code.

/// A handle type whose `handle()` panics when told to.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
struct Panicky(Handle);

thread_local! {
    static PANIC_IN_HANDLE: Cell<bool> = const { Cell::new(false) };
}

impl PoolHandle for Panicky {
    fn from_handle(handle: Handle) -> Self {
        Panicky(handle)
    }
    fn handle(self) -> Handle {
        if PANIC_IN_HANDLE.with(Cell::get) {
            panic!("secondary: handle() panics");
        }
        self.0
    }
}

#[test]
fn a_handle_type_that_panics_leaves_the_map_as_it_was() {
    let _quiet = quiet_panics("secondary: handle() panics");
    let alive = Alive::new();
    let map: SecondaryMap<Counted, Panicky> = SecondaryMap::with_handle_type();
    let h = Panicky(handle(4, 1));
    map.insert(h, alive.value());
    PANIC_IN_HANDLE.with(|p| p.set(true));
    let value = alive.value();
    assert!(catch_unwind(AssertUnwindSafe(|| map.insert(h, value))).is_err());
    assert!(catch_unwind(AssertUnwindSafe(|| map.remove(h))).is_err());
    assert!(catch_unwind(AssertUnwindSafe(|| map.contains(h))).is_err());
    PANIC_IN_HANDLE.with(|p| p.set(false));
    assert_eq!(
        alive.count(),
        1,
        "the value of the insert that panicked was dropped"
    );
    assert!(map.contains(h));
    assert_eq!(map.len(), 1);
}

#[test]
fn a_keep_closure_that_panics_leaves_the_visited_entries_decided() {
    let _quiet = quiet_panics("secondary: keep panics");
    let alive = Alive::new();
    let mut map = SecondaryMap::new();
    for i in 0..10 {
        map.insert(handle(i, 1), (i, alive.value()));
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        map.retain(|_, (i, _)| {
            if *i == 5 {
                panic!("secondary: keep panics");
            }
            *i % 2 == 0
        })
    }));
    assert!(result.is_err());
    let guard = pin();
    let kept: Vec<u32> = map.values(&guard).map(|(i, _)| *i).collect();
    assert_eq!(kept, [0, 2, 4, 5, 6, 7, 8, 9]);
    assert_eq!(map.len(), 8);
    assert_eq!(alive.count(), 8);
}

#[test]
fn a_clone_that_panics_leaves_both_maps_whole() {
    #[derive(Debug)]
    struct Fragile(u32, Counted);
    impl Clone for Fragile {
        fn clone(&self) -> Self {
            if self.0 == 3 {
                panic!("secondary: clone panics");
            }
            Fragile(self.0, self.1.clone())
        }
    }
    let _quiet = quiet_panics("secondary: clone panics");
    let alive = Alive::new();
    let map = SecondaryMap::new();
    for i in 0..6 {
        map.insert(handle(i, 1), Fragile(i, alive.value()));
    }
    assert!(catch_unwind(AssertUnwindSafe(|| map.clone())).is_err());
    assert_eq!(alive.count(), 6, "the partial copy was dropped whole");
    assert_eq!(map.len(), 6);
}

#[test]
fn an_extend_iterator_that_panics_keeps_what_it_inserted() {
    let _quiet = quiet_panics("secondary: the iterator panics");
    let alive = Alive::new();
    let mut map = SecondaryMap::new();
    let pairs = (0..10).map(|i| {
        if i == 4 {
            panic!("secondary: the iterator panics");
        }
        (handle(i, 1), alive.value())
    });
    assert!(catch_unwind(AssertUnwindSafe(|| map.extend(pairs))).is_err());
    assert_eq!(map.len(), 4);
    assert_eq!(alive.count(), 4);
    let by_index: BTreeMap<u32, ()> = map.keys(&pin()).map(|h| (h.index(), ())).collect();
    assert_eq!(by_index.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
}
