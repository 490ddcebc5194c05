//! Magazines: an owner's plain-store sections against a revoker (see
//! `docs/magazine.md`). Two stripes, so the model's main thread (number 0)
//! and the spawned thread (number 1) each own a magazine.

use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};

use handle_pool::{Config, Handle};

use super::harness::{
    explore, setup, spawn_parked, step, teardown, DropLog, Model, Parked, Pool, Reached, Recorder,
};

/// Two stripes, each thread its own magazine; batches of four, so removals
/// stay in a partial batch that only a revoker can seal.
fn with_magazines(max_slots: Option<u32>) -> Config {
    let tiny = Config::tiny(8, 4);
    Config {
        stripes: 2,
        magazines: true,
        max_slots: max_slots.unwrap_or(tiny.max_slots),
        ..tiny
    }
}

/// `config` with its first four slots in the flat region (the rest in
/// buckets): a removal there by a magazine's owner takes `RawPool::remove`'s
/// inline path, which hands a refused section to `remove_slow` (the models
/// with buckets only reach `remove_at`).
fn in_the_flat_region(config: Config) -> Config {
    Config {
        flat_slots: 4,
        ..config
    }
}

/// The two flush models' start: a pool made with `config` holding values
/// 0, 1 and 2, and the recorder that inserted them (for the owner to remove
/// 0 and 1 with).
fn three_values(config: Config) -> (Arc<DropLog>, Arc<Pool>, Recorder) {
    let log = DropLog::new(3);
    let pool = Arc::new(Pool::with_config(config));
    let mut r = Recorder::new(Arc::clone(&log));
    for id in 0..3 {
        r.insert(&pool, id);
    }
    (log, pool, r)
}

/// Once the owner is done, a flush drops its two removed values (0 and 1)
/// and not the live one (2); the pool's drop drops each value exactly once.
fn flush_after_the_owner(pool: Arc<Pool>, log: &DropLog) {
    pool.flush();
    assert_eq!(log.drops(0), 1, "removed value 0 dropped once");
    assert_eq!(log.drops(1), 1, "removed value 1 dropped once");
    assert_eq!(log.drops(2), 0, "the live value is not dropped");
    drop(Arc::into_inner(pool).expect("the owner let go of the pool"));
    log.assert_each_dropped_once();
}

/// Thread A removes two values into its magazine's partial batch while the
/// main thread flushes, which revokes A's magazine, racing A's second
/// section. A flush that saw A's first removal done must drop that value;
/// each value is dropped exactly once, and once A is done a flush leaves no
/// removed value undropped.
#[test]
fn flush_revokes_an_owners_partial_batch() {
    flush_revokes_partial_batch(
        "flush_revokes_an_owners_partial_batch",
        with_magazines(None),
    );
}

/// As above, in the flat region: the owner's removals take the inline path.
#[test]
fn flush_revokes_an_owners_partial_batch_in_the_flat_region() {
    flush_revokes_partial_batch(
        "flush_revokes_an_owners_partial_batch_in_the_flat_region",
        in_the_flat_region(with_magazines(None)),
    );
}

fn flush_revokes_partial_batch(name: &str, config: Config) {
    explore(name, move || {
        let (log, pool, mut r) = three_values(config);
        let removed_first = Arc::new(AtomicBool::new(false));
        let owner = {
            let (pool, removed_first) = (Arc::clone(&pool), Arc::clone(&removed_first));
            spawn_parked(move || {
                assert!(r.remove(&pool, 0));
                // Release pairs with the main thread's Acquire load.
                removed_first.store(true, Ordering::Release);
                assert!(r.remove(&pool, 1));
            })
        };
        let saw_first = removed_first.load(Ordering::Acquire);
        pool.flush();
        if saw_first {
            assert_eq!(log.drops(0), 1, "a flush after a removal drops its value");
        }
        owner.finished();
        flush_after_the_owner(pool, &log);
        owner.release();
    });
}

