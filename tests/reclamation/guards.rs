//! Guards at the edges of a thread's life: kept in a thread-local past the
//! point where the thread gives its announcement word back, and pinned by a
//! thread-local destructor after that point. In both, a value removed while
//! the guard lives is not dropped before the guard is, and is dropped by
//! the first flush after it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use handle_pool::{pin, Guard, HandlePool};

// Held by every test here (the binary's lock, which the reclamation tests
// hold too): a guard anywhere in the process holds back every pool's
// batches sealed after it was pinned, so these tests, which check when
// values are dropped, must not overlap.
use crate::serial;

/// Records its drop.
struct Flagged(Arc<AtomicBool>);

impl Drop for Flagged {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A pool holding one `Flagged` value, its handle and its drop flag.
fn pool_with_one() -> (
    Arc<HandlePool<Flagged>>,
    handle_pool::Handle,
    Arc<AtomicBool>,
) {
    let dropped = Arc::new(AtomicBool::new(false));
    let pool = Arc::new(HandlePool::new());
    let handle = pool.insert(Flagged(Arc::clone(&dropped)));
    (pool, handle, dropped)
}

/// Runs `thread` (given a sender to say it pinned and a receiver to wait
/// on) on a new thread, and meanwhile removes a value, flushes, and checks
/// that the other thread's guard holds the drop back; then lets the other
/// thread go on, joins it, flushes again and checks that the value is
/// dropped.
fn removed_while_another_thread_is_guarded(
    thread: impl FnOnce(Sender<()>, Receiver<()>) + Send + 'static,
) {
    let _serial = serial();
    let (pool, handle, dropped) = pool_with_one();
    let (pinned_tx, pinned) = channel();
    let (go_on, go_on_rx) = channel::<()>();
    let thread = std::thread::spawn(move || thread(pinned_tx, go_on_rx));
    pinned.recv().expect("the other thread pinned");
    assert!(pool.remove(handle));
    pool.flush();
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped while another thread's guard, pinned before the removal, lives"
    );
    go_on.send(()).expect("the other thread waits");
    thread.join().expect("the other thread");
    pool.flush();
    assert!(
        dropped.load(Ordering::SeqCst),
        "not dropped by a flush after the guard was dropped with its thread"
    );
}

/// A guard stored in a thread-local that was set up before the thread's
/// first guard: on the usual platforms its destructor runs after the one
/// that gives the thread's word back, so the word must stay announced
/// until this guard drops.
#[test]
fn a_guard_dropped_by_a_thread_local_destructor_protects_until_then() {
    thread_local! {
        static KEPT: RefCell<Option<Guard>> = const { RefCell::new(None) };
    }
    removed_while_another_thread_is_guarded(|pinned, go_on| {
        // Set up before the first guard.
        KEPT.with(|kept| assert!(kept.borrow().is_none()));
        let guard = pin();
        pinned.send(()).unwrap();
        go_on.recv().unwrap();
        KEPT.with(|kept| *kept.borrow_mut() = Some(guard));
    });
}

/// A guard pinned by a thread-local destructor that runs after the thread
/// has given its word back (the thread's first guard came after this
/// thread-local was set up): it claims a word for itself, and holds
/// reclamation back all the same.
#[test]
fn a_guard_pinned_by_a_late_thread_local_destructor_protects() {
    struct PinsOnDrop {
        pinned: Sender<()>,
        go_on: Receiver<()>,
    }
    impl Drop for PinsOnDrop {
        fn drop(&mut self) {
            let guard = pin();
            self.pinned.send(()).unwrap();
            self.go_on.recv().unwrap();
            drop(guard);
        }
    }
    thread_local! {
        static LATE: RefCell<Option<PinsOnDrop>> = const { RefCell::new(None) };
    }
    removed_while_another_thread_is_guarded(|pinned, go_on| {
        LATE.with(|late| *late.borrow_mut() = Some(PinsOnDrop { pinned, go_on }));
        // The thread's first guard, after `LATE` was set up.
        drop(pin());
    });
}

/// Guards on many short-lived threads, one after another and at once: the
/// words they give back are reused, and none is left announcing, so a
/// flush afterwards drops every removed value.
#[test]
fn words_given_back_by_exited_threads_are_reused_and_left_idle() {
    let _serial = serial();
    let pool = Arc::new(HandlePool::new());
    let flags: Vec<Arc<AtomicBool>> = (0..32).map(|_| Arc::new(AtomicBool::new(false))).collect();
    for round in 0..8 {
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (pool, flag) = (Arc::clone(&pool), Arc::clone(&flags[round * 4 + i]));
                std::thread::spawn(move || {
                    let guard = pin();
                    let nested = pin();
                    let handle = pool.insert(Flagged(flag));
                    assert!(pool.get(handle, &nested).is_some());
                    drop(guard);
                    assert!(pool.remove(handle));
                    drop(nested);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    }
    pool.flush();
    assert_eq!(pool.len(), 0);
    for (i, flag) in flags.iter().enumerate() {
        assert!(flag.load(Ordering::SeqCst), "value {i} is still held back");
    }
}
