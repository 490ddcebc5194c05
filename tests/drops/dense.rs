//! `DensePool`: every value that enters is dropped exactly once, whichever
//! way it leaves (remove and reclamation, compaction, take, retain, drain,
//! clear, the pool's drop), also when a value's `Drop`, a sort's `Ord` or
//! comparison, a key function, or a closure panics; and a sort or a
//! compaction interrupted by a panic loses nothing and moves nothing twice.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use handle_pool::{pin, Config, DensePool, Handle};

use crate::common::{quiet_panics, Log, Rng, Tracked};

/// The panic message of the [`Tracked::panicking`] value with this id (see
/// `common`), for the ids these tests make panic.
fn drop_panic(id: usize) -> &'static str {
    match id {
        0 => "Tracked 0 panics in drop",
        3 => "Tracked 3 panics in drop",
        10 => "Tracked 10 panics in drop",
        17 => "Tracked 17 panics in drop",
        20 => "Tracked 20 panics in drop",
        30 => "Tracked 30 panics in drop",
        40 => "Tracked 40 panics in drop",
        _ => unreachable!("no marker for value {id}"),
    }
}

fn insert_all(pool: &DensePool<Tracked>, log: &Arc<Log>) -> Vec<Handle> {
    (0..log.len())
        .map(|id| pool.insert(Tracked::new(id, log)))
        .collect()
}

/// Each live handle resolves to its own value, and the pool is dense.
fn check_live(pool: &mut DensePool<Tracked>, live: &HashMap<Handle, usize>) {
    pool.compact();
    assert_eq!(pool.holes(), 0);
    assert_eq!(pool.len(), live.len());
    for (&h, &id) in live {
        assert_eq!(pool.with(h, |v| v.id), Some(id));
    }
    let in_slices: usize = pool.as_mut_slices().map(|s| s.len()).sum();
    assert_eq!(in_slices, live.len());
}

/// Flushes until `done` holds, for at most a few seconds: another test of
/// this binary may hold a guard for a while.
fn flush_until(pool: &DensePool<Tracked>, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        pool.flush();
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    done()
}

#[test]
fn every_exit_drops_each_value_once() {
    let log = Log::new(600);
    let mut pool = DensePool::new();
    let handles = insert_all(&pool, &log);
    let mut live: HashMap<Handle, usize> = handles.iter().copied().zip(0..).collect();
    // `&self` removals, some reclaimed by `flush`, the rest by compaction.
    for &h in &handles[..100] {
        assert!(pool.remove(h));
        live.remove(&h);
    }
    flush_until(&pool, || log.check_at_most_once() == 100);
    for &h in &handles[100..200] {
        assert!(pool.remove(h));
        live.remove(&h);
    }
    check_live(&mut pool, &live);
    assert_eq!(log.check_at_most_once(), 200);
    // `take`.
    for &h in &handles[200..250] {
        assert_eq!(pool.take(h).map(|v| v.id), Some(live.remove(&h).unwrap()));
    }
    assert_eq!(log.check_at_most_once(), 250);
    // `retain`.
    pool.retain(|_, v| v.id % 2 == 0);
    live.retain(|_, id| *id % 2 == 0);
    check_live(&mut pool, &live);
    assert_eq!(log.check_at_most_once(), 250 + 175);
    // `drain`, dropped part way.
    let mut drain = pool.drain();
    let (h, value) = drain.next().unwrap();
    assert_eq!(live.remove(&h), Some(value.id));
    drop(value);
    drop(drain);
    live.clear();
    assert!(pool.is_empty());
    assert_eq!(log.check_at_most_once(), 600);
    log.assert_all_once();
    // `clear` and the pool's drop.
    let second = Log::new(50);
    let handles = insert_all(&pool, &second);
    pool.remove(handles[0]);
    pool.clear();
    second.assert_all_once();
    let third = Log::new(50);
    let handles = insert_all(&pool, &third);
    pool.remove(handles[0]);
    pool.remove(handles[1]);
    drop(pool);
    third.assert_all_once();
    log.assert_all_once();
}

#[test]
fn a_removed_value_waits_for_the_guards_that_may_see_it() {
    let log = Log::new(1);
    let pool = DensePool::new();
    let h = pool.insert(Tracked::new(0, &log));
    let guard = pin();
    let seen = pool.get(h, &guard).unwrap();
    assert!(pool.remove(h));
    pool.flush();
    log.assert_none();
    assert_eq!(seen.id, 0);
    drop(guard);
    assert!(flush_until(&pool, || log.dropped() == 1));
    log.assert_all_once();
    drop(pool);
    log.assert_all_once();
}

