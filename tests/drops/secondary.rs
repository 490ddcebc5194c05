//! `SecondaryMap` drop counting: every value that enters a map is dropped
//! exactly once, whichever way it leaves (refused, replaced, removed and
//! reclaimed, taken, retained out, cleared, drained, the map's drop), never
//! while a guard that could see it lives, and also when a value's `Drop`
//! panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use handle_pool::{pin, Handle, SecondaryMap};

use crate::common::{quiet_panics, with_batch, Log, PinnedThread, Tracked};

fn handle(index: u32, generation: u32) -> Handle {
    Handle::from_bits((u64::from(generation) << 32) | u64::from(index)).unwrap()
}

/// A map whose value pool seals a batch at every removal.
fn eager() -> SecondaryMap<Tracked> {
    SecondaryMap::with_config(with_batch(1))
}

#[test]
fn refused_replaced_and_removed_values_are_dropped_once() {
    let log = Log::new(6);
    let map = eager();
    assert!(map.insert(handle(0, 2), Tracked::new(0, &log)));
    assert!(
        !map.insert(handle(0, 1), Tracked::new(1, &log)),
        "older: refused"
    );
    assert_eq!(log.count(1), 1, "a refused value is dropped at once");
    assert!(
        map.insert(handle(0, 2), Tracked::new(2, &log)),
        "the same generation"
    );
    assert!(map.insert(handle(0, 3), Tracked::new(3, &log)), "newer");
    assert!(map.insert(handle(1, 1), Tracked::new(4, &log)));
    assert!(map.remove(handle(1, 1)));
    assert!(map.insert(handle(1, 1), Tracked::new(5, &log)));
    // Another test's guard may hold the reclamation back for a while.
    assert!(crate::flush_until(|| {
        map.flush();
        [0, 2, 4].iter().all(|&id| log.count(id) == 1)
    }));
    for id in [0, 2, 4] {
        assert_eq!(
            log.count(id),
            1,
            "value {id}: replaced or removed, then reclaimed"
        );
    }
    assert_eq!(log.count(3) + log.count(5), 0, "the values in the map");
    drop(map);
    log.assert_all_once();
}

#[test]
fn a_guard_holds_removed_and_replaced_values_until_it_drops() {
    let log = Log::new(3);
    let map = eager();
    map.insert(handle(7, 1), Tracked::new(0, &log));
    map.insert(handle(8, 1), Tracked::new(1, &log));
    let guard = pin();
    let read = map.get(handle(7, 1), &guard).unwrap();
    assert!(map.remove(handle(7, 1)));
    assert!(map.insert(handle(8, 2), Tracked::new(2, &log)));
    for _ in 0..10 {
        map.flush();
    }
    log.assert_none();
    assert_eq!(read.id, 0, "the reference is still good");
    drop(guard);
    assert!(crate::flush_until(|| {
        map.flush();
        log.count(0) == 1 && log.count(1) == 1
    }));
    assert_eq!((log.count(0), log.count(1), log.count(2)), (1, 1, 0));
    drop(map);
    log.assert_all_once();
}

#[test]
fn another_threads_guard_holds_values_back_too() {
    let log = Log::new(1);
    let map = eager();
    map.insert(handle(1, 1), Tracked::new(0, &log));
    let pinned = PinnedThread::start();
    assert!(map.remove(handle(1, 1)));
    map.flush();
    log.assert_none();
    pinned.release();
    assert!(crate::flush_until(|| {
        map.flush();
        log.count(0) == 1
    }));
    log.assert_all_once();
}

#[test]
fn take_retain_clear_and_drain_drop_each_value_once() {
    let log = Log::new(40);
    let mut map = eager();
    for id in 0..40 {
        map.insert(handle(id * 100, 1), Tracked::new(id as usize, &log));
    }
    let taken = map.take(handle(0, 1)).unwrap();
    assert_eq!(taken.id, 0);
    log.assert_none();
    drop(taken);
    map.retain(|h, _| h.index() % 200 == 0);
    assert_eq!(log.dropped(), 1 + 20, "retain drops at once");
    let mut drain = map.drain();
    let first = drain.next().unwrap();
    drop(drain);
    assert!(map.is_empty());
    assert_eq!(log.dropped(), 40 - 1, "the drain's rest dropped with it");
    drop(first);
    map.insert(handle(5, 1), Tracked::new(0, &log));
    map.clear();
    drop(map);
    for id in 1..40 {
        assert_eq!(log.count(id), 1, "value {id}");
    }
    assert_eq!(log.count(0), 2, "id 0 was used by two values");
}

#[test]
fn a_leaked_drain_leaves_the_rest_in_the_map() {
    let log = Log::new(3);
    let mut map = eager();
    for id in 0..3 {
        map.insert(handle(id, 1), Tracked::new(id as usize, &log));
    }
    let mut drain = map.drain();
    let first = drain.next().unwrap();
    std::mem::forget(drain);
    assert_eq!(map.len(), 2);
    assert!(map.contains(handle(1, 1)) && map.contains(handle(2, 1)));
    assert!(!map.contains(handle(0, 1)));
    drop(first);
    drop(map);
    log.assert_all_once();
}

