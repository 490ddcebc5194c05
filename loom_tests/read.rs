//! One-call reads (`with`, `get_cloned`): the read announcement in the
//! thread's own word against removal, reclamation and reuse of the slot
//! (see "One-call reads announce instead of pinning" in `docs/reclaim.md`).
//!
//! The reader is the model's last thread, which runs on the main thread:
//! it took thread number 0 in the setup, below the stripe count, so it
//! announces instead of pinning, and nothing but its word holds the
//! reclamation back. The reclaiming thread flushes, which seals and
//! reclaims, and then inserts,
//! which reuses the slot if its batch was reclaimed: loom reports the drop
//! or the new value's write if either races the reader's read of the value.

use handle_pool::{Config, Handle};

use super::harness::{setup, step, teardown, Model, Reached, Step, Tracked};

/// Batches of one (a removal seals at once), four stripes (so both threads
/// have a word).
pub(super) fn config() -> Config {
    Config {
        stripes: 4,
        ..Config::tiny(8, 1)
    }
}

/// A model of a read of value 0 (inserted in the setup) racing `threads`;
/// the teardown flushes and checks that value 0 was dropped exactly once.
pub(super) fn read_race(config: Config, values: usize, threads: Vec<Step>) -> Model {
    Model {
        config,
        values,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads,
        teardown: teardown(|pool, r| {
            r.flush(pool);
            assert_eq!(r.log().drops(0), 1, "dropped once the read is over");
            r.observe_all(pool);
        }),
    }
}

/// Removes value 0, flushes (which seals and reclaims) and inserts value 1,
/// which reuses slot 0 if its batch was reclaimed.
pub(super) fn remover() -> Step {
    step(|pool, r| {
        assert!(r.remove(pool, 0));
        r.flush(pool);
        r.insert(pool, 1);
    })
}

/// A one-call read of a value that another thread removes, reclaims and
/// replaces in the same slot meanwhile: the read sees the value intact or
/// not at all, and the value is dropped once, after the read.
#[test]
fn one_call_read_racing_removal_reclamation_and_reuse() {
    read_race(
        config(),
        2,
        vec![
            remover(),
            step(|pool, r| {
                r.with(pool, 0);
            }),
        ],
    )
    .check("one_call_read_racing_removal_reclamation_and_reuse");
}

/// As above with slot 0 in the flat region, the storage of every 64-bit
/// Unix pool (the other models keep their slots in buckets): the read finds
/// the slot below the region's committed count.
#[test]
fn one_call_read_racing_removal_reclamation_and_reuse_in_the_flat_region() {
    read_race(
        Config {
            flat_slots: 4,
            ..config()
        },
        2,
        vec![
            remover(),
            step(|pool, r| {
                r.with(pool, 0);
            }),
        ],
    )
    .check("one_call_read_racing_removal_reclamation_and_reuse_in_the_flat_region");
}

/// A one-call read nested in another's closure: the inner read leaves the
/// outer one's announcement alone, so the outer value, removed and reclaimed
/// by another thread while the inner read runs, is still intact when the
/// outer closure reads it again afterwards.
#[test]
fn nested_one_call_read_keeps_the_outer_announcement() {
    Model {
        config: config(),
        values: 3,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.insert(pool, 1);
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                r.flush(pool);
                r.insert(pool, 2);
            }),
            step(|pool, r| {
                let (outer, inner) = (r.handle(0), r.handle(1));
                let found = pool.with(outer, |value| {
                    let first = value.id();
                    assert_eq!(pool.with(inner, |value| value.id()), Some(1));
                    assert_eq!(value.id(), first, "the outer value changed under its read");
                    first
                });
                r.record_get(0, found);
            }),
        ],
        teardown: teardown(|pool, r| {
            r.flush(pool);
            assert_eq!(r.log().drops(0), 1, "dropped once the read is over");
            r.observe_all(pool);
        }),
    }
    .check("nested_one_call_read_keeps_the_outer_announcement");
}

