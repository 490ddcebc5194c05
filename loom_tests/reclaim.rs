//! Reclamation: batches, the free-list splice, eras, generation retirement
//! and the pool's drop while reclamations are pending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use handle_pool::{pin, Config};

use super::harness::{
    collect_garbage, explore, explore_with, setup, spawn_parked, step, teardown, DropLog, Model,
    Pool, Reached, Recorder, Tracked,
};

/// Two removes fill one batch of two on the same stripe, racing on its head
/// (the loser relinks its slot): once released, the batch's links lead to
/// both slots, and both are reused.
#[test]
fn racing_removes_share_one_retirement_batch() {
    Model {
        config: Config::tiny(8, 2),
        values: 5,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                collect_garbage();
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 1));
                collect_garbage();
            }),
        ],
        teardown: teardown(|pool, r| {
            collect_garbage();
            r.insert(pool, 3);
            r.insert(pool, 4);
            let mut indices = [r.handle(3).index(), r.handle(4).index()];
            indices.sort_unstable();
            assert_eq!(indices, [0, 1], "both slots of the batch are reused");
            assert_eq!(
                r.log().drops(0) + r.log().drops(1),
                2,
                "the batch was reclaimed"
            );
            r.observe_all(pool);
        }),
    }
    .check("racing_removes_share_one_retirement_batch");
}

/// The ABA case of a Treiber stack. The free list is `A → B`. A pop reads
/// head `A` and its link `B`, and stalls; meanwhile another thread pops `A`
/// and `B`, removes both (one batch, `A` on top), drives the epoch and
/// inserts, which reclaims the batch (free list `B → A`) and pops `B`: the
/// head is `A` again, now with no successor, and `B` is occupied. The
/// stalled pop must not install `B`; the tag makes its CAS fail. An insert
/// does not pin, so the grace period does not protect it.
#[test]
fn free_list_pop_is_aba_safe_against_a_batch_splice() {
    let came_back = Reached::default();
    let seen = came_back.clone();
    Model {
        config: Config::tiny(8, 2),
        values: 7,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.insert(pool, 1);
            r.remove(pool, 0);
            r.remove(pool, 1);
            // Frees slots 0 and 1 at once: free list 1 → 0.
            pool.reclaim();
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 2);
            }),
            step(|pool, r| {
                r.insert(pool, 3);
                r.insert(pool, 4);
                r.remove(pool, 4);
                r.remove(pool, 3);
                collect_garbage();
                r.insert(pool, 5);
            }),
        ],
        teardown: teardown(move |pool, r| {
            if r.handle(2).index() == r.handle(3).index() {
                seen.mark();
            }
            r.insert(pool, 6);
            // `observe_all` reads every live value through its handle: two
            // handles sharing a slot would read the wrong value.
            r.observe_all(pool);
        }),
    }
    // The interleaving needs one preemption: the popper's, between its read
    // of the link and its CAS. One keeps this long model affordable.
    .check_with_preemptions("free_list_pop_is_aba_safe_against_a_batch_splice", Some(1));
    came_back.assert("a popper took a slot that was removed and spliced back meanwhile");
}

/// An exclusive `reclaim` frees a removed slot at once, while its batch is
/// still in the collector; the slot is reused. When the collector releases
/// that old batch later, racing an insert that reclaims released batches,
/// the batch must be discarded, not reclaimed: that would drop the new
/// occupant and free its slot under it.
#[test]
fn batch_released_after_exclusive_reclaim_is_discarded() {
    Model {
        config: Config::tiny(8, 1),
        values: 4,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            // Sealed (batch of one) and deferred.
            r.remove(pool, 0);
            pool.reclaim();
            let reused = r.insert(pool, 1);
            assert_eq!((reused.index(), reused.generation()), (0, 2));
        }),
        threads: vec![
            step(|_pool, _r| {
                // Releases the old batch onto the ready list.
                collect_garbage();
            }),
            step(|pool, r| {
                // Finds no free slot: reclaims released batches first.
                r.insert(pool, 2);
                r.get(pool, 1);
            }),
        ],
        teardown: teardown(|pool, r| {
            collect_garbage();
            r.insert(pool, 3);
            assert_eq!(
                r.log().drops(1),
                0,
                "the new occupant survives the old batch"
            );
            r.observe_all(pool);
        }),
    }
    .check("batch_released_after_exclusive_reclaim_is_discarded");
}