#[test]
fn full_batches_are_reclaimed_by_the_removes_that_seal_them() {
    let log = Log::new(64);
    let pool: DensePool<Tracked> = DensePool::with_config(Config {
        batch: 8,
        stripes: 1,
        ..Config::default()
    });
    let handles = insert_all(&pool, &log);
    for &h in &handles {
        assert!(pool.remove(h));
    }
    // No flush: the seals reclaim their stripe's ready batches (all of
    // them, unless another test's guard holds some back for a while).
    let deadline = Instant::now() + Duration::from_secs(10);
    while log.check_at_most_once() < 56 && Instant::now() < deadline {
        let extra = pool.insert(Tracked::new(0, &Log::new(1)));
        pool.remove(extra);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(log.check_at_most_once() >= 56, "{log:?}");
    drop(pool);
    log.assert_all_once();
}

#[test]
fn compaction_drops_removed_values_even_while_a_guard_lives() {
    let log = Log::new(100);
    let mut pool = DensePool::new();
    let handles = insert_all(&pool, &log);
    let guard = pin();
    for &h in &handles[..60] {
        pool.remove(h);
    }
    pool.flush();
    // The guard holds reclamation back, but compaction needs `&mut`, which
    // proves no reference is out: it drops them all.
    pool.compact();
    assert_eq!(log.check_at_most_once(), 60);
    drop(guard);
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_during_compaction_drops_the_rest_once() {
    let marker_ids = [3usize, 17, 40];
    let _quiet: Vec<_> = marker_ids
        .iter()
        .map(|&id| quiet_panics(drop_panic(id)))
        .collect();
    let log = Log::new(50);
    let mut pool = DensePool::new();
    let handles: Vec<Handle> = (0..50)
        .map(|id| {
            let value = if marker_ids.contains(&id) {
                Tracked::panicking(id, &log)
            } else {
                Tracked::new(id, &log)
            };
            pool.insert(value)
        })
        .collect();
    let mut live: HashMap<Handle, usize> = handles.iter().copied().zip(0..).collect();
    for (id, &h) in handles.iter().enumerate() {
        if id % 2 == 1 || marker_ids.contains(&id) {
            pool.remove(h);
            live.remove(&h);
        }
    }
    let panicked = catch_unwind(AssertUnwindSafe(|| pool.compact()));
    assert!(panicked.is_err(), "the first panic comes out");
    assert_eq!(log.check_at_most_once(), 50 - live.len());
    check_live(&mut pool, &live);
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panic_in_a_sort_leaves_every_value_where_it_was() {
    let log = Log::new(200);
    let mut pool = DensePool::new();
    let handles = insert_all(&pool, &log);
    for &h in handles.iter().step_by(5) {
        pool.remove(h);
    }
    pool.compact();
    let before: Vec<(Handle, usize)> = {
        let guard = pin();
        pool.iter(&guard).map(|(h, v)| (h, v.id)).collect()
    };
    let _quiet = quiet_panics("comparison panics");
    let mut calls = 0;
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        pool.sort_by(|a, b| {
            calls += 1;
            if calls == 300 {
                panic!("comparison panics");
            }
            b.id.cmp(&a.id)
        })
    }));
    assert!(panicked.is_err());
    let _quiet = quiet_panics("key panics");
    let mut keys = 0;
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        pool.sort_by_key(|v| {
            keys += 1;
            if keys == 77 {
                panic!("key panics");
            }
            v.id
        })
    }));
    assert!(panicked.is_err());
    // A key whose `Ord` panics.
    #[derive(PartialEq, Eq)]
    struct Touchy(usize);
    impl PartialOrd for Touchy {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Touchy {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            if self.0 == 99 || other.0 == 99 {
                panic!("Ord panics");
            }
            self.0.cmp(&other.0)
        }
    }
    let _quiet = quiet_panics("Ord panics");
    let panicked = catch_unwind(AssertUnwindSafe(|| pool.sort_by_key(|v| Touchy(v.id))));
    assert!(panicked.is_err());
    let after: Vec<(Handle, usize)> = {
        let guard = pin();
        pool.iter(&guard).map(|(h, v)| (h, v.id)).collect()
    };
    assert_eq!(after, before, "no value moved, none lost or doubled");
    assert_eq!(
        log.check_at_most_once(),
        40,
        "only the removed values were dropped"
    );
    // A sort that completes moves them all, still each once.
    pool.sort_by(|a, b| b.id.cmp(&a.id));
    let guard = pin();
    let ids: Vec<usize> = pool.values(&guard).map(|v| v.id).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]));
    for (h, id) in before {
        assert_eq!(pool.get(h, &guard).map(|v| v.id), Some(id));
    }
    drop(guard);
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panic_in_retain_keeps_the_pool_dense_and_consistent() {
    let log = Log::new(100);
    let mut pool = DensePool::new();
    let handles = insert_all(&pool, &log);
    let _quiet = quiet_panics("keep panics");
    let mut visited = 0;
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        pool.retain(|_, v| {
            visited += 1;
            if visited == 40 {
                panic!("keep panics");
            }
            v.id % 3 != 0
        })
    }));
    assert!(panicked.is_err());
    let dropped = log.check_at_most_once();
    assert!(dropped > 0 && dropped < 40);
    let live: HashMap<Handle, usize> = handles
        .iter()
        .copied()
        .zip(0..)
        .filter(|&(h, _)| pool.contains(h))
        .collect();
    assert_eq!(live.len() + dropped, 100);
    check_live(&mut pool, &live);
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_in_retain_clear_drain_and_the_pools_drop_drops_the_rest() {
    let _quiet: Vec<_> = (0..4).map(|i| quiet_panics(drop_panic(i * 10))).collect();
    let make = |log: &Arc<Log>, pool: &DensePool<Tracked>| -> Vec<Handle> {
        (0..log.len())
            .map(|id| {
                let value = if id % 10 == 0 && id < 40 {
                    Tracked::panicking(id, log)
                } else {
                    Tracked::new(id, log)
                };
                pool.insert(value)
            })
            .collect()
    };
    // retain: the panic comes out of the first drop; the rest stay.
    let log = Log::new(40);
    let mut pool = DensePool::new();
    make(&log, &pool);
    assert!(catch_unwind(AssertUnwindSafe(|| pool.retain(|_, v| v.id != 20))).is_err());
    assert_eq!(log.check_at_most_once(), 1);
    assert_eq!(pool.len(), 39);
    assert!(catch_unwind(AssertUnwindSafe(|| pool.clear())).is_err());
    assert!(pool.is_empty());
    log.assert_all_once();
    // drain, dropped unused.
    let log = Log::new(40);
    make(&log, &pool);
    assert!(catch_unwind(AssertUnwindSafe(|| drop(pool.drain()))).is_err());
    assert!(pool.is_empty());
    log.assert_all_once();
    // The pool's drop, with removed values pending.
    let log = Log::new(40);
    let handles = make(&log, &pool);
    pool.remove(handles[10]);
    pool.remove(handles[11]);
    assert!(catch_unwind(AssertUnwindSafe(|| drop(pool))).is_err());
    log.assert_all_once();
}