/// One horizon for a look at two stripes (see "One horizon per look" in
/// `docs/reclaim.md`). The spawned thread removes value 1, sealing a batch
/// on its own stripe, and flushes: the flush reads the readers' horizon at
/// its own stripe, the first with a sealed batch, and judges the reader's
/// stripe against that same horizon. The reader removes value 0 from
/// inside its own one-call read of it, sealing value 0's batch on its
/// stripe while the read lasts, before or after the horizon was read:
/// value 0 is read intact, and dropped once, after the read.
#[test]
fn a_flushs_one_horizon_judges_a_second_stripe_while_a_read_holds_it() {
    Model {
        config: config(),
        values: 3,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.insert(pool, 1);
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove(pool, 1));
                r.flush(pool);
                r.insert(pool, 2);
            }),
            step(|pool, r| {
                let handle = r.handle(0);
                let read = pool.with(handle, |value| {
                    let first = value.id();
                    assert!(r.remove(pool, 0));
                    assert_eq!(value.id(), first, "value 0 changed under its read");
                    first
                });
                assert_eq!(read, Some(0));
            }),
        ],
        teardown: teardown(|pool, r| {
            r.flush(pool);
            assert_eq!(r.log().drops(0), 1, "value 0 dropped once the read is over");
            assert_eq!(r.log().drops(1), 1, "value 1 dropped once");
            r.observe_all(pool);
        }),
    }
    .check("a_flushs_one_horizon_judges_a_second_stripe_while_a_read_holds_it");
}

/// The same race with the reader on a thread numbered past the stripe
/// count (one stripe; the spawned reader is thread 1), which has no word
/// and pins instead: the guard's announcement holds the reclamation back.
#[test]
fn one_call_read_of_a_thread_without_a_word_pins() {
    read_race(
        Config::tiny(8, 1),
        2,
        vec![
            step(|pool, r| {
                r.with(pool, 0);
            }),
            remover(),
        ],
    )
    .check("one_call_read_of_a_thread_without_a_word_pins");
}

/// Two reclamations race over a batch a one-call read holds back: thread
/// B removes the value the reader is reading and flushes (its batch goes
/// back on the sealed list while the read lasts), and the reader flushes as
/// soon as its read is over (taking the list, racing B's push back onto it).
/// Nothing is stranded: after both, the value is dropped, by one flush or
/// the other, or at the latest by the teardown's.
#[test]
fn reclamations_racing_over_a_batch_a_read_holds_back() {
    read_race(
        config(),
        1,
        vec![
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                r.flush(pool);
            }),
            step(|pool, r| {
                r.with(pool, 0);
                r.flush(pool);
            }),
        ],
    )
    .check("reclamations_racing_over_a_batch_a_read_holds_back");
}

/// A [`Reader`](handle_pool::Reader) made before another thread's insert
/// commits the flat slot it fills. The reader's thread then looks the new
/// handle up in the pool directly (which reads the count as it is now) and
/// through the reader (which holds the count it read when made): once the
/// direct lookup finds the value, the reader must too. A reader that
/// looked past its own count in the buckets alone would miss it, since a
/// bucket below the flat region's end is never allocated.
///
/// The reader's thread is the spawned one and the inserter runs on the
/// main thread: the other way round, loom ran 7 executions, in none of
/// which the insert landed before the lookups.
#[test]
fn a_reader_finds_a_slot_committed_after_it_was_made() {
    let reached = Reached::default();
    let seen = reached.clone();
    Model {
        config: Config {
            flat_slots: 4,
            ..Config::tiny(8, 1)
        },
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(move |pool, r| {
                // One fresh slot at a time: value 1 takes slot 1, with the
                // generation slot 0's first occupant had.
                let later = Handle::from_bits(r.handle(0).to_bits() + 1).expect("a valid handle");
                let reader = pool.reader();
                let direct = pool.get(later, reader.guard()).map(Tracked::id);
                let through_reader = reader.get(later).map(Tracked::id);
                // Only hits are recorded: the history's order needs value
                // 1's insert before a lookup of it, and a miss here may
                // precede that insert (the handle was made up, not given).
                for found in [direct, through_reader].into_iter().flatten() {
                    r.record_get(1, Some(found));
                }
                if direct.is_some() {
                    assert_eq!(through_reader, direct, "the reader missed a later slot");
                    seen.mark();
                }
            }),
            step(|pool, r| {
                r.insert(pool, 1);
            }),
        ],
        teardown: teardown(|pool, r| {
            assert_eq!(r.handle(1).index(), 1, "value 1 took slot 1");
            r.observe_all(pool);
        }),
    }
    .check("a_reader_finds_a_slot_committed_after_it_was_made");
    reached.assert("a direct lookup found the value in the reader's thread");
}
