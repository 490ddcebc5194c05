//! Removes racing inserts, other removes and readers.

use handle_pool::{pin, Config};

use super::harness::{setup, step, teardown, Model, Reached, Tracked};

/// An insert and the remove of another value, on different stripes: the
/// removed slot's batch is released on the remover's stripe, which only
/// removes (quiet), and the inserter may reclaim and reuse it, but never
/// while the value is there.
#[test]
fn insert_racing_remove_of_another_handle() {
    let reused = Reached::default();
    let seen = reused.clone();
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 1)
        },
        values: 3,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            // The remover's stripe (0) is quiet: it only removes from here on.
            pool.raw().quiet_stripes();
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 1);
                r.get(pool, 0);
                r.insert(pool, 2);
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 0));
            }),
        ],
        teardown: teardown(move |pool, r| {
            if r.handle(2).index() == r.handle(0).index() {
                seen.mark();
            }
            r.observe_all(pool);
        }),
    }
    .check("insert_racing_remove_of_another_handle");
    reused.assert("the inserter reused the removed slot");
}

/// Two threads remove the same handle: exactly one wins (the history check
/// rejects two `true`s), the value is dropped once, and the slot is
/// retired once, so it is reused exactly once afterwards.
#[test]
fn racing_removes_of_one_handle_exactly_one_wins() {
    Model {
        config: Config::tiny(8, 1),
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(|pool, r| {
                r.remove(pool, 0);
            }),
            step(|pool, r| {
                r.remove(pool, 0);
            }),
        ],
        teardown: teardown(|pool, r| {
            // The released batch is reclaimed by this insert.
            let again = r.insert(pool, 1);
            assert_eq!((again.index(), again.generation()), (0, 2));
            assert_eq!(r.log().drops(0), 1);
            r.observe_all(pool);
            assert_eq!(
                pool.capacity(),
                1,
                "the slot was neither lost nor duplicated"
            );
        }),
    }
    .check("racing_removes_of_one_handle_exactly_one_wins");
}

/// `remove_many` and `remove` race over a shared handle: it is removed
/// once, and the chain `remove_many` pushes as one unit joins the batch
/// intact. The three removed slots fill exactly one batch of three, so
/// every slot comes back exactly once, found through the batch links.
#[test]
fn remove_many_racing_remove_of_a_shared_handle() {
    Model {
        config: Config::tiny(8, 3),
        values: 6,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
        }),
        threads: vec![
            step(|pool, r| {
                r.remove_many(pool, &[0, 1]);
            }),
            step(|pool, r| {
                r.remove(pool, 1);
                r.remove(pool, 2);
            }),
        ],
        teardown: teardown(|pool, r| {
            for id in 3..6 {
                r.insert(pool, id);
            }
            let mut indices: Vec<u32> = (3..6).map(|id| r.handle(id).index()).collect();
            indices.sort_unstable();
            assert_eq!(indices, [0, 1, 2], "every removed slot is reused once");
            r.observe_all(pool);
        }),
    }
    .check("remove_many_racing_remove_of_a_shared_handle");
}

/// A reader holds `&T` under its guard while another thread removes the
/// value, flushes and inserts again: the reader still reads the
/// old, undropped value, and the slot is not reused until the guard drops
/// (else the insert would overwrite what the reader holds).
#[test]
fn reader_keeps_the_old_value_until_its_guard_drops() {
    let removed_while_held = Reached::default();
    let reused = Reached::default();
    let (held, reuse) = (removed_while_held.clone(), reused.clone());
    Model {
        config: Config::tiny(8, 1),
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(move |pool, r| {
                let guard = pin();
                let found: Option<&Tracked> = pool.get(r.handle(0), &guard);
                r.record_get(0, found.map(Tracked::id));
                if let Some(value) = found {
                    let removed = !r.contains(pool, 0);
                    // Whatever the remover did meanwhile, the value is intact.
                    assert_eq!(value.id(), 0);
                    if removed {
                        held.mark();
                    }
                }
                drop(guard);
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                r.insert(pool, 1);
            }),
        ],
        teardown: teardown(move |pool, r| {
            if r.handle(1).index() == r.handle(0).index() {
                reuse.mark();
            }
            r.observe_all(pool);
        }),
    }
    .check("reader_keeps_the_old_value_until_its_guard_drops");
    removed_while_held.assert("the value was removed while the reader held it");
    reused.assert("the slot was reused once no reader held it");
}

/// A stale handle probed before, during and after its slot is removed,
/// reclaimed and reused never resolves again, and never to the new value.
#[test]
fn stale_handle_never_resolves_after_its_slot_is_reused() {
    let reused = Reached::default();
    let seen = reused.clone();
    Model {
        config: Config::tiny(8, 1),
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(|pool, r| {
                r.get(pool, 0);
                r.contains(pool, 0);
                r.get(pool, 0);
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                r.insert(pool, 1);
            }),
        ],
        teardown: teardown(move |pool, r| {
            let (stale, new) = (r.handle(0), r.handle(1));
            if new.index() == stale.index() {
                assert!(new.generation() > stale.generation());
                seen.mark();
            }
            r.observe_all(pool);
        }),
    }
    .check("stale_handle_never_resolves_after_its_slot_is_reused");
    reused.assert("the stale handle's slot was reused");
}

/// Three threads on two stripes: two insert while the third removes an
/// older value and flushes, so an insert may reclaim the sealed
/// batch from the other stripe while the other insert takes fresh slots.
#[test]
fn two_inserts_and_a_remove_on_two_stripes() {
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 1)
        },
        values: 4,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 1);
            }),
            step(|pool, r| {
                r.insert(pool, 2);
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 0));
            }),
        ],
        teardown: teardown(|pool, r| {
            let (b, c) = (r.handle(1), r.handle(2));
            assert_ne!(b.index(), c.index());
            r.insert(pool, 3);
            r.observe_all(pool);
        }),
    }
    // Two preemptions explore 141,416 executions, three 935,453. The race
    // this model is about, an insert reclaiming the other stripe's batch
    // while the other insert takes fresh slots, needs a thread switch
    // inside one insert's slow path: one preemption.
    .check_with_preemptions("two_inserts_and_a_remove_on_two_stripes", Some(2));
}
