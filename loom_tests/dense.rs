//! `DensePool`: inserts against removes against iteration, references held
//! across removals, racing removes (and what the loser sees after), racing
//! appends into one segment, `values` and `iter` reading unmarked parts
//! while a remove reclaims a value there, compaction after a concurrent
//! phase, and the values' region (racing decisions, and a lookup through
//! it racing the append that allocates it). Each model checks, in every
//! execution, what it is named after, and that every value is dropped
//! exactly once and never read after (or during) its drop (loom checks the
//! drop's write to a `Tracked` payload against every read).
//!
//! The pool runs with one stripe, batches of one removal (a remove seals
//! and reclaims at once, so a drop races every reader), and segments and
//! buckets of 1, 2, 4… positions (a few inserts allocate).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use handle_pool::{pin, Config, DensePool, Handle};

use super::harness::{
    explore, explore_with, spawn_parked, DropLog, Parked, Reached, Recorder, Tracked,
};
use super::history::Id;

type Pool = DensePool<Tracked>;

fn tiny() -> Config {
    Config {
        stripes: 1,
        ..Config::tiny(8, 1)
    }
}

/// Two threads, each parked once done until released, that append the
/// values with ids `ids` to `pool` and give back their handles.
fn spawn_appenders(pool: &Arc<Pool>, log: &Arc<DropLog>, ids: [Id; 2]) -> [Parked<Handle>; 2] {
    ids.map(|id| {
        let (pool, r) = (Arc::clone(pool), Recorder::new(Arc::clone(log)));
        spawn_parked(move || pool.insert(r.value(id)))
    })
}

/// Checks, with nothing in flight, that the pool holds exactly `live`
/// (value ids by handle) and, compacted, is dense with each handle's value
/// at its position.
fn assert_holds_exactly(pool: &mut Pool, live: &[(Handle, Id)]) {
    pool.compact();
    assert_eq!((pool.len(), pool.holes()), (live.len(), 0));
    for &(h, id) in live {
        assert_eq!(pool.with(h, Tracked::id), Some(id));
        let position = pool.position(h).expect("a live value has a position");
        assert!(position < live.len(), "the pool is dense");
        assert_eq!(pool.handle_at(position), Some(h));
    }
}

/// An iteration runs while another thread removes one value and appends
/// another. Each item yielded is intact, under its own handle, once, in
/// position order; the value present throughout is always yielded; the
/// removed one may be (and its drop, at once, must wait for the guard).
#[test]
fn dense_iteration_concurrent_with_insert_and_remove() {
    let saw_insert = Reached::default();
    let missed_removed = Reached::default();
    let (inserted, removed) = (saw_insert.clone(), missed_removed.clone());
    explore(
        "dense_iteration_concurrent_with_insert_and_remove",
        move || {
            let log = DropLog::new(3);
            let r = Recorder::new(Arc::clone(&log));
            let pool = Arc::new(Pool::with_config(tiny()));
            let h0 = pool.insert(r.value(0));
            let h1 = pool.insert(r.value(1));
            let writer = {
                let (pool, r) = (Arc::clone(&pool), Recorder::new(Arc::clone(&log)));
                spawn_parked(move || {
                    assert!(pool.remove(h0));
                    pool.insert(r.value(2))
                })
            };
            let items: Vec<(Handle, Id)> = {
                let guard = pin();
                pool.iter(&guard).map(|(h, v)| (h, v.id())).collect()
            };
            let h2 = writer.finished();
            for w in items.windows(2) {
                let (a, b) = (pool.position(w[0].0), pool.position(w[1].0));
                assert!(a.is_none() || b.is_none() || a < b, "position order");
            }
            let expected = [(h0, 0), (h1, 1), (h2, 2)];
            for item in &items {
                assert!(
                    expected.contains(item),
                    "{item:?} yielded under a wrong handle"
                );
            }
            assert!(items.contains(&(h1, 1)), "the value present throughout");
            if items.iter().any(|&(_, id)| id == 2) {
                inserted.mark();
            }
            if !items.iter().any(|&(_, id)| id == 0) {
                removed.mark();
            }
            let mut pool = Arc::into_inner(pool).expect("the writer let go");
            assert_holds_exactly(&mut pool, &[(h1, 1), (h2, 2)]);
            drop(pool);
            log.assert_each_dropped_once();
            writer.release();
        },
    );
    saw_insert.assert("the iteration yielded the concurrently appended value");
    missed_removed.assert("the iteration skipped the concurrently removed value");
}

