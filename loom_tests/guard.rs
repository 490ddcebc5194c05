//! Guards: the announcement in the thread's word (see "Grace by
//! announcement" in `docs/reclaim.md`) against removal, reclamation and
//! reuse of the slot, in each way a guard can be held: nested and dropped
//! out of order, re-pinned inside another, returned from a one-call read's
//! closure, and pinned by a thread whose exit has begun.
//!
//! In each model the reader (the main thread) reads value 0 under a guard
//! and reads it again after the step that could go wrong, while another
//! thread removes value 0, flushes (which seals and reclaims) and inserts,
//! which reuses slot 0 if its batch was reclaimed: loom reports the drop or
//! the new value's write if either races the reader's second read.

use handle_pool::pin;

use super::harness::{step, Model, Recorder, Step, Tracked};
use super::read::{config, read_race, remover};

/// A model of `reader` (on the main thread) racing the removal,
/// reclamation and reuse of value 0's slot (see `read::read_race`).
fn guard_race(reader: Step) -> Model {
    read_race(config(), 2, vec![remover(), reader])
}

/// Records a read of value 0 through `found`, checking it intact.
fn record(r: &mut Recorder, found: Option<&Tracked>) {
    r.record_get(0, found.map(Tracked::id));
}

/// Two guards, the outer dropped first: the reference obtained under the
/// inner one stays valid until the inner one drops.
#[test]
fn nested_guards_dropped_out_of_order() {
    guard_race(step(|pool, r| {
        let outer = pin();
        let inner = pin();
        let found = pool.get(r.handle(0), &inner);
        record(r, found);
        drop(outer);
        record(r, found);
        drop(inner);
    }))
    .check("nested_guards_dropped_out_of_order");
}

/// A guard re-pinned (and one re-pinned after a closure) inside another:
/// neither may move the thread's announcement past what the outer guard
/// protects.
#[test]
fn repin_inside_another_guard_keeps_the_outer_protection() {
    guard_race(step(|pool, r| {
        let outer = pin();
        let found = pool.get(r.handle(0), &outer);
        record(r, found);
        let mut inner = pin();
        inner.repin();
        inner.repin_after(|| ());
        drop(inner);
        record(r, found);
        drop(outer);
    }))
    .check("repin_inside_another_guard_keeps_the_outer_protection");
}

/// A thread's only guard re-pinned between two lookups: the second lookup
/// is protected by the new announcement (made before it loads the slot),
/// whatever the remover did meanwhile.
#[test]
fn repinned_guard_protects_the_lookups_after_it() {
    guard_race(step(|pool, r| {
        let mut guard = pin();
        let before = pool.get(r.handle(0), &guard).map(Tracked::id);
        r.record_get(0, before);
        guard.repin();
        let found = pool.get(r.handle(0), &guard);
        record(r, found);
        record(r, found);
        drop(guard);
    }))
    .check("repinned_guard_protects_the_lookups_after_it");
}

/// A guard pinned inside a one-call read's closure and returned from it:
/// the one-call read's announcement ends with the closure, the guard's own
/// lives on and protects the lookups made with it.
#[test]
fn guard_returned_from_a_one_call_read_protects_on_its_own() {
    guard_race(step(|pool, r| {
        let guard = pool.with(r.handle(0), |_| pin()).unwrap_or_else(pin);
        let found = pool.get(r.handle(0), &guard);
        record(r, found);
        record(r, found);
        drop(guard);
    }))
    .check("guard_returned_from_a_one_call_read_protects_on_its_own");
}

/// Guards of a thread whose exit has begun (as while its thread-locals are
/// destroyed): each outermost one claims a word for itself and gives it
/// back when it drops. The first protects its lookups; the second claims
/// the word just given back (or another), and neither leaves it announced,
/// so the teardown's flush drops the value.
#[test]
fn guards_after_the_threads_exit_began_claim_and_give_back_a_word() {
    guard_race(step(|pool, r| {
        crate::announce::begin_exit();
        let guard = pin();
        let found = pool.get(r.handle(0), &guard);
        record(r, found);
        record(r, found);
        drop(guard);
        let again = pin();
        let found = pool.get(r.handle(0), &again);
        record(r, found);
        drop(again);
    }))
    .check("guards_after_the_threads_exit_began_claim_and_give_back_a_word");
}
