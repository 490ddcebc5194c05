//! The flat region installed while the pool is in use: a pool reserves its
//! region the first time it needs a slot past its first chunk (under loom
//! the first chunk is empty, so at its first insert), and lookups racing
//! that find the slot or nothing, never the dangling pointer `flat` holds
//! before (see "The flat region" in `docs/storage.md`).
//!
//! Under loom the region is a heap slice installed by a CAS, as the mapping
//! is elsewhere; what these models check is the publication: a committer
//! stores `flat` before it raises the committed count (Release), and a
//! lookup loads the count (Acquire) before `flat`. With either Relaxed, a
//! lookup may see a count above zero and the dangling pointer, and read
//! through it.

use handle_pool::{Config, Handle};

use super::harness::{setup, step, teardown, Model, Reached, Tracked};

/// A tiny pool whose slots live in a flat region of 4.
fn config() -> Config {
    Config {
        flat_slots: 4,
        ..Config::tiny(8, 1)
    }
}

/// The handle the pool's first insert returns: slot 0, generation 1.
fn first_handle() -> Handle {
    Handle::from_bits(1 << 32).expect("a valid handle")
}

/// Lookups of the pool's first slot, by a made-up handle, race the insert
/// that installs the region, commits the slot and fills it: each finds the
/// value or nothing.
#[test]
fn lookups_racing_the_regions_installation_find_the_slot_or_nothing() {
    let reached = Reached::default();
    let seen = reached.clone();
    Model {
        config: config(),
        values: 1,
        setup: setup(|_, _| {}),
        threads: vec![
            step(move |pool, r| {
                let first = first_handle();
                let reader = pool.reader();
                let direct = pool.get(first, reader.guard()).map(Tracked::id);
                let through_reader = reader.get(first).map(Tracked::id);
                let one_call = pool.with(first, Tracked::id);
                let contained = pool.contains(first);
                // Only hits are recorded: a miss may precede the insert
                // (the handle was made up, not given).
                for found in [direct, through_reader, one_call].into_iter().flatten() {
                    r.record_get(0, Some(found));
                }
                if contained || one_call.is_some() {
                    seen.mark();
                }
            }),
            step(|pool, r| {
                r.insert(pool, 0);
            }),
        ],
        teardown: teardown(|pool, r| {
            assert_eq!(r.handle(0), first_handle(), "value 0 took slot 0");
            r.observe_all(pool);
        }),
    }
    .check("lookups_racing_the_regions_installation_find_the_slot_or_nothing");
    reached.assert("a lookup found the value while the region was installed");
}

/// Two first inserts at once: each reserves a region, one installs its own
/// and the other frees its own and uses the winner's. Both values live in
/// the one region, and each thread reads the other's.
#[test]
fn racing_first_inserts_install_one_region() {
    Model {
        config: Config {
            stripes: 2,
            ..config()
        },
        values: 2,
        setup: setup(|_, _| {}),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 0);
                r.contains(pool, 0);
            }),
            step(|pool, r| {
                r.insert(pool, 1);
                r.contains(pool, 1);
            }),
        ],
        teardown: teardown(|pool, r| {
            let mut slots = [r.handle(0).index(), r.handle(1).index()];
            slots.sort_unstable();
            assert_eq!(slots, [0, 1], "the two values took the first two slots");
            r.observe_all(pool);
        }),
    }
    .check("racing_first_inserts_install_one_region");
}