/// A reader holds a reference from `get` under its guard while another
/// thread removes the value and flushes: the value is not dropped before
/// the guard is (loom reports a drop that races the reads), and after the
/// guard a flush drops it.
#[test]
fn dense_a_reference_held_across_a_removal_lasts_until_its_guard_drops() {
    let held = Reached::default();
    let held_in = held.clone();
    explore(
        "dense_a_reference_held_across_a_removal_lasts_until_its_guard_drops",
        move || {
            let log = DropLog::new(1);
            let r = Recorder::new(Arc::clone(&log));
            let pool = Arc::new(Pool::with_config(tiny()));
            let h = pool.insert(r.value(0));
            let reader = {
                let pool = Arc::clone(&pool);
                spawn_parked(move || {
                    let guard = pin();
                    let value = pool.get(h, &guard)?;
                    let first = value.id();
                    loom::thread::yield_now();
                    assert_eq!(value.id(), first, "the value changed under its reader");
                    Some(first)
                })
            };
            assert!(pool.remove(h));
            pool.flush();
            if reader.finished().is_some() {
                held_in.mark();
            }
            pool.flush();
            assert_eq!(log.drops(0), 1, "the flush after the guard drops the value");
            drop(pool);
            log.assert_each_dropped_once();
            reader.release();
        },
    );
    held.assert("the reader found the value before its removal");
}

/// A one-call read (`with`) against a removal and a flush: the value
/// outlives the call.
#[test]
fn dense_with_keeps_its_value_until_it_returns() {
    explore("dense_with_keeps_its_value_until_it_returns", move || {
        let log = DropLog::new(1);
        let r = Recorder::new(Arc::clone(&log));
        let pool = Arc::new(Pool::with_config(tiny()));
        let h = pool.insert(r.value(0));
        let reader = {
            let pool = Arc::clone(&pool);
            spawn_parked(move || {
                pool.with(h, |value| {
                    let first = value.id();
                    loom::thread::yield_now();
                    assert_eq!(value.id(), first);
                })
            })
        };
        assert!(pool.remove(h));
        pool.flush();
        reader.finished();
        drop(pool);
        log.assert_each_dropped_once();
        reader.release();
    });
}

/// Two threads remove the same handle: exactly one wins, the value is
/// dropped once, and the index is freed once (compaction then queues it
/// once: the next two inserts get two distinct indices). A remove that
/// returns `false` finds the value gone afterwards, to lookups and to an
/// iteration alike, although the winner may not have marked the dense
/// word yet (the loser's help, see `help_remove`).
#[test]
fn dense_racing_removes_of_one_handle_exactly_one_wins() {
    explore(
        "dense_racing_removes_of_one_handle_exactly_one_wins",
        move || {
            let log = DropLog::new(3);
            let r = Recorder::new(Arc::clone(&log));
            let pool = Arc::new(Pool::with_config(tiny()));
            let h = pool.insert(r.value(0));
            let wins = Arc::new(AtomicUsize::new(0));
            let other = {
                let (pool, wins) = (Arc::clone(&pool), Arc::clone(&wins));
                spawn_parked(move || {
                    if pool.remove(h) {
                        wins.fetch_add(1, Ordering::Relaxed);
                    } else {
                        assert_gone_after_a_lost_remove(&pool, h);
                    }
                })
            };
            if pool.remove(h) {
                wins.fetch_add(1, Ordering::Relaxed);
            } else {
                assert_gone_after_a_lost_remove(&pool, h);
            }
            other.finished();
            assert_eq!(wins.load(Ordering::Relaxed), 1, "exactly one remove wins");
            let mut pool = Arc::into_inner(pool).expect("the other thread let go");
            pool.compact();
            let a = pool.insert(r.value(1));
            let b = pool.insert(r.value(2));
            assert_ne!(a.index(), b.index(), "the freed index was queued once");
            assert_holds_exactly(&mut pool, &[(a, 1), (b, 2)]);
            drop(pool);
            log.assert_each_dropped_once();
            other.release();
        },
    );
}

