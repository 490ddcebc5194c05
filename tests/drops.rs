//! Drop counting: every value that enters a pool is dropped exactly once,
//! whichever way it leaves (remove and reclamation, take, clear, drain,
//! retain, the pool's drop), also when a closure or a value's `Drop` panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use handle_pool::{pin, Config, Handle, HandlePool};

mod common;
use common::{in_child_process, with_batch as batch_config, Log, PinnedThread, Tracked};

// Modules of this binary live in `tests/drops/`.
#[path = "drops/dense.rs"]
mod dense;
#[path = "drops/removed_value.rs"]
mod removed_value;
#[path = "drops/secondary.rs"]
mod secondary;

/// Tries `done` until it holds, for at most a few seconds. (The pins and
/// flushes between tries touch only crossbeam-epoch's own state, which the
/// pool's reclamation no longer goes through.)
fn flush_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        for _ in 0..16 {
            pin().flush();
        }
        thread::yield_now();
    }
    done()
}

fn insert_all(pool: &HandlePool<Tracked>, log: &Arc<Log>) -> Vec<Handle> {
    (0..log.len())
        .map(|id| pool.insert(Tracked::new(id, log)))
        .collect()
}

#[test]
fn remove_then_reclaim_drops_each_value_once() {
    let log = Log::new(40);
    let mut pool = HandlePool::with_config(batch_config(64));
    let handles = insert_all(&pool, &log);
    for &h in &handles {
        assert!(pool.remove(h));
        assert!(!pool.remove(h));
    }
    // 40 removes do not fill a batch of 64: nothing has been dropped.
    log.assert_none();
    assert!(pool.is_empty());
    pool.reclaim();
    log.assert_all_once();
    pool.reclaim();
    drop(pool);
    log.assert_all_once();
}

/// Alone in a child process: reclamation is process-wide, so a guard
/// that another test of this binary holds (`PinnedThread`, a module's
/// iteration) holds back the batches this test waits for, and under load it
/// failed that way ("capacity grew from 800 to 1856 over 1057 probes").
#[test]
fn reclamation_by_pool_traffic_drops_each_value_once() {
    in_child_process(
        module_path!(),
        "reclamation_by_pool_traffic_drops_each_value_once",
        || {
            // 800 removes on one thread fill 100 batches of 8, all sealed. No
            // reader holds them back, so they are reclaimed by the pool's own
            // traffic (inserts that find no free slot, sweeps), with no `reclaim`
            // call: keep inserting, bounded.
            let log = Log::new(800);
            let pool = HandlePool::with_config(batch_config(8));
            let handles = insert_all(&pool, &log);
            for &h in &handles {
                assert!(pool.remove(h));
            }
            let capacity = pool.capacity();
            let probes = Log::new(4000);
            let mut probe_handles = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while log.check_at_most_once() < 800
                && probe_handles.len() < 4000
                && Instant::now() < deadline
            {
                pin().flush();
                let id = probe_handles.len();
                probe_handles.push(pool.insert(Tracked::new(id, &probes)));
            }
            assert_eq!(
                log.check_at_most_once(),
                800,
                "values dropped without reclaim() after {} probe inserts",
                probe_handles.len()
            );
            log.assert_all_once();
            for h in &handles {
                assert!(!pool.contains(*h));
            }
            for (id, &h) in probe_handles.iter().enumerate() {
                assert_eq!(pool.with(h, |v| v.id), Some(id));
            }
            assert_eq!(pool.len(), probe_handles.len());
            // Freed slots were reused: without reuse the probes would have needed
            // another bucket of 1024 slots.
            assert!(
                pool.capacity() < capacity + 800,
                "capacity grew from {capacity} to {} over {} probes",
                pool.capacity(),
                probe_handles.len()
            );
            drop(pool);
            log.assert_all_once();
            for id in 0..probe_handles.len() {
                assert_eq!(probes.count(id), 1);
            }
        },
    );
}

#[test]
fn take_hands_the_value_over_and_the_pool_never_drops_it() {
    let log = Log::new(10);
    let mut pool = HandlePool::new();
    let handles = insert_all(&pool, &log);
    let taken: Vec<Tracked> = handles[..5]
        .iter()
        .map(|&h| pool.take(h).expect("live"))
        .collect();
    for (i, value) in taken.iter().enumerate() {
        assert_eq!(value.id, i);
    }
    log.assert_none();
    assert_eq!(pool.len(), 5);
    assert!(pool.take(handles[0]).is_none());
    drop(taken);
    for id in 0..5 {
        assert_eq!(log.count(id), 1);
    }
    for id in 5..10 {
        assert_eq!(log.count(id), 0);
    }
    drop(pool);
    log.assert_all_once();
}