/// As above, with batches of two: A's second removal fills its batch, which
/// A takes and seals inside that section (`RawPool::seal_owned`), while the
/// main thread's flush revokes A's magazine. Whichever way they interleave,
/// each value is dropped exactly once, and once A is done a flush leaves no
/// removed value undropped.
#[test]
fn flush_revokes_an_owner_filling_its_batch() {
    flush_revokes_filling(
        "flush_revokes_an_owner_filling_its_batch",
        with_magazines(None),
    );
}

/// As above, in the flat region: the owner's removals take the inline path.
#[test]
fn flush_revokes_an_owner_filling_its_batch_in_the_flat_region() {
    flush_revokes_filling(
        "flush_revokes_an_owner_filling_its_batch_in_the_flat_region",
        in_the_flat_region(with_magazines(None)),
    );
}

fn flush_revokes_filling(name: &str, config: Config) {
    explore(name, move || {
        let (log, pool, mut r) = three_values(Config { batch: 2, ..config });
        let owner = {
            let pool = Arc::clone(&pool);
            spawn_parked(move || {
                assert!(r.remove(&pool, 0));
                assert!(r.remove(&pool, 1));
            })
        };
        pool.flush();
        owner.finished();
        flush_after_the_owner(pool, &log);
        owner.release();
    });
}

/// Full means full with magazines: two slots, both live. Thread A removes
/// one value (its slot goes to A's magazine batch) while the main thread
/// tries an insert, which revokes A's magazine (perhaps racing A's section)
/// to find the slot. If the main thread saw A's removal done, the insert
/// must succeed.
#[test]
fn a_full_pool_takes_the_slots_in_an_owners_magazine() {
    full_pool_takes_magazine_slots(
        "a_full_pool_takes_the_slots_in_an_owners_magazine",
        with_magazines(Some(2)),
    );
}

/// As above, in the flat region: the owner's removal takes the inline path.
#[test]
fn a_full_pool_takes_the_slots_in_an_owners_magazine_in_the_flat_region() {
    full_pool_takes_magazine_slots(
        "a_full_pool_takes_the_slots_in_an_owners_magazine_in_the_flat_region",
        in_the_flat_region(with_magazines(Some(2))),
    );
}

fn full_pool_takes_magazine_slots(name: &str, config: Config) {
    explore(name, move || {
        let log = DropLog::new(3);
        let pool = Arc::new(Pool::with_config(config));
        let mut main = Recorder::new(Arc::clone(&log));
        main.insert(&pool, 0);
        let victim = main.insert(&pool, 1);
        let removed = Arc::new(AtomicBool::new(false));
        let owner = {
            let (pool, removed) = (Arc::clone(&pool), Arc::clone(&removed));
            spawn_parked(move || {
                assert!(pool.remove(victim));
                // Release pairs with the main thread's Acquire load.
                removed.store(true, Ordering::Release);
            })
        };
        let saw_removal = removed.load(Ordering::Acquire);
        let got = main.try_insert(&pool, 2).is_some();
        if saw_removal {
            assert!(got, "a removed slot was left unused in a full pool");
        }
        owner.finished();
        drop(Arc::into_inner(pool).expect("the owner let go of the pool"));
        log.assert_each_dropped_once();
        owner.release();
    });
}

/// One stripe: the main thread (number 0) owns its magazine, the spawned
/// thread (number 1) shares the stripe without one. Three free slots wait on
/// the stripe's shared list. The spawned thread pops one with a CAS while
/// the main thread, its magazine empty, refills it with a run of at most a
/// batch (here all three: the batch is 4), walked and taken with one CAS,
/// its last link cut: each slot is handed out once, and none is lost (the
/// teardown fills every slot and reads every value back).
#[test]
fn a_refill_racing_a_shared_pop_hands_each_slot_out_once() {
    refill_races_shared_pop(
        "a_refill_racing_a_shared_pop_hands_each_slot_out_once",
        Config {
            stripes: 1,
            magazines: true,
            ..Config::tiny(8, 4)
        },
    );
}

/// As above, in the flat region: the setup's removals by the magazine's
/// owner take `RawPool::remove`'s inline path, and the racing insertions
/// reach their slots through the flat region's count.
#[test]
fn a_refill_racing_a_shared_pop_hands_each_slot_out_once_in_the_flat_region() {
    refill_races_shared_pop(
        "a_refill_racing_a_shared_pop_hands_each_slot_out_once_in_the_flat_region",
        in_the_flat_region(Config {
            stripes: 1,
            magazines: true,
            ..Config::tiny(8, 4)
        }),
    );
}