/// What a thread whose remove of `h` returned `false` sees next: `h` gone.
fn assert_gone_after_a_lost_remove(pool: &Pool, h: Handle) {
    assert!(!pool.contains(h), "a lost remove, then the value found");
    let guard = pin();
    assert!(
        pool.iter(&guard).all(|(other, _)| other != h),
        "a lost remove, then the value iterated"
    );
}

/// What a fold under test saw: each item's handle (`None` where the fold
/// gives none) and value id.
type Seen = Vec<(Option<Handle>, Id)>;

/// A fold of a compacted pool of two values runs while another thread
/// removes the first, which reclaims it at once (batches of one). Every
/// value read is intact (loom reports a read that races the drop's write)
/// and under its own handle, the one present throughout is always seen,
/// the removed one sometimes (read unmarked, before its remove began) and
/// sometimes not; afterwards the pool holds the second alone, and each
/// value is dropped once. `handles`: whether `fold` gives handles.
fn fold_while_a_remove_reclaims(name: &str, handles: bool, fold: fn(&Pool) -> Seen) {
    let yielded_removed = Reached::default();
    let skipped_removed = Reached::default();
    let (yielded, skipped) = (yielded_removed.clone(), skipped_removed.clone());
    explore(name, move || {
        let log = DropLog::new(2);
        let r = Recorder::new(Arc::clone(&log));
        let mut pool = Pool::with_config(tiny());
        let [h0, h1] = [0, 1].map(|id| pool.insert(r.value(id)));
        // The round's live count is now 2: positions 0 and 1 (one segment
        // each) are read without their words' full test.
        pool.compact();
        let pool = Arc::new(pool);
        let remover = {
            let pool = Arc::clone(&pool);
            spawn_parked(move || assert!(pool.remove(h0)))
        };
        let seen = fold(&pool);
        remover.finished();
        let [first, second] = [(h0, 0), (h1, 1)].map(|(h, id)| (handles.then_some(h), id));
        assert!(seen.contains(&second), "the value present throughout");
        assert!(
            seen.iter().all(|item| [first, second].contains(item)),
            "{seen:?}"
        );
        if seen.contains(&first) {
            yielded.mark();
        } else {
            skipped.mark();
        }
        let mut pool = Arc::into_inner(pool).expect("the remover let go");
        assert_holds_exactly(&mut pool, &[(h1, 1)]);
        drop(pool);
        log.assert_each_dropped_once();
        remover.release();
    });
    yielded_removed.assert("the fold read the value before its remove began");
    skipped_removed.assert("the fold skipped the removed value");
}

/// `values` folds a compacted pool while a remove reclaims one of its
/// values (see [`fold_while_a_remove_reclaims`]): the fold reads the
/// values of parts no remove has marked as slices, without their words.
#[test]
fn dense_values_read_unmarked_parts_while_a_remove_reclaims() {
    fold_while_a_remove_reclaims(
        "dense_values_read_unmarked_parts_while_a_remove_reclaims",
        false,
        |pool| {
            let guard = pin();
            // `fold` (`collect` would call `next`).
            pool.values(&guard).fold(Seen::new(), |mut seen, value| {
                seen.push((None, value.id()));
                seen
            })
        },
    );
}

/// Two appends race into one segment not allocated yet (positions 1 and 2
/// share the second segment), while a third thread iterates: distinct
/// positions and indices, both values found, the iteration sees only
/// intact values, and the segment is allocated once (the loser frees its
/// copy; a leak or a double free fails the model).
#[test]
fn dense_racing_appends_into_one_new_segment() {
    explore("dense_racing_appends_into_one_new_segment", move || {
        let log = DropLog::new(3);
        let r = Recorder::new(Arc::clone(&log));
        let pool = Arc::new(Pool::with_config(tiny()));
        let h0 = pool.insert(r.value(0));
        let appenders = spawn_appenders(&pool, &log, [1, 2]);
        let items: Vec<(Handle, Id)> = {
            let guard = pin();
            pool.iter(&guard).map(|(h, v)| (h, v.id())).collect()
        };
        let (h1, h2) = (appenders[0].finished(), appenders[1].finished());
        assert!(items.contains(&(h0, 0)), "the value present throughout");
        for item in &items {
            assert!(
                [(h0, 0), (h1, 1), (h2, 2)].contains(item),
                "{item:?} yielded under a wrong handle"
            );
        }
        let mut positions = [pool.position(h1).unwrap(), pool.position(h2).unwrap()];
        positions.sort_unstable();
        assert_eq!(positions, [1, 2]);
        assert_ne!(h1.index(), h2.index());
        let mut pool = Arc::into_inner(pool).expect("the appenders let go");
        assert_holds_exactly(&mut pool, &[(h0, 0), (h1, 1), (h2, 2)]);
        drop(pool);
        log.assert_each_dropped_once();
        for appender in appenders {
            appender.release();
        }
    });
}