#[test]
fn clear_drops_live_and_pending_values_once() {
    let log = Log::new(30);
    let mut pool = HandlePool::with_config(batch_config(64));
    let handles = insert_all(&pool, &log);
    for &h in &handles[..10] {
        assert!(pool.remove(h));
    }
    log.assert_none();
    pool.clear();
    log.assert_all_once();
    assert!(pool.is_empty());
    for &h in &handles {
        assert!(!pool.contains(h));
    }
    pool.clear();
    drop(pool);
    log.assert_all_once();
}

#[test]
fn drain_consumed_hands_every_value_over() {
    let log = Log::new(20);
    let mut pool = HandlePool::new();
    let handles = insert_all(&pool, &log);
    let drained: Vec<(Handle, Tracked)> = pool.drain().collect();
    log.assert_none();
    assert_eq!(drained.len(), 20);
    for (h, value) in &drained {
        assert_eq!(*h, handles[value.id]);
    }
    assert!(pool.is_empty());
    drop(drained);
    log.assert_all_once();
    drop(pool);
    log.assert_all_once();
}

#[test]
fn drain_dropped_half_way_drops_the_rest() {
    let log = Log::new(20);
    let mut pool = HandlePool::new();
    let handles = insert_all(&pool, &log);
    let mut drain = pool.drain();
    let first: Vec<(Handle, Tracked)> = drain.by_ref().take(7).collect();
    log.assert_none();
    drop(drain);
    // The 13 not yielded were dropped with the iterator; ours are alive.
    assert_eq!(log.check_at_most_once(), 13);
    for (_, value) in &first {
        assert_eq!(log.count(value.id), 0);
    }
    assert!(pool.is_empty());
    for &h in &handles {
        assert!(!pool.contains(h));
    }
    drop(first);
    log.assert_all_once();
    drop(pool);
    log.assert_all_once();
}

#[test]
fn retain_drops_exactly_the_rejected_values() {
    let log = Log::new(30);
    let mut pool = HandlePool::new();
    let handles = insert_all(&pool, &log);
    pool.retain(|_, value| value.id % 3 != 0);
    for (id, &h) in handles.iter().enumerate() {
        let expected = u32::from(id % 3 == 0);
        assert_eq!(log.count(id), expected, "value {id}");
        assert_eq!(pool.contains(h), id % 3 != 0);
    }
    assert_eq!(pool.len(), 20);
    drop(pool);
    log.assert_all_once();
}

#[test]
fn pool_drop_drops_live_values_once() {
    let log = Log::new(100);
    let pool = HandlePool::new();
    let handles = insert_all(&pool, &log);
    for &h in &handles[..30] {
        assert!(pool.remove(h));
    }
    drop(pool);
    log.assert_all_once();
}

#[test]
fn pool_drop_with_reclamation_pending_behind_a_pinned_thread() {
    let log = Log::new(64);
    // Batches of 4: the removes below seal 16 batches, and the pinned
    // thread holds every one of them back.
    let pool = HandlePool::with_config(batch_config(4));
    let handles = insert_all(&pool, &log);

    let holder = PinnedThread::start();

    for &h in &handles {
        assert!(pool.remove(h));
    }
    for _ in 0..100 {
        pin().flush();
    }
    // The holder pinned before the removes: no batch can have been
    // reclaimed.
    log.assert_none();

    // The pool's drop claims every pending value itself.
    drop(pool);
    log.assert_all_once();

    holder.release();
    // Nothing of the pool's is left to run: its drop discarded the sealed
    // batches, and no value may be dropped again.
    for _ in 0..2000 {
        pin().flush();
    }
    log.assert_all_once();
}

#[test]
fn reclaim_behind_a_pinned_thread_drops_each_value_once() {
    let log = Log::new(64);
    let mut pool = HandlePool::with_config(batch_config(4));
    let handles = insert_all(&pool, &log);
    let holder = PinnedThread::start();
    for &h in &handles {
        assert!(pool.remove(h));
    }
    log.assert_none();
    pool.reclaim();
    log.assert_all_once();
    holder.release();
    // `reclaim` discarded the sealed batches: nothing reclaims them later,
    // and no value may be dropped again.
    for _ in 0..2000 {
        pin().flush();
    }
    log.assert_all_once();
    let more = Log::new(64);
    let again = insert_all(&pool, &more);
    for (id, &h) in again.iter().enumerate() {
        assert_eq!(pool.with(h, |v| v.id), Some(id));
    }
    log.assert_all_once();
    drop(pool);
    log.assert_all_once();
    more.assert_all_once();
}