/// One stripe, batches of 2, three free slots on the shared list: the
/// main thread (owning the magazine) inserts three values, so its refill
/// takes a run of two and cuts the run's last link, and its third insert
/// refills again; the spawned thread, without a magazine, pops off the
/// shared list meanwhile. The third slot stays on the shared list after
/// the first refill, so either thread may take it, but only one: a
/// magazine that ran past its run into the shared list (the link not cut)
/// would hand it out twice.
#[test]
fn a_refill_of_a_batch_leaves_the_rest_on_the_shared_list() {
    Model {
        config: Config {
            stripes: 1,
            magazines: true,
            ..Config::tiny(8, 2)
        },
        values: 7,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
            for id in 0..3 {
                r.remove(pool, id);
            }
            // Frees all three at once onto the shared list.
            pool.reclaim();
        }),
        // The last step runs on the main thread, number 0: the owner.
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 6);
            }),
            step(|pool, r| {
                r.insert(pool, 3);
                r.insert(pool, 4);
                r.insert(pool, 5);
            }),
        ],
        teardown: teardown(|pool, r| {
            let mut indices: Vec<u32> = (3..7).map(|id| r.handle(id).index()).collect();
            indices.sort_unstable();
            indices.dedup();
            assert_eq!(indices.len(), 4, "each slot handed out once");
            r.observe_all(pool);
        }),
    }
    .check("a_refill_of_a_batch_leaves_the_rest_on_the_shared_list");
}

fn refill_races_shared_pop(name: &str, config: Config) {
    Model {
        config,
        values: 7,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
            for id in 0..3 {
                r.remove(pool, id);
            }
            // Frees all three at once onto the shared list.
            pool.reclaim();
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 3);
            }),
            step(|pool, r| {
                r.insert(pool, 4);
                r.insert(pool, 5);
            }),
        ],
        teardown: teardown(|pool, r| {
            r.insert(pool, 6);
            let mut indices: Vec<u32> = (3..7).map(|id| r.handle(id).index()).collect();
            indices.sort_unstable();
            indices.dedup();
            assert_eq!(indices.len(), 4, "each slot handed out once");
            r.observe_all(pool);
        }),
    }
    .check(name);
}

/// The back-pressure rounds seal the caller's own partial batches, its
/// magazine's included, to wait for them. Thread A removes a value into its
/// magazine's partial batch and seals it so, while the main thread flushes,
/// which revokes A's magazine to seal the same batch. Exactly one of them
/// takes it: each value is dropped exactly once, and none is left undropped
/// once A is done and a flush runs.
#[test]
fn an_owner_sealing_its_partial_batch_races_a_flush() {
    owner_sealing_races_flush(
        "an_owner_sealing_its_partial_batch_races_a_flush",
        with_magazines(None),
    );
}

/// As above, in the flat region: the owner's removal takes the inline path.
#[test]
fn an_owner_sealing_its_partial_batch_races_a_flush_in_the_flat_region() {
    owner_sealing_races_flush(
        "an_owner_sealing_its_partial_batch_races_a_flush_in_the_flat_region",
        in_the_flat_region(with_magazines(None)),
    );
}

fn owner_sealing_races_flush(name: &str, config: Config) {
    let by_owner = Reached::default();
    let by_flush = Reached::default();
    let (o, f) = (by_owner.clone(), by_flush.clone());
    explore(name, move || {
        let log = DropLog::new(2);
        let pool = Arc::new(Pool::with_config(config));
        let mut r = Recorder::new(Arc::clone(&log));
        for id in 0..2 {
            r.insert(&pool, id);
        }
        let owner = {
            let (pool, o) = (Arc::clone(&pool), o.clone());
            spawn_parked(move || {
                assert!(r.remove(&pool, 0));
                if pool.raw().seal_own_partial_batches() {
                    o.mark();
                }
            })
        };
        pool.flush();
        if log.drops(0) == 1 {
            f.mark();
        }
        owner.finished();
        pool.flush();
        assert_eq!(log.drops(0), 1, "removed value 0 dropped once");
        assert_eq!(log.drops(1), 0, "the live value is not dropped");
        drop(Arc::into_inner(pool).expect("the owner let go of the pool"));
        log.assert_each_dropped_once();
        owner.release();
    });
    by_owner.assert("the owner sealed its partial batch");
    by_flush.assert("the flush took the owner's partial batch");
}

