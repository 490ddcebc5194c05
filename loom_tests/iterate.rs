//! Iteration concurrent with inserts and removes.

use handle_pool::Config;

use super::harness::{setup, step, teardown, Model, Reached};

/// An iteration runs while another thread removes one value and inserts
/// another. Each item yielded was in the pool during the iteration, under
/// the handle its insert returned, in index order, once; the value present
/// throughout is always yielded (the history check's iteration window).
#[test]
fn iteration_concurrent_with_insert_and_remove() {
    let saw_insert = Reached::default();
    let missed_removed = Reached::default();
    let (inserted, removed) = (saw_insert.clone(), missed_removed.clone());
    Model {
        config: Config::tiny(8, 1),
        values: 3,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.insert(pool, 1);
        }),
        threads: vec![
            step(move |pool, r| {
                let ids: Vec<_> = r.iter(pool).into_iter().map(|(_, id)| id).collect();
                if ids.contains(&2) {
                    inserted.mark();
                }
                if !ids.contains(&0) {
                    removed.mark();
                }
            }),
            step(|pool, r| {
                assert!(r.remove(pool, 0));
                r.insert(pool, 2);
            }),
        ],
        teardown: teardown(|pool, r| {
            r.observe_all(pool);
        }),
    }
    .check("iteration_concurrent_with_insert_and_remove");
    saw_insert.assert("the iteration yielded the concurrently inserted value");
    missed_removed.assert("the iteration skipped the concurrently removed value");
}