#[test]
fn a_panicking_insert_with_gives_the_slot_back_and_leaks_nothing() {
    let log = Log::new(3);
    let pool: HandlePool<Tracked> = HandlePool::with_config(Config::tiny(100, 64));
    let mut shown = None;
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_with(|h| {
            shown = Some(h);
            // A value made and then lost to the unwind.
            let _doomed = Tracked::new(0, &log);
            panic!("the closure fails");
        })
    }));
    assert!(result.is_err());
    assert_eq!(log.count(0), 1, "the closure's value was dropped once");
    let shown = shown.expect("the closure ran");
    assert!(pool.is_empty());
    assert!(!pool.contains(shown));
    assert_eq!(pool.with(shown, |v| v.id), None);
    assert!(!pool.remove(shown));

    // The slot is given back: the next insert reuses it, with a newer generation.
    let h = pool.insert(Tracked::new(1, &log));
    assert_eq!(h.index(), shown.index());
    assert!(h.generation() > shown.generation());
    assert!(!pool.contains(shown), "the shown handle stays stale");
    assert_eq!(pool.with(h, |v| v.id), Some(1));
    // The capacity did not grow for the failed insert.
    assert_eq!(pool.capacity(), 1);
    let h2 = pool.insert_with(|_| Tracked::new(2, &log));
    assert_eq!(pool.len(), 2);
    assert_eq!(pool.with(h2, |v| v.id), Some(2));
    assert!(!pool.contains(shown));
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_in_reclaim_propagates_after_the_rest_are_dropped() {
    let log = Log::new(10);
    let mut pool = HandlePool::with_config(batch_config(64));
    let mut handles = Vec::new();
    for id in 0..10 {
        let value = if id == 3 || id == 7 {
            Tracked::panicking(id, &log)
        } else {
            Tracked::new(id, &log)
        };
        handles.push(pool.insert(value));
    }
    for &h in &handles[..8] {
        assert!(pool.remove(h));
    }
    let result = catch_unwind(AssertUnwindSafe(|| pool.reclaim()));
    assert!(result.is_err(), "the Drop panic propagates from reclaim");
    for id in 0..8 {
        assert_eq!(log.count(id), 1, "value {id}");
    }
    for id in 8..10 {
        assert_eq!(log.count(id), 0, "value {id}");
    }
    // Consistent and usable.
    assert_eq!(pool.len(), 2);
    assert!(!pool.contains(handles[3]));
    assert!(pool.contains(handles[8]) && pool.contains(handles[9]));
    pool.reclaim(); // nothing pending: no panic
    let more = Log::new(10);
    let again = insert_all(&pool, &more);
    assert_eq!(pool.len(), 12);
    for (id, &h) in again.iter().enumerate() {
        assert_eq!(pool.with(h, |v| v.id), Some(id));
    }
    drop(pool);
    log.assert_all_once();
    more.assert_all_once();
}

/// Alone in a child process, for the reason above: it waits for a
/// reclamation that a guard held by another test would hold back.
#[test]
fn a_panicking_drop_during_reclamation_is_contained() {
    in_child_process(
        module_path!(),
        "a_panicking_drop_during_reclamation_is_contained",
        || {
            // A batch of 4 with one panicking value, reclaimed by the insert that
            // finds no free slot: the panic must not escape it, and the rest of
            // the batch is reclaimed and its slots reused.
            let log = Log::new(4);
            let pool = HandlePool::with_config(Config {
                max_slots: 4,
                fresh_block: 4,
                stripes: 1,
                batch: 4,
                ..Config::default()
            });
            let handles: Vec<Handle> = (0..4)
                .map(|id| {
                    if id == 1 {
                        pool.insert(Tracked::panicking(id, &log))
                    } else {
                        pool.insert(Tracked::new(id, &log))
                    }
                })
                .collect();
            for &h in &handles {
                assert!(pool.remove(h));
            }
            // Refill the pool: an insert can only succeed once the batch has been
            // reclaimed, which drops all four values.
            let more = Log::new(4);
            let mut again = Vec::new();
            let refilled = flush_until(|| {
                while again.len() < 4 {
                    match pool.try_insert(Tracked::new(again.len(), &more)) {
                        Ok(h) => again.push(h),
                        Err(e) => {
                            // Not a value of the pool: drop it against a scratch
                            // log, so it is neither counted nor leaked.
                            let mut refused = e.into_inner();
                            refused.log = Log::new(4);
                            drop(refused);
                            return false;
                        }
                    }
                }
                true
            });
            assert!(refilled, "only {} slots came back", again.len());
            log.assert_all_once();
            assert_eq!(pool.len(), 4);
            for (id, &h) in again.iter().enumerate() {
                assert_eq!(pool.with(h, |v| v.id), Some(id));
            }
            for &h in &handles {
                assert!(!pool.contains(h));
            }
            drop(pool);
            log.assert_all_once();
            more.assert_all_once();
        },
    );
}

