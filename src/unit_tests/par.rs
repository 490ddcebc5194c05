use crate::HandlePool;
use rayon::prelude::*;

/// A worker visiting values under the caller's guard counts as holding
/// reclamation back (so an insert from the closure does not wait at the
/// bound for that guard); one visiting values exclusively does not.
///
/// Run on a pool of rayon's whose first worker is this thread: called from
/// outside a pool, rayon waits for the work on an std Mutex and Condvar,
/// which ThreadSanitizer cannot see (see `.ci/sanitize.sh`).
#[test]
fn workers_visiting_under_a_guard_are_announced() {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .use_current_thread()
        .build()
        .unwrap()
        .install(visit_under_a_guard_and_exclusively);
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