/// Two slots: one waits free in the owner's magazine (its refill took its
/// stripe's shared list whole), the other holds the owner's value. The
/// main thread's insert into the full pool pops the magazine's free slot
/// while the owner removes its value and flushes, which revokes the same
/// magazine to seal that removal and reclaims the slot onto the shared
/// list. The insert must succeed: a revoker that may wait waits for
/// another revoker (the owner's flush) to let go of the magazine, and for
/// the owner's section to end. (When it gave up at once on another
/// revoker, this insert failed with `CapacityError` though a slot was
/// free.) Only an owner preempted inside a section, or a revoker preempted
/// holding the magazine, through the whole patience still makes it fail,
/// which loom's preemption bound does not reach: see `docs/magazine.md`.
/// Each slot is handed out once, and at the end both slots can be filled.
#[test]
fn a_full_pool_pops_from_a_magazine_its_owner_flushes() {
    full_pool_races_flush(
        "a_full_pool_pops_from_a_magazine_its_owner_flushes",
        with_magazines(Some(2)),
    );
}

fn full_pool_races_flush(name: &str, config: Config) {
    explore(name, move || {
        let log = DropLog::new(6);
        let pool = Arc::new(Pool::with_config(config));
        let mut main = Recorder::new(Arc::clone(&log));
        let owner = one_free_in_the_owners_magazine(&pool, &log);
        let got = main.try_insert(&pool, 3);
        assert!(got.is_some(), "a full pool's insert gave up on a free slot");
        let third = owner.finished();
        both_slots_filled_once(&pool, &mut main, [Some(third), got]);
        drop(Arc::into_inner(pool).expect("the owner let go of the pool"));
        log.assert_each_dropped_once();
        owner.release();
    });
}

/// A sweep empties an idle owner's magazine of its free slots onto the
/// owner's stripe's shared list. The magazine took that list whole when it
/// refilled, so the list is empty and the chain goes on as it is, its
/// `NIL` the list's end, with no walk (`FreeList::push_if_empty`).
/// Meanwhile the owner frees its other slot onto the same list (a removal
/// its flush seals and reclaims there): the two pushes race on the list's
/// head, and the loser of an emptiness race walks and links in front.
/// Two slots in all: each slot is handed out once, and at the end both
/// slots can be filled, so none was lost.
#[test]
fn a_sweep_emptying_a_magazine_races_a_push_onto_its_stripe() {
    sweep_races_push(
        "a_sweep_emptying_a_magazine_races_a_push_onto_its_stripe",
        with_magazines(Some(2)),
    );
}

fn sweep_races_push(name: &str, config: Config) {
    let emptied = Reached::default();
    let e = emptied.clone();
    explore(name, move || {
        let log = DropLog::new(6);
        let pool = Arc::new(Pool::with_config(config));
        let mut main = Recorder::new(Arc::clone(&log));
        let owner = one_free_in_the_owners_magazine(&pool, &log);
        // What a sweep does to a magazine it finds idle and holding slots
        // (the owner is not idle here, so a real sweep might not).
        if pool.raw().empty_other_magazines() {
            e.mark();
        }
        let third = owner.finished();
        both_slots_filled_once(&pool, &mut main, [Some(third), None]);
        drop(Arc::into_inner(pool).expect("the owner let go of the pool"));
        log.assert_each_dropped_once();
        owner.release();
    });
    emptied.assert("the sweep took the owner's magazine");
}

