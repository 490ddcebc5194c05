//! What holds reclamation back for good, as the README's guarantees state
//! it: a guard that another thread of the parent held when the process
//! forked (in the child, that thread never runs again, and its guard is
//! never dropped), and a guard or `Reader` that is never dropped
//! (`mem::forget`), even after its thread exits. In each, nothing removed
//! afterwards is dropped by reclamation, in any pool; the pools keep
//! working, and `&mut` reclamation (`reclaim`, `clear`, dropping the pool)
//! still drops everything.
//!
//! Why the pool does not end such a guard's protection itself: a guard
//! that is leaked rather than forgotten (`Box::leak`) lends references for
//! `'static` when its pool is `'static`, and such a `&T` may be sent to
//! another thread that outlives the one that pinned, or, in a fork child,
//! be held by the thread that forked. Nothing tells a forgotten guard from
//! a leaked one.
//!
//! Each test runs alone in a child process: a guard held for good would
//! hold back every other test's pools.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use handle_pool::{pin, HandlePool};

use crate::common::{in_child_process, Alive, Counted, PinnedThread};

/// Values removed per pool in each check.
const REMOVED: usize = 1_000;

/// Removes `REMOVED` new values from `pool`, then flushes and inserts until
/// they are dropped, or for long enough that they would have been: returns
/// how many are still alive.
fn removed_and_left_alive(pool: &HandlePool<Counted>) -> usize {
    removed_and_left(pool, &Alive::new())
}

/// [`removed_and_left_alive`], with values counted by `alive`.
fn removed_and_left(pool: &HandlePool<Counted>, alive: &Alive) -> usize {
    let handles = pool.insert_many(alive.values(REMOVED));
    assert_eq!(pool.remove_many(&handles), REMOVED);
    for _ in 0..20 {
        pool.flush();
        // Inserts and removes reclaim too (sweeps, a free list run dry).
        let probes = pool.insert_many(Alive::new().values(256));
        pool.remove_many(&probes);
        if alive.count() == 0 {
            break;
        }
    }
    pool.flush();
    alive.count()
}

/// Runs `child` in a child process made by `fork` and returns its exit
/// code; the child exits with `_exit` as soon as `child` returns (255 if it
/// panicked), running nothing of the parent's after the fork.
#[cfg(unix)]
fn in_fork(child: impl FnOnce() -> u8) -> u8 {
    // SAFETY: the child only runs `child`, then `_exit`s: it returns to
    // none of the parent's code, and runs no destructor or `atexit`
    // handler of the parent's state. glibc's allocator is usable after a
    // fork of a multithreaded process.
    match unsafe { libc::fork() } {
        -1 => panic!("fork failed"),
        0 => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(255);
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(i32::from(code)) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is ours to fill.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
            libc::WEXITSTATUS(status) as u8
        }
    }
}

/// In a child process: how many of the values its pool removed are still
/// alive after its flushes and inserts, as an exit code (at most 254).
#[cfg(unix)]
fn left_alive_in_a_fork_child() -> u8 {
    in_fork(|| {
        let pool = HandlePool::new();
        let left = removed_and_left_alive(&pool);
        // The pool still works in the child.
        let h = pool.insert(Alive::new().value());
        assert!(pool.contains(h));
        u8::try_from(left * 254 / REMOVED).unwrap()
    })
}

/// README, "When values are dropped": a fork child reclaims nothing while
/// a guard that another thread of the parent held at the fork lives, which
/// in the child is for good. Forking while no other thread holds a guard is
/// the workaround.
#[cfg(unix)]
#[test]
fn a_fork_child_reclaims_nothing_while_another_thread_held_a_guard_at_the_fork() {
    in_child_process(
        module_path!(),
        "a_fork_child_reclaims_nothing_while_another_thread_held_a_guard_at_the_fork",
        || {
            // The workaround: no guard held elsewhere at the fork, and the
            // child drops what it removes.
            assert_eq!(left_alive_in_a_fork_child(), 0, "control: no guard held");
            // Another thread holds a guard across the fork.
            let holder = PinnedThread::start();
            let left = left_alive_in_a_fork_child();
            holder.release();
            assert_eq!(left, 254, "the child dropped values a guard held back");
            // The parent's holder released its guard: the parent reclaims.
            let pool = HandlePool::new();
            assert_eq!(removed_and_left_alive(&pool), 0);
        },
    );
}

/// README, "When values are dropped": a guard forgotten on a thread that
/// then exits holds back every pool's reclamation for good.
#[test]
fn a_forgotten_guard_on_an_exited_thread_holds_back_every_pool_for_good() {
    in_child_process(
        module_path!(),
        "a_forgotten_guard_on_an_exited_thread_holds_back_every_pool_for_good",
        || {
            let pool = HandlePool::new();
            assert_eq!(removed_and_left_alive(&pool), 0, "control: no guard");
            std::thread::spawn(|| std::mem::forget(pin()))
                .join()
                .unwrap();
            assert_held_back_for_good(pool);
        },
    );
}

/// The address of the `Reader` forgotten below.
static FORGOTTEN: AtomicUsize = AtomicUsize::new(0);

/// As above, with a `Reader` (which holds a guard of its own).
#[test]
fn a_forgotten_reader_on_an_exited_thread_holds_back_every_pool_for_good() {
    in_child_process(
        module_path!(),
        "a_forgotten_reader_on_an_exited_thread_holds_back_every_pool_for_good",
        || {
            let pool = Arc::new(HandlePool::new());
            assert_eq!(removed_and_left_alive(&pool), 0, "control: no reader");
            let shared = Arc::clone(&pool);
            std::thread::spawn(move || {
                // Forgotten, but its memory (a `Reader` boxes its guard)
                // kept where a leak checker finds it (`.ci/sanitize.sh`).
                let reader = Box::leak(Box::new(shared.reader()));
                FORGOTTEN.store(reader as *mut _ as usize, Ordering::Relaxed);
            })
            .join()
            .unwrap();
            let pool = Arc::into_inner(pool).expect("the thread's clone is gone");
            assert_held_back_for_good(pool);
        },
    );
}

/// After a guard was forgotten: `pool` and a pool made afterwards drop
/// nothing they remove, keep working, and drop everything on `&mut`.
fn assert_held_back_for_good(mut pool: HandlePool<Counted>) {
    let later = HandlePool::new();
    let (in_pool, in_later) = (Alive::new(), Alive::new());
    assert_eq!(removed_and_left(&pool, &in_pool), REMOVED);
    assert_eq!(removed_and_left(&later, &in_later), REMOVED);
    // They keep working.
    let h = later.insert(in_later.value());
    assert_eq!(later.with(h, |_| ()), Some(()));
    assert!(later.remove(h));
    // `&mut` needs no reader to leave: `reclaim` and the pool's drop drop
    // every value held back.
    pool.reclaim();
    assert_eq!(in_pool.count(), 0);
    drop(later);
    assert_eq!(in_later.count(), 0);
}