/// Insert against remove against iteration, three threads: one appends,
/// one removes, one iterates. Afterwards, compaction leaves exactly the
/// live values, dense.
#[test]
fn dense_insert_remove_and_iteration_then_compaction() {
    let saw_hole = Reached::default();
    let hole = saw_hole.clone();
    explore(
        "dense_insert_remove_and_iteration_then_compaction",
        move || {
            let log = DropLog::new(3);
            let r = Recorder::new(Arc::clone(&log));
            let pool = Arc::new(Pool::with_config(tiny()));
            let [h0, h1] = [0, 1].map(|id| pool.insert(r.value(id)));
            let appender = {
                let (pool, r) = (Arc::clone(&pool), Recorder::new(Arc::clone(&log)));
                spawn_parked(move || pool.insert(r.value(2)))
            };
            let remover = {
                let pool = Arc::clone(&pool);
                spawn_parked(move || assert!(pool.remove(h0)))
            };
            let items: Vec<Id> = {
                let guard = pin();
                pool.iter(&guard).map(|(_, v)| v.id()).collect()
            };
            assert!(items.contains(&1), "the value present throughout");
            if !items.contains(&0) {
                hole.mark();
            }
            let h2 = appender.finished();
            remover.finished();
            let mut pool = Arc::into_inner(pool).expect("the threads let go");
            assert_holds_exactly(&mut pool, &[(h1, 1), (h2, 2)]);
            drop(pool);
            log.assert_each_dropped_once();
            appender.release();
            remover.release();
        },
    );
    saw_hole.assert("the iteration skipped a hole");
}

/// A remove of a handle that an insert is about to hand out (handles are
/// predictable: `Handle::from_bits`) races the insert's two stores. A
/// remove decides on the sparse word and then marks the dense word
/// `REMOVED`; with the sparse word stored first, a remove between the two
/// stores handed the value to reclamation and the insert's dense store
/// then brought it back: iterations read it after its drop, and
/// compaction revived the handle (found by an adversarial review). With
/// the dense word stored first, a remove that wins leaves nothing to
/// iterate, and every value is dropped exactly once.
#[test]
fn dense_remove_between_an_inserts_two_stores() {
    explore("dense_remove_between_an_inserts_two_stores", move || {
        let log = DropLog::new(1);
        let r = Recorder::new(Arc::clone(&log));
        let pool = Arc::new(Pool::with_config(tiny()));
        // The first insert into an empty pool gets index 0, generation 1.
        let forged = Handle::from_bits(1u64 << 32).expect("a handle");
        let remover = {
            let pool = Arc::clone(&pool);
            spawn_parked(move || pool.remove(forged))
        };
        let h = pool.insert(r.value(0));
        assert_eq!(h, forged);
        let removed = remover.finished();
        {
            let guard = pin();
            let items: Vec<(Handle, Id)> = pool.iter(&guard).map(|(h, v)| (h, v.id())).collect();
            if removed {
                assert!(!pool.contains(h));
                assert!(items.is_empty(), "a removed value iterated: {items:?}");
            } else {
                assert!(pool.contains(h));
            }
        }
        remover.release();
        let mut pool = Arc::try_unwrap(pool).ok().expect("sole owner");
        pool.compact();
        assert_eq!(pool.contains(h), !removed, "compaction kept the outcome");
        drop(pool);
        log.assert_each_dropped_once();
    });
}

/// A pool whose values' region holds segments 1 and 2 (positions 1 to 6),
/// with segments of 1, 2, 4… positions.
fn with_region() -> Config {
    Config {
        flat_slots: 6,
        ..tiny()
    }
}

