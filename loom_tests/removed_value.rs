//! The value a removal hands over (`remove_get`, `remove_with`) stays
//! readable, undropped and in its slot, for as long as its guard or its
//! closure, whatever other threads reclaim and reuse meanwhile.

use handle_pool::{pin, Config};

use super::harness::{setup, step, teardown, Model, Reached};

/// A thread removes a value with `remove_get` and reads it again after
/// another thread flushed and inserted: the value is intact and undropped
/// (loom orders its drop after every read), and its slot is reused only
/// once the guard is dropped. With batches of one, the removal seals its
/// batch at once, so only the guard holds the reclamation back.
#[test]
fn remove_get_keeps_the_value_until_its_guard_drops() {
    let held = Reached::default();
    let reused = Reached::default();
    let (read_after, reuse) = (held.clone(), reused.clone());
    Model {
        config: Config::tiny(8, 1),
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(move |pool, r| {
                let guard = pin();
                let value = r.remove_get(pool, 0, &guard).expect("the only remover");
                // One stripe, so the length is one count: 1 once the other
                // thread's insert is in (not recorded: it is no exact
                // length under concurrency).
                let inserted = pool.len() == 1;
                // Read again, whatever the other thread did meanwhile.
                assert_eq!(value.id(), 0);
                if inserted {
                    read_after.mark();
                }
                drop(guard);
            }),
            step(|pool, r| {
                r.flush(pool);
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
    .check("remove_get_keeps_the_value_until_its_guard_drops");
    held.assert("the value was read after the other thread's insert");
    reused.assert("the slot was reused once the guard was dropped");
}

/// `remove_with`'s closure reads the value it removed while another thread
/// flushes and inserts: its one-call read (in its own word, on a pool with
/// a stripe per thread) holds the reclamation back until it returns.
#[test]
fn remove_with_keeps_the_value_until_its_closure_returns() {
    let reused = Reached::default();
    let reuse = reused.clone();
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 1)
        },
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(|pool, r| {
                assert!(r.remove_with(pool, 0), "the only remover");
            }),
            step(|pool, r| {
                r.flush(pool);
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
    .check("remove_with_keeps_the_value_until_its_closure_returns");
    reused.assert("the slot was reused once the closure returned");
}

/// `remove_get` and `remove_with` race for one value: exactly one gets it
/// (the history check rejects two removals), reads it intact, and it is
/// dropped once.
#[test]
fn racing_remove_get_and_remove_with_exactly_one_gets_the_value() {
    Model {
        config: Config::tiny(8, 1),
        values: 2,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
        }),
        threads: vec![
            step(|pool, r| {
                let guard = pin();
                r.remove_get(pool, 0, &guard);
                drop(guard);
            }),
            step(|pool, r| {
                r.remove_with(pool, 0);
            }),
        ],
        teardown: teardown(|pool, r| {
            // The removed slot's batch is reclaimed by this insert.
            let again = r.insert(pool, 1);
            assert_eq!((again.index(), again.generation()), (0, 2));
            assert_eq!(r.log().drops(0), 1);
            r.observe_all(pool);
        }),
    }
    .check("racing_remove_get_and_remove_with_exactly_one_gets_the_value");
}
