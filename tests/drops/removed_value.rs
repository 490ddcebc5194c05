//! The value a concurrent removal hands over (`remove_get`, `remove_with`):
//! dropped exactly once, by reclamation, never while its guard or closure
//! can still read it, also when the closure panics and when threads race
//! for the same values.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use handle_pool::{pin, HandlePool};

use crate::common::{self, quiet_panics, with_batch, Log, StartLine, Tracked};
use crate::flush_until;

#[test]
fn remove_get_drops_the_value_once_after_its_guard() {
    let log = Log::new(3);
    let pool: HandlePool<Tracked> = HandlePool::with_config(with_batch(1));
    let h = pool.insert(Tracked::new(0, &log));
    let other = pool.insert(Tracked::new(1, &log));
    let guard = pin();
    let value = pool.remove_get(h, &guard).expect("live");
    assert_eq!(value.id, 0);
    assert!(!pool.contains(h), "stale at once");
    assert!(pool.remove_get(h, &guard).is_none(), "removed once");
    // Sealed at once (batches of one), but held back by the guard.
    pool.flush();
    pool.insert(Tracked::new(2, &log));
    assert_eq!(log.count(0), 0, "dropped while its guard lived");
    assert_eq!(value.id, 0);
    drop(guard);
    assert!(flush_until(|| {
        pool.flush();
        log.count(0) == 1
    }));
    assert!(pool.contains(other));
    drop(pool);
    log.assert_all_once();
}

#[test]
fn remove_with_drops_the_value_once_after_its_closure() {
    let log = Log::new(1);
    let pool: HandlePool<Tracked> = HandlePool::with_config(with_batch(1));
    let h = pool.insert(Tracked::new(0, &log));
    let seen = pool.remove_with(h, |value| {
        // The batch is sealed; a flush from inside the closure must not
        // drop the value it is reading.
        pool.flush();
        assert_eq!(log.count(0), 0);
        value.id
    });
    assert_eq!(seen, Some(0));
    assert_eq!(pool.remove_with(h, |value| value.id), None);
    assert!(flush_until(|| {
        pool.flush();
        log.count(0) == 1
    }));
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panicking_remove_with_closure_still_removes_and_drops_once() {
    let _quiet = quiet_panics("remove_with closure panics");
    let log = Log::new(1);
    let pool: HandlePool<Tracked> = HandlePool::with_config(with_batch(1));
    let h = pool.insert(Tracked::new(0, &log));
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.remove_with(h, |_| panic!("remove_with closure panics"))
    }));
    assert!(result.is_err());
    assert!(!pool.contains(h), "removed before the closure ran");
    assert_eq!(pool.len(), 0);
    // The closure's read ended with the unwind: reclamation goes on.
    assert!(flush_until(|| {
        pool.flush();
        log.count(0) == 1
    }));
    drop(pool);
    log.assert_all_once();
}

#[test]
fn values_handed_over_by_removal_go_to_one_thread_each_and_drop_once() {
    const VALUES: usize = 4_000;
    const THREADS: usize = 4;
    let log = Log::new(VALUES);
    let pool: HandlePool<Tracked> = HandlePool::with_config(with_batch(8));
    let handles: Vec<_> = (0..VALUES)
        .map(|id| pool.insert(Tracked::new(id, &log)))
        .collect();
    let got = AtomicUsize::new(0);
    let start = StartLine::new(THREADS);
    common::scope(|s| {
        for t in 0..THREADS {
            let (pool, handles, got, start, log) = (&pool, &handles, &got, &start, &log);
            s.spawn(move || {
                start.wait();
                // Every thread races for every value, in its own order, and
                // reads what it got after others may have flushed.
                let order: Box<dyn Iterator<Item = usize>> = if t % 2 == 0 {
                    Box::new(0..VALUES)
                } else {
                    Box::new((0..VALUES).rev())
                };
                let mut guard = pin();
                for (n, id) in order.enumerate() {
                    let h = handles[id];
                    let mine = if t < THREADS / 2 {
                        pool.remove_get(h, &guard).map(|value| {
                            pool.flush();
                            assert_eq!(log.count(value.id), 0, "read after its drop");
                            value.id
                        })
                    } else {
                        pool.remove_with(h, |value| {
                            pool.flush();
                            assert_eq!(log.count(value.id), 0, "read after its drop");
                            value.id
                        })
                    };
                    if let Some(seen) = mine {
                        assert_eq!(seen, id);
                        got.fetch_add(1, Ordering::Relaxed);
                    }
                    if n % 64 == 0 {
                        guard.repin();
                    }
                }
            });
        }
    });
    assert_eq!(
        got.load(Ordering::Relaxed),
        VALUES,
        "each value handed over once"
    );
    assert!(pool.is_empty());
    assert!(flush_until(|| {
        pool.flush();
        log.dropped() == VALUES
    }));
    assert_eq!(log.check_at_most_once(), VALUES);
    drop(pool);
    log.assert_all_once();
}

/// Alone in a child process: its guard, held across 2,000 flushes of the
/// other thread, holds back every pool's batches in the process (reclamation
/// is process-wide), and with 8 test threads on a loaded 2-core host this
/// test ran past the 10 s that the others' `flush_until` waits: they failed,
/// and one aborted (a panicking value dropped while its test unwound).
#[test]
fn a_value_handed_over_under_a_guard_survives_other_threads_churn() {
    common::in_child_process(
        module_path!(),
        "a_value_handed_over_under_a_guard_survives_other_threads_churn",
        || {
            let log = Log::new(1);
            let pool: Arc<HandlePool<Tracked>> = Arc::new(HandlePool::with_config(with_batch(1)));
            let h = pool.insert(Tracked::new(0, &log));
            let guard = pin();
            let value = pool.remove_get(h, &guard).expect("live");
            let churn = Arc::clone(&pool);
            let other = Log::new(2_000);
            let other_log = Arc::clone(&other);
            thread::spawn(move || {
                for id in 0..2_000 {
                    let h = churn.insert(Tracked::new(id, &other_log));
                    churn.remove(h);
                    churn.flush();
                }
            })
            .join()
            .unwrap();
            assert_eq!(value.id, 0);
            assert_eq!(log.count(0), 0, "dropped while its guard lived");
            drop(guard);
            assert!(flush_until(|| {
                pool.flush();
                log.count(0) == 1
            }));
            drop(pool);
            log.assert_all_once();
            other.assert_all_once();
        },
    );
}
