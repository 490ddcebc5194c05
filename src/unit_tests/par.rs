use crate::HandlePool;
use rayon::prelude::*;

/// A worker visiting values under the caller's guard counts as holding
/// reclamation back (so an insert from the closure does not wait at the
/// bound for that guard); one visiting values exclusively does not.
///
/// Run on a worker of rayon's global pool, its outcome handed back through
/// an atomic: called from outside the pool, rayon waits for the work on an
/// std Mutex and Condvar, which ThreadSanitizer cannot see (see
/// `.ci/sanitize.sh`). (A pool of its own that the calling thread joins
/// stays registered after the test: LeakSanitizer reports it.)
#[test]
fn workers_visiting_under_a_guard_are_announced() {
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::sync::Arc;
    // 0: running; 1: passed; 2: panicked.
    let outcome = Arc::new(AtomicU8::new(0));
    let on_worker = Arc::clone(&outcome);
    rayon::spawn(move || {
        let passed = std::panic::catch_unwind(visit_under_a_guard_and_exclusively).is_ok();
        // Release pairs with the Acquire load below: the worker's work
        // happens before the test reads the outcome and ends.
        on_worker.store(if passed { 1 } else { 2 }, Ordering::Release);
    });
    loop {
        match outcome.load(Ordering::Acquire) {
            0 => std::thread::sleep(std::time::Duration::from_micros(100)),
            done => {
                assert_eq!(done, 1, "the test body panicked on the worker");
                return;
            }
        }
    }
}

fn visit_under_a_guard_and_exclusively() {
    let mut pool: HandlePool<u32> = (0..10_000).collect();
    let guard = crate::pin();
    assert!(pool
        .par_iter(&guard)
        .all(|_| crate::announce::guarded_here()));
    drop(guard);
    let on_other_threads = pool
        .par_iter_mut()
        .filter(|_| rayon::current_thread_index().is_some())
        .all(|_| !crate::announce::guarded_here());
    assert!(on_other_threads, "an exclusive iteration announced itself");
}