#[test]
fn a_panicking_drop_after_take_is_the_callers() {
    let log = Log::new(3);
    let mut pool = HandlePool::new();
    let a = pool.insert(Tracked::panicking(0, &log));
    let b = pool.insert(Tracked::new(1, &log));
    let taken = pool.take(a).expect("live");
    log.assert_none();
    assert_eq!(pool.len(), 1);
    assert!(!pool.contains(a));
    let result = catch_unwind(AssertUnwindSafe(|| drop(taken)));
    assert!(result.is_err());
    assert_eq!(log.count(0), 1);
    let c = pool.insert(Tracked::new(2, &log));
    assert!(pool.contains(b) && pool.contains(c));
    assert_eq!(pool.len(), 2);
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_in_clear_leaves_the_pool_consistent() {
    let log = Log::new(10);
    let mut pool = HandlePool::with_config(batch_config(64));
    let handles: Vec<Handle> = (0..10)
        .map(|id| {
            if id == 4 {
                pool.insert(Tracked::panicking(id, &log))
            } else {
                pool.insert(Tracked::new(id, &log))
            }
        })
        .collect();
    assert!(pool.remove(handles[9]));
    let result = catch_unwind(AssertUnwindSafe(|| pool.clear()));
    assert!(result.is_err(), "the Drop panic propagates from clear");
    // Every live value was dropped exactly once (the drain finishes while
    // unwinding); the pending one is dropped at most once so far.
    for id in 0..9 {
        assert_eq!(log.count(id), 1, "value {id}");
    }
    assert!(log.count(9) <= 1);
    assert!(pool.is_empty());
    for &h in &handles {
        assert!(!pool.contains(h));
    }
    pool.reclaim();
    log.assert_all_once();
    let more = Log::new(5);
    let again = insert_all(&pool, &more);
    assert_eq!(pool.len(), 5);
    assert!(again.iter().all(|&h| pool.contains(h)));
    drop(pool);
    log.assert_all_once();
    more.assert_all_once();
}

#[test]
fn a_panicking_drop_in_retain_leaves_the_pool_consistent() {
    let log = Log::new(10);
    let mut pool = HandlePool::new();
    let handles: Vec<Handle> = (0..10)
        .map(|id| {
            if id == 2 {
                pool.insert(Tracked::panicking(id, &log))
            } else {
                pool.insert(Tracked::new(id, &log))
            }
        })
        .collect();
    let result = catch_unwind(AssertUnwindSafe(|| pool.retain(|_, v| v.id % 2 == 1)));
    assert!(result.is_err());
    // Values visited before the panic were decided; the rest are kept.
    assert_eq!(log.count(0), 1);
    assert_eq!(log.count(2), 1);
    assert!(!pool.contains(handles[0]) && !pool.contains(handles[2]));
    let live = handles.iter().filter(|&&h| pool.contains(h)).count();
    assert_eq!(pool.len(), live);
    for (id, &h) in handles.iter().enumerate() {
        assert_eq!(
            log.count(id) == 1,
            !pool.contains(h),
            "value {id}: dropped iff gone"
        );
    }
    let h = pool.insert(Tracked::new(0, &Log::new(1)));
    assert!(pool.contains(h));
    drop(pool);
    log.assert_all_once();
}

#[test]
fn a_panicking_drop_in_the_pool_drop_propagates_after_the_rest() {
    let log = Log::new(20);
    let pool = HandlePool::with_config(batch_config(64));
    let handles: Vec<Handle> = (0..20)
        .map(|id| {
            if id == 5 || id == 15 {
                pool.insert(Tracked::panicking(id, &log))
            } else {
                pool.insert(Tracked::new(id, &log))
            }
        })
        .collect();
    // One panicking value pending, one live.
    assert!(pool.remove(handles[5]));
    assert!(pool.remove(handles[6]));
    let result = catch_unwind(AssertUnwindSafe(|| drop(pool)));
    assert!(
        result.is_err(),
        "the Drop panic propagates from the pool's drop"
    );
    log.assert_all_once();
}