/// Generation limit 2 and room for two slots: slot 0's second occupant is
/// removed while another thread inserts. Slot 0 is retired, never reused;
/// the insert takes slot 1, and afterwards the pool is full.
#[test]
fn slot_at_the_generation_limit_is_retired() {
    Model {
        config: Config {
            max_slots: 2,
            ..Config::tiny(2, 1)
        },
        values: 4,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.remove(pool, 0);
            pool.reclaim();
            let last = r.insert(pool, 1);
            assert_eq!((last.index(), last.generation()), (0, 2));
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove(pool, 1));
                collect_garbage();
            }),
            step(|pool, r| {
                r.insert(pool, 2);
                r.contains(pool, 1);
            }),
        ],
        teardown: teardown(|pool, r| {
            collect_garbage();
            pool.reclaim();
            let fresh = r.handle(2);
            assert_eq!((fresh.index(), fresh.generation()), (1, 1));
            assert!(r.try_insert(pool, 3).is_none(), "slot 0 is retired");
            r.observe_all(pool);
        }),
    }
    .check("slot_at_the_generation_limit_is_retired");
}

/// The pool is dropped by one thread while a sealed batch of its removed
/// values is in the collector (and another batch is still being filled),
/// and another thread drives the collector meanwhile, so the batch's
/// closure runs before, during or after the drop: every value is dropped
/// exactly once, by the drop, and the closure that runs after the pool is
/// gone touches no value.
#[test]
fn pool_dropped_with_reclamation_pending_drops_each_value_once() {
    explore(
        "pool_dropped_with_reclamation_pending_drops_each_value_once",
        || {
            let log = DropLog::new(3);
            let pool = Pool::with_config(Config::tiny(8, 2));
            let mut r = Recorder::new(Arc::clone(&log));
            for id in 0..3 {
                r.insert(&pool, id);
            }
            let owner = spawn_parked(move || {
                assert!(r.remove(&pool, 0));
                // Completes the batch {0, 1}: deferred to the collector.
                assert!(r.remove(&pool, 1));
                // Starts the next batch, which stays unsealed.
                assert!(r.remove(&pool, 2));
                drop(pool);
                for id in 0..3 {
                    assert_eq!(r.log().drops(id), 1, "the pool's drop drops value {id}");
                }
            });
            collect_garbage();
            owner.finished();
            // Whatever is still pending runs now, and must drop nothing.
            collect_garbage();
            log.assert_each_dropped_once();
            owner.release();
        },
    );
}

/// One stripe, batches of two. Thread A removes two values, its second
/// remove filling and sealing the batch, while thread B flushes, which
/// takes whatever partial batch it finds (perhaps A's first value alone,
/// racing A's push onto it) and settles it. Each removed value ends in
/// exactly one batch, so it is dropped exactly once, never while read; and
/// once the threads are done, a flush with no guard held leaves no removed
/// value undropped.
#[test]
fn flush_racing_a_seal_drops_each_value_once() {
    Model {
        config: Config::tiny(8, 2),
        values: 3,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                assert!(r.remove(pool, 1));
            }),
            step(|pool, r| {
                r.flush(pool);
            }),
        ],
        teardown: teardown(|pool, r| {
            collect_garbage();
            r.flush(pool);
            for id in 0..2 {
                assert_eq!(
                    r.log().drops(id),
                    1,
                    "a flush with no guard held dropped removed value {id}"
                );
            }
            assert_eq!(r.log().drops(2), 0, "the live value is not dropped");
            r.observe_all(pool);
        }),
    }
    .check("flush_racing_a_seal_drops_each_value_once");
}