#[test]
fn values_pending_reclamation_are_dropped_by_clear_and_by_the_maps_drop() {
    let log = Log::new(4);
    let mut map = SecondaryMap::with_config(with_batch(64));
    for id in 0..4 {
        map.insert(handle(id, 1), Tracked::new(id as usize, &log));
    }
    map.remove(handle(0, 1));
    map.insert(handle(1, 2), Tracked::new(1, &Log::new(2)));
    log.assert_none();
    map.clear();
    assert_eq!(log.dropped(), 4);
    let more = Log::new(2);
    map.insert(handle(0, 3), Tracked::new(0, &more));
    map.remove(handle(0, 3));
    map.insert(handle(9, 1), Tracked::new(1, &more));
    drop(map);
    log.assert_all_once();
    more.assert_all_once();
}

#[test]
fn a_panicking_drop_in_clear_is_raised_after_every_value_is_dropped() {
    let _quiet = quiet_panics("Tracked 3 panics in drop");
    let log = Log::new(6);
    let mut map = eager();
    for id in 0..6 {
        let value = if id == 3 {
            Tracked::panicking(3, &log)
        } else {
            Tracked::new(id, &log)
        };
        map.insert(handle(id as u32, 1), value);
    }
    assert!(catch_unwind(AssertUnwindSafe(|| map.clear())).is_err());
    log.assert_all_once();
    assert!(map.is_empty());
    assert!(map.insert(handle(3, 1), Tracked::new(0, &Log::new(1))));
    assert_eq!(map.len(), 1);
}

#[test]
fn a_panicking_drop_in_retain_leaves_the_map_consistent() {
    let _quiet = quiet_panics("Tracked 1 panics in drop");
    let log = Log::new(4);
    let mut map = eager();
    for id in 0..4 {
        let value = if id == 1 {
            Tracked::panicking(1, &log)
        } else {
            Tracked::new(id, &log)
        };
        map.insert(handle(id as u32, 1), value);
    }
    assert!(catch_unwind(AssertUnwindSafe(|| map.retain(|_, _| false))).is_err());
    assert_eq!((log.count(0), log.count(1)), (1, 1));
    assert!(
        !map.contains(handle(1, 1)),
        "its entry was emptied before the drop"
    );
    assert_eq!(map.len(), 2, "the rest kept");
    drop(map);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_in_a_drain_is_raised_after_the_rest_are_dropped() {
    let _quiet = quiet_panics("Tracked 2 panics in drop");
    let log = Log::new(5);
    let mut map = eager();
    for id in 0..5 {
        let value = if id == 2 {
            Tracked::panicking(2, &log)
        } else {
            Tracked::new(id, &log)
        };
        map.insert(handle(id as u32, 1), value);
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut drain = map.drain();
        drop(drain.next());
    }));
    assert!(result.is_err());
    log.assert_all_once();
    assert!(map.is_empty());
}

#[test]
fn a_panicking_drop_during_reclamation_is_contained() {
    let _quiet = quiet_panics("Tracked 0 panics in drop");
    let log = Log::new(2);
    let map = eager();
    map.insert(handle(0, 1), Tracked::panicking(0, &log));
    assert!(
        map.insert(handle(0, 2), Tracked::new(1, &log)),
        "replaces the panicking value"
    );
    assert!(crate::flush_until(|| {
        map.flush();
        log.count(0) == 1
    }));
    assert_eq!(
        log.count(0),
        1,
        "dropped by reclamation, its panic discarded"
    );
    assert_eq!(map.len(), 1);
    drop(map);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_in_the_maps_drop_drops_the_rest() {
    let _quiet = quiet_panics("Tracked 4 panics in drop");
    let log = Log::new(8);
    let map = eager();
    for id in 0..8 {
        let value = if id == 4 {
            Tracked::panicking(4, &log)
        } else {
            Tracked::new(id, &log)
        };
        map.insert(handle(id as u32, 1), value);
    }
    let log2 = Arc::clone(&log);
    assert!(catch_unwind(AssertUnwindSafe(move || drop(map))).is_err());
    log2.assert_all_once();
}

#[test]
fn replacements_while_the_room_is_held_go_to_the_value_pool_and_back() {
    let log = Log::new(5);
    let map = eager();
    let h = handle(2, 1);
    assert!(
        map.insert(h, Tracked::new(0, &log)),
        "into the entry's room"
    );
    let guard = pin();
    let first = map.get(h, &guard).unwrap();
    for id in 1..4 {
        // The room holds value 0 until the guard is gone: each replacement
        // goes to the value pool.
        assert!(map.insert(h, Tracked::new(id, &log)));
        map.flush();
    }
    log.assert_none();
    assert_eq!(first.id, 0, "the room still holds the first value");
    assert_eq!(map.with(h, |v| v.id), Some(3));
    drop(guard);
    assert!(crate::flush_until(|| {
        map.flush();
        (0..3).all(|id| log.count(id) == 1)
    }));
    // The room is free again: the next value goes there.
    assert!(map.insert(h, Tracked::new(4, &log)));
    assert_eq!(map.with(h, |v| v.id), Some(4));
    assert_eq!(map.len(), 1);
    drop(map);
    log.assert_all_once();
}
