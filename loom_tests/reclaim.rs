//! Reclamation: batches, the free-list splice, eras, generation retirement
//! and the pool's drop while reclamations are pending.

use std::sync::Arc;

use handle_pool::{pin, Config};

use super::harness::{
    explore, setup, spawn_parked, step, teardown, DropLog, Model, Pool, Reached, Recorder, Tracked,
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
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 1));
            }),
        ],
        teardown: teardown(|pool, r| {
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
/// and `B`, removes both (one batch, `A` on top) and
/// inserts, which reclaims the batch (free list `B → A`) and pops `B`: the
/// head is `A` again, now with no successor, and `B` is occupied. The
/// stalled pop must not install `B`; the tag makes its CAS fail. An insert
/// does not announce, so no reader's announcement protects it.
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
    // The interleaving needs one preemption (the popper's, between its read
    // of the link and its CAS); the default bound explores 125,569
    // executions.
    .check("free_list_pop_is_aba_safe_against_a_batch_splice");
    came_back.assert("a popper took a slot that was removed and spliced back meanwhile");
}

/// An exclusive `reclaim` frees a removed slot at once, while its batch is
/// sealed and waiting; the slot is reused. Two inserts then race, each
/// reclaiming whatever is sealed: the old batch must never be reclaimed
/// again (`reclaim` discarded it), which would drop the new occupant and free its
/// slot under it.
#[test]
fn batch_sealed_before_exclusive_reclaim_is_discarded() {
    Model {
        config: Config::tiny(8, 1),
        values: 4,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            // Sealed (a batch of one).
            r.remove(pool, 0);
            pool.reclaim();
            let reused = r.insert(pool, 1);
            assert_eq!((reused.index(), reused.generation()), (0, 2));
        }),
        threads: vec![
            step(|pool, r| {
                // Finds no free slot: reclaims sealed batches first.
                r.insert(pool, 2);
            }),
            step(|pool, r| {
                r.insert(pool, 3);
                r.get(pool, 1);
            }),
        ],
        teardown: teardown(|pool, r| {
            assert_eq!(
                r.log().drops(1),
                0,
                "the new occupant survives the old batch"
            );
            r.observe_all(pool);
        }),
    }
    .check("batch_sealed_before_exclusive_reclaim_is_discarded");
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
            }),
            step(|pool, r| {
                r.insert(pool, 2);
                r.contains(pool, 1);
            }),
        ],
        teardown: teardown(|pool, r| {
            pool.reclaim();
            let fresh = r.handle(2);
            assert_eq!((fresh.index(), fresh.generation()), (1, 1));
            assert!(r.try_insert(pool, 3).is_none(), "slot 0 is retired");
            r.observe_all(pool);
        }),
    }
    .check("slot_at_the_generation_limit_is_retired");
}

/// The pool is dropped while a sealed batch of its removed values waits
/// on its stripe's list (and another batch is still being filled), by
/// whichever of two threads lets go of it last, while the other flushes:
/// every value is dropped exactly once, by the flush or by the drop.
#[test]
fn pool_dropped_with_reclamation_pending_drops_each_value_once() {
    explore(
        "pool_dropped_with_reclamation_pending_drops_each_value_once",
        || {
            let log = DropLog::new(3);
            // A loom `Arc`: which thread drops the pool is what is explored.
            let pool = loom::sync::Arc::new(Pool::with_config(Config::tiny(8, 2)));
            let mut r = Recorder::new(Arc::clone(&log));
            for id in 0..3 {
                r.insert(&pool, id);
            }
            let owner_pool = loom::sync::Arc::clone(&pool);
            let owner = spawn_parked(move || {
                assert!(r.remove(&owner_pool, 0));
                // Completes the batch {0, 1}: sealed.
                assert!(r.remove(&owner_pool, 1));
                // Starts the next batch, which stays unsealed.
                assert!(r.remove(&owner_pool, 2));
                drop(owner_pool);
            });
            pool.flush();
            drop(pool);
            owner.finished();
            log.assert_each_dropped_once();
            owner.release();
        },
    );
}

/// One stripe, batches of two. Thread A removes two values, its second
/// remove filling and sealing the batch, while thread B flushes, which
/// takes whatever partial batch it finds (perhaps A's first value alone,
/// racing A's push onto it) and reclaims it. Each removed value ends in
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

/// A batch is sealed while the main thread holds a guard pinned before it,
/// so it cannot be reclaimed yet; the owner then takes exclusive access:
/// `reclaim` drops the value at once and the slot is reused, and the pool
/// is dropped. The main thread lets go of its guard concurrently. Every
/// value is dropped exactly once, and the new occupant is not dropped by
/// the old batch.
#[test]
fn guarded_batch_racing_exclusive_reclaim_and_drop() {
    explore(
        "guarded_batch_racing_exclusive_reclaim_and_drop",
        move || {
            let log = DropLog::new(3);
            let pool = Pool::with_config(Config::tiny(8, 1));
            let mut r = Recorder::new(Arc::clone(&log));
            r.insert(&pool, 0);
            r.insert(&pool, 1);
            // Pinned before the batch is sealed: it holds the batch back.
            let guard = pin();
            let owner = spawn_parked(move || {
                let mut pool = pool;
                // A batch of one: sealed.
                assert!(r.remove(&pool, 0));
                pool.reclaim();
                assert_eq!(r.log().drops(0), 1, "reclaim drops the value at once");
                let reused = r.insert(&pool, 2);
                assert_eq!((reused.index(), reused.generation()), (0, 2));
                assert!(pool.contains(r.handle(1)) && pool.contains(reused));
                drop(pool);
                for id in 0..3 {
                    assert_eq!(r.log().drops(id), 1, "value {id} dropped once by now");
                }
            });
            drop(guard);
            owner.finished();
            log.assert_each_dropped_once();
            owner.release();
        },
    );
}

/// Thread A pins, reads a value and keeps the reference, then flushes:
/// the flush seals and reclaims on the very thread whose guard protects
/// that reference, while thread B removes the value (a batch of one,
/// sealed at once). The value is not dropped while A's guard lives (A
/// reads it again after the flush), and exactly once afterwards.
#[test]
fn flush_while_its_own_thread_holds_a_guard() {
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
                        // Its batch is sealed: the flush has work to do.
                        held.mark();
                    }
                    r.flush(pool);
                    assert_eq!(value.id(), 0, "the flush left the guarded value alone");
                }
                drop(guard);
            }),
        ],
        teardown: teardown(|pool, r| {
            r.flush(pool);
            assert_eq!(r.log().drops(0), 1, "dropped once the guard is gone");
            r.observe_all(pool);
        }),
    }
    .check("flush_while_its_own_thread_holds_a_guard");
    removed_before_flush.assert("the value was removed before the flush, while guarded");
}

/// An owner removes a value (a batch of one, sealed on its stripe) and then
/// stays idle. A flush on another thread reclaims the batch and drops the
/// value, racing the owner's seal: nothing waits for the owner to act
/// again. (The race of the seal's push against a reclaimer's take is
/// modelled alone in `lists`.)
#[test]
fn sealed_batch_of_an_idle_owner_is_reclaimed_by_a_flush() {
    explore(
        "sealed_batch_of_an_idle_owner_is_reclaimed_by_a_flush",
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
            log.assert_each_dropped_once();
        },
    );
}