/// Spawns the owner (thread number 1): it fills all `slots` slots of the
/// pool with values `0..slots`, frees them, and inserts value `slots`,
/// whose refill takes the freed slots into its magazine (one filled again,
/// the rest left free there); then it runs `then`, whose result is its own.
/// Returns once the owner is past the refill: the race starts there (other
/// models race refills).
fn owner_with_a_full_magazine<R: Send + 'static>(
    pool: &Arc<Pool>,
    log: &Arc<DropLog>,
    slots: u32,
    then: impl FnOnce(&mut Recorder, &Pool, Handle) -> R + Send + 'static,
) -> Parked<R> {
    let ready = Arc::new(AtomicBool::new(false));
    let owner = {
        let (pool, ready) = (Arc::clone(pool), Arc::clone(&ready));
        let mut r = Recorder::new(Arc::clone(log));
        spawn_parked(move || {
            for id in 0..slots {
                r.insert(&pool, id);
            }
            for id in 0..slots {
                assert!(r.remove(&pool, id));
            }
            r.flush(&pool);
            let refilled = r.insert(&pool, slots);
            // Release pairs with the main thread's Acquire load.
            ready.store(true, Ordering::Release);
            then(&mut r, &pool, refilled)
        })
    };
    while !ready.load(Ordering::Acquire) {
        loom::thread::yield_now();
    }
    owner
}

/// [`owner_with_a_full_magazine`] of a two-slot pool: one slot free in the
/// owner's magazine, the other holding value 2, which the owner then
/// removes and flushes. Its result is value 2's handle.
fn one_free_in_the_owners_magazine(pool: &Arc<Pool>, log: &Arc<DropLog>) -> Parked<Handle> {
    owner_with_a_full_magazine(pool, log, 2, |r, pool, third| {
        assert!(r.remove(pool, 2));
        r.flush(pool);
        third
    })
}

/// Once the owner is done, the handles in `got` that are still live and two
/// more inserts fill both slots, each once: none was lost or handed out
/// twice.
fn both_slots_filled_once(pool: &Pool, main: &mut Recorder, got: [Option<Handle>; 2]) {
    let mut live: Vec<u32> = got
        .into_iter()
        .flatten()
        .filter(|&h| pool.contains(h))
        .map(|h| h.index())
        .collect();
    for id in 4..6 {
        if let Some(h) = main.try_insert(pool, id) {
            live.push(h.index());
        }
    }
    live.sort_unstable();
    assert_eq!(live, vec![0, 1], "both slots filled, each once");
}

/// Three slots: the owner holds at most two values, and after its refill
/// (which takes its stripe's shared list whole) two free slots wait in its
/// magazine beside the one it just filled. The main thread's insert into
/// the full pool races the owner's next insert. The main thread's insert
/// must succeed: a full pool pops a magazine's slot while it holds the
/// magazine. (It used to move the magazine's slots onto the shared list
/// and pop after letting go, and the owner's refill took them back first.)
/// The rest go to the shared list under the same hold; the owner's insert
/// finds its slot there or in its magazine, except when it gave up waiting
/// for the main thread's hold, which loom's two yields of patience reach
/// (see `docs/magazine.md`): that it succeeds is only marked reached.
#[test]
fn a_full_pool_takes_a_slot_its_owner_would_refill() {
    full_pool_takes_slot_before_refill(
        "a_full_pool_takes_a_slot_its_owner_would_refill",
        with_magazines(Some(3)),
    );
}

fn full_pool_takes_slot_before_refill(name: &str, config: Config) {
    let owner_found = Reached::default();
    let found = owner_found.clone();
    explore(name, move || {
        let log = DropLog::new(6);
        let pool = Arc::new(Pool::with_config(config));
        let mut main = Recorder::new(Arc::clone(&log));
        // The refill takes all three: one filled, two wait.
        let owner = owner_with_a_full_magazine(&pool, &log, 3, |r, pool, _| r.try_insert(pool, 4));
        let got = main.try_insert(&pool, 5);
        let other = owner.finished();
        assert!(
            got.is_some(),
            "a full pool's insert failed with a slot free"
        );
        if other.is_some() {
            found.mark();
        }
        drop(Arc::into_inner(pool).expect("the owner let go of the pool"));
        log.assert_each_dropped_once();
        owner.release();
    });
    owner_found.assert("the owner's insert found a slot while the pool was full");
}