#[test]
fn an_insert_whose_closure_panics_leaks_nothing() {
    let log = Log::new(2);
    let mut pool = DensePool::new();
    let kept = pool.insert(Tracked::new(0, &log));
    let _quiet = quiet_panics("no value made");
    let mut shown = None;
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_with(|h| {
            shown = Some(h);
            let _never_inserted = Tracked::new(1, &log);
            panic!("no value made");
        })
    }));
    assert!(panicked.is_err());
    assert!(!pool.contains(shown.unwrap()));
    assert_eq!(
        log.count(1),
        1,
        "the closure's value was dropped by the unwind"
    );
    assert_eq!(pool.holes(), 1);
    pool.compact();
    assert_eq!((pool.len(), pool.holes()), (1, 0));
    assert!(pool.contains(kept));
    drop(pool);
    log.assert_all_once();
}

#[test]
fn churn_with_compactions_drops_each_value_once() {
    let log = Log::new(20_000);
    let mut pool: DensePool<Tracked> = DensePool::with_config(Config {
        batch: 16,
        ..Config::tiny(6, 16)
    });
    let mut rng = Rng::new(5);
    let mut live: Vec<(Handle, usize)> = Vec::new();
    let as_map = |live: &[(Handle, usize)]| live.iter().copied().collect::<HashMap<_, _>>();
    for id in 0..20_000 {
        live.push((pool.insert(Tracked::new(id, &log)), id));
        if rng.below(3) != 0 {
            let (victim, _) = live.swap_remove(rng.below(live.len()));
            if rng.below(4) == 0 {
                assert!(pool.take(victim).is_some());
            } else {
                assert!(pool.remove(victim));
            }
        }
        if id % 997 == 0 {
            check_live(&mut pool, &as_map(&live));
        }
        if id % 1009 == 0 {
            pool.sort_by_key(|v| v.id % 7);
        }
    }
    check_live(&mut pool, &as_map(&live));
    assert_eq!(log.check_at_most_once(), 20_000 - live.len());
    drop(pool);
    log.assert_all_once();
}