/// A batch is sealed and deferred while the main thread holds a guard
/// pinned before it, so its closure cannot run yet; the owner then takes
/// exclusive access: `reclaim` drops the value at once and the slot is
/// reused, and the pool is dropped. The main thread lets go of its guard
/// and collects concurrently, so the old-era closure runs before the
/// reclaim, between it and the drop, or after the drop, when it pushes
/// onto a ready list only its header still holds. Every value is dropped
/// exactly once, the new occupant is not dropped by the old batch, and the
/// late closure touches no value (and no storage: it holds none).
#[test]
fn deferred_batch_racing_exclusive_reclaim_and_drop() {
    let after_drop = Reached::default();
    let seen = after_drop.clone();
    explore(
        "deferred_batch_racing_exclusive_reclaim_and_drop",
        move || {
            let log = DropLog::new(3);
            let pool = Pool::with_config(Config::tiny(8, 1));
            let mut r = Recorder::new(Arc::clone(&log));
            r.insert(&pool, 0);
            r.insert(&pool, 1);
            // Pinned before the batch is deferred: its closure waits for this.
            let guard = pin();
            // Bookkeeping, not modelled: loom runs the threads one at a time.
            let dropped = Arc::new(AtomicBool::new(false));
            let owner_dropped = Arc::clone(&dropped);
            let owner = spawn_parked(move || {
                let mut pool = pool;
                // A batch of one: sealed and deferred.
                assert!(r.remove(&pool, 0));
                pool.reclaim();
                assert_eq!(r.log().drops(0), 1, "reclaim drops the value at once");
                let reused = r.insert(&pool, 2);
                assert_eq!((reused.index(), reused.generation()), (0, 2));
                assert!(pool.contains(r.handle(1)) && pool.contains(reused));
                drop(pool);
                owner_dropped.store(true, Ordering::Relaxed);
                for id in 0..3 {
                    assert_eq!(r.log().drops(id), 1, "value {id} dropped once by now");
                }
            });
            drop(guard);
            if dropped.load(Ordering::Relaxed) {
                // Only this thread's collections can run the closure now.
                seen.mark();
            }
            collect_garbage();
            owner.finished();
            collect_garbage();
            log.assert_each_dropped_once();
            owner.release();
        },
    );
    after_drop.assert("the old batch's closure ran after the pool was dropped");
}

/// Thread A pins, reads a value and keeps the reference, then flushes:
/// the flush seals, pushes the epoch (`settle`'s rounds) and reclaims on
/// the very thread whose guard protects that reference, while thread B
/// removes the value (a batch of one, deferred at once). The value is not
/// dropped while A's guard lives (A reads it again after the flush), and
/// exactly once afterwards. A flush rather than an insert: an insert pushes
/// the epoch only with two batches in flight or at `max_slots`, and at the
/// limit the one reusable slot here would be the guarded one, so the
/// insert would fail instead of reaching `settle`.
#[test]
fn flush_pushing_the_epoch_while_its_own_thread_holds_a_guard() {
    let removed_before_flush = Reached::default();
    let held = removed_before_flush.clone();
    Model {
        config: Config::tiny(8, 1),
        values: 1,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove(pool, 0));
            }),
            step(move |pool, r| {
                let guard = pin();
                let found: Option<&Tracked> = pool.get(r.handle(0), &guard);
                r.record_get(0, found.map(Tracked::id));
                if let Some(value) = found {
                    if !r.contains(pool, 0) {
                        // Its batch is in flight: the flush has work to do.
                        held.mark();
                    }
                    r.flush(pool);
                    assert_eq!(value.id(), 0, "the flush left the guarded value alone");
                }
                drop(guard);
            }),
        ],
        teardown: teardown(|pool, r| {
            collect_garbage();
            r.flush(pool);
            assert_eq!(r.log().drops(0), 1, "dropped once the guard is gone");
            r.observe_all(pool);
        }),
    }
    .check("flush_pushing_the_epoch_while_its_own_thread_holds_a_guard");
    removed_before_flush.assert("the value was removed before the flush, while guarded");
}