/// The values' region: two appends race into the second segment, the
/// first past the first, so both decide the region (one installs its
/// decision, the other drops its own) and allocate the segment in it.
/// Afterwards both values are found through the region, at positions 1
/// and 2; four more inserts fill the third segment, in the region after
/// the second, and the region's values (positions 1 to 6) are one slice;
/// every value is dropped once. Fails if a thread that loses the race
/// to install its decision goes on with its own region. Preemptions capped
/// at 2 (25,258 executions, 17 s; 3 took 221,123 and 100 s).
#[test]
fn dense_racing_appends_decide_the_values_region() {
    explore_with(
        "dense_racing_appends_decide_the_values_region",
        Some(2),
        move || {
            let log = DropLog::new(7);
            let r = Recorder::new(Arc::clone(&log));
            let pool = Arc::new(Pool::with_config(with_region()));
            let h0 = pool.insert(r.value(0));
            let appenders = spawn_appenders(&pool, &log, [1, 2]);
            let (h1, h2) = (appenders[0].finished(), appenders[1].finished());
            {
                let guard = pin();
                assert_eq!(pool.get(h1, &guard).map(Tracked::id), Some(1));
                assert_eq!(pool.get(h2, &guard).map(Tracked::id), Some(2));
            }
            let mut positions = [pool.position(h1).unwrap(), pool.position(h2).unwrap()];
            positions.sort_unstable();
            assert_eq!(positions, [1, 2]);
            let mut pool = Arc::into_inner(pool).expect("the appenders let go");
            let mut live = vec![(h0, 0), (h1, 1), (h2, 2)];
            live.extend((3..7).map(|id| (pool.insert(r.value(id)), id)));
            let slices: Vec<usize> = pool.as_mut_slices().map(|s| s.len()).collect();
            assert_eq!(slices, [1, 6], "the region's values are one slice");
            assert_holds_exactly(&mut pool, &live);
            drop(pool);
            log.assert_each_dropped_once();
            for appender in appenders {
                appender.release();
            }
        },
    );
}

/// A lookup through the values' region races two appends into its first
/// segment: whichever allocates the segment stores the region's base and
/// length before it publishes the segment, so the other append, which
/// publishes its value after seeing the segment, has them ordered before
/// its handle too. The main thread looks up both handles the appends will
/// get (indices 1 and 2, generation 1, whichever gets which): a value
/// found is intact and one of the two. Fails (a lookup reads the length
/// but not the base, and follows a dangling pointer) if the allocator
/// stores them after publishing the segment. Preemptions capped at 2: three
/// threads.
#[test]
fn dense_a_lookup_through_the_values_region_races_its_decision() {
    explore_with(
        "dense_a_lookup_through_the_values_region_races_its_decision",
        Some(2),
        move || {
            let log = DropLog::new(3);
            let r = Recorder::new(Arc::clone(&log));
            let pool = Arc::new(Pool::with_config(with_region()));
            pool.insert(r.value(0));
            let appenders = spawn_appenders(&pool, &log, [1, 2]);
            let forged =
                [1u64, 2].map(|index| Handle::from_bits(1u64 << 32 | index).expect("a handle"));
            {
                let guard = pin();
                for h in forged {
                    if let Some(value) = pool.get(h, &guard) {
                        assert!([1, 2].contains(&value.id()));
                    }
                }
            }
            for appender in appenders {
                assert!(forged.contains(&appender.finished()));
                appender.release();
            }
            drop(Arc::into_inner(pool).expect("the appenders let go"));
            log.assert_each_dropped_once();
        },
    );
}

/// `iter` folds a compacted pool while a remove reclaims one of its
/// values (see [`fold_while_a_remove_reclaims`]). In parts no remove has
/// marked, the fold tells a value's word from a `REMOVED` one by its sign
/// alone and takes the handle from it: every item must be under its own
/// handle (a `REMOVED` word's low bits are a link, not an index).
#[test]
fn dense_iter_reads_handles_of_unmarked_parts_while_a_remove_reclaims() {
    fold_while_a_remove_reclaims(
        "dense_iter_reads_handles_of_unmarked_parts_while_a_remove_reclaims",
        true,
        |pool| {
            let guard = pin();
            // `fold` (`collect` would call `next`).
            pool.iter(&guard).fold(Seen::new(), |mut seen, (h, value)| {
                seen.push((Some(h), value.id()));
                seen
            })
        },
    );
}