/// An owner removes a value (a batch of one, sealed on its stripe: its
/// grace marker stays in the owner's local bag) and then stays idle, never
/// pinning again, so the marker is never flushed. A flush on another thread
/// adopts the batch (defers a marker of its own and pushes the epoch) and
/// drops the value, racing the owner's seal. The owner's marker runs last,
/// after the owner exits and the pool is gone, and changes nothing. (The
/// race of the seal's push against a reclaimer's take is modelled without
/// the collector, in `lists`.)
#[test]
fn sealed_batch_of_an_idle_owner_is_adopted_by_a_flush() {
    // One preemption (529,074 executions and 140 s at two): the race of the
    // seal's push against a take, which needs more, is the `lists` model.
    explore_with(
        "sealed_batch_of_an_idle_owner_is_adopted_by_a_flush",
        Some(1),
        || {
            let log = DropLog::new(2);
            let pool = Arc::new(Pool::with_config(Config::tiny(8, 1)));
            let mut r = Recorder::new(Arc::clone(&log));
            let removed = r.insert(&pool, 0);
            let live = r.insert(&pool, 1);
            let owner_pool = Arc::clone(&pool);
            // Parked, not joined: see `Parked`.
            let owner = spawn_parked(move || assert!(owner_pool.remove(removed)));
            pool.flush();
            owner.finished();
            pool.flush();
            assert_eq!(
                log.drops(0),
                1,
                "removed by an idle owner, dropped by a flush elsewhere"
            );
            assert_eq!(log.drops(1), 0, "the live value is not dropped");
            assert!(pool.contains(live));
            drop(pool);
            owner.release();
            collect_garbage();
            log.assert_each_dropped_once();
        },
    );
}

/// An idle owner's sealed batch (as above, its marker never flushed),
/// adopted at once by back-pressure rounds on two threads. The adoption
/// watermark lets only the first to raise it defer a marker; the other
/// defers none and relies on that one, which reaches the global queue
/// before its adopter unpins. No marker is lost: a flush afterwards drops
/// the value, once.
#[test]
fn two_rounds_adopting_one_idle_batch_lose_no_marker() {
    explore_with(
        "two_rounds_adopting_one_idle_batch_lose_no_marker",
        Some(1),
        || {
            let log = DropLog::new(1);
            let pool = Arc::new(Pool::with_config(Config::tiny(8, 1)));
            let mut r = Recorder::new(Arc::clone(&log));
            let removed = r.insert(&pool, 0);
            let owner_pool = Arc::clone(&pool);
            // Parked, not joined: see `Parked`.
            let owner = spawn_parked(move || assert!(owner_pool.remove(removed)));
            owner.finished();
            let round_pool = Arc::clone(&pool);
            // Parked too: a joined thread's participant pins once more when
            // it is unregistered, after `join` (see `Parked`).
            let round = spawn_parked(move || round_pool.adopt_as_a_round_does());
            let deferred_here = pool.adopt_as_a_round_does();
            let deferred_there = round.finished();
            // Both saw the same count, and no marker can run before the
            // second adopter has raised the watermark: it is still pinned.
            assert!(
                deferred_here != deferred_there,
                "exactly one adopter defers a marker"
            );
            pool.flush();
            assert_eq!(
                log.drops(0),
                1,
                "removed by an idle owner, dropped by a flush after two adoptions"
            );
            drop(pool);
            owner.release();
            round.release();
            collect_garbage();
            log.assert_each_dropped_once();
        },
    );
}
