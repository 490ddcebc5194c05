//! Thread numbers: small, dense, reused after a thread exits. A number
//! picks the thread's home stripe and the magazine it owns in every pool.

#[cfg(all(test, handle_pool_loom))]
use crate::sync::Ordering;

/// The calling thread's number: no two live threads have the same, and a
/// thread that exits gives its number back for the next new thread (the
/// smallest free number first), so the numbers in use stay dense. The
/// number picks the thread's home stripe, and the thread numbered `i` owns
/// magazine `i` of every pool that has one (see `magazine`): a number is
/// handed on only after its previous thread has run its last pool
/// operation, through the registry's lock.
///
/// `None` from the start of the number's own thread-local destructor on
/// (a value dropped by a thread-local destructor that runs later may still
/// use a pool): such a thread owns no magazine any more. Destructors that
/// run before it still see the number.
#[inline]
pub(crate) fn thread_id() -> Option<usize> {
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        match known_thread_id() {
            registry::NONE => registry::ID.try_with(|id| id.0).ok(),
            number => Some(number),
        }
    }
    // Under loom the numbers come from a counter reset for every explored
    // execution (the models never reuse one), or they would not be
    // deterministic.
    #[cfg(all(test, handle_pool_loom))]
    {
        use loom::sync::atomic::AtomicUsize;
        use std::cell::Cell;
        loom::lazy_static! {
            static ref NEXT: AtomicUsize = AtomicUsize::new(0);
        }
        loom::thread_local! {
            static ID: Cell<usize> = Cell::new(usize::MAX);
        }
        Some(ID.with(|id| {
            if id.get() == usize::MAX {
                id.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            id.get()
        }))
    }
}

/// What [`known_thread_id`] answers for a thread that has no number (not
/// taken yet, or given back while its thread-locals are destroyed): past
/// every stripe and every word.
pub(crate) const NO_NUMBER: usize = usize::MAX;

/// The calling thread's number if it has taken one, [`NO_NUMBER`] if not:
/// one load, where [`thread_id`] checks a lazy thread-local and takes a
/// number on first use. For paths that fall back to `thread_id` when the
/// answer is out of their range.
#[inline]
pub(crate) fn known_thread_id() -> usize {
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        registry::NUMBER.get()
    }
    #[cfg(all(test, handle_pool_loom))]
    {
        thread_id().unwrap_or(NO_NUMBER)
    }
}

#[cfg(not(all(test, handle_pool_loom)))]
mod registry {
    use std::cell::{Cell, UnsafeCell};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Numbers given back by exited threads, and the next never used,
    /// behind a small spin lock of our own. Not `std::sync::Mutex`: std is
    /// not built with ThreadSanitizer here, so TSan cannot see that lock
    /// and would report the numbers as racing (`.ci/tsan.supp` suppresses
    /// nothing of ours). The lock is taken twice in a thread's life.
    struct Registry {
        locked: AtomicBool,
        free: UnsafeCell<(BinaryHeap<Reverse<usize>>, usize)>,
    }

    // SAFETY: `free` is only reached through `Registry::with`, which holds
    // the lock for the whole access.
    unsafe impl Sync for Registry {}

    static REGISTRY: Registry = Registry {
        locked: AtomicBool::new(false),
        free: UnsafeCell::new((BinaryHeap::new(), 0)),
    };

    impl Registry {
        fn with<R>(&self, f: impl FnOnce(&mut (BinaryHeap<Reverse<usize>>, usize)) -> R) -> R {
            // Acquire pairs with the Release store in `Unlock::drop`: the
            // previous holder's changes are visible.
            while self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::thread::yield_now();
            }
            struct Unlock<'a>(&'a AtomicBool);
            impl Drop for Unlock<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _unlock = Unlock(&self.locked);
            // SAFETY: the lock is held until `_unlock` drops, after `f`.
            f(unsafe { &mut *self.free.get() })
        }
    }

    /// A thread's number; given back when the thread's locals are destroyed.
    pub(super) struct Id(pub(super) usize);

    impl Id {
        fn take() -> Id {
            let id = REGISTRY.with(|(given_back, next)| match given_back.pop() {
                Some(Reverse(id)) => id,
                None => {
                    *next += 1;
                    *next - 1
                }
            });
            NUMBER.set(id);
            Id(id)
        }
    }

    impl Drop for Id {
        fn drop(&mut self) {
            // Forgotten before it is given back: from here on this thread
            // asks `ID`, which answers that it has no number.
            NUMBER.set(NONE);
            // The lock orders this thread's last pool operations before the
            // first of the next thread given the number.
            REGISTRY.with(|(given_back, _)| given_back.push(Reverse(self.0)));
        }
    }

    /// [`NUMBER`] while the thread has no number.
    pub(super) const NONE: usize = super::NO_NUMBER;

    std::thread_local! {
        pub(super) static ID: Id = Id::take();
        /// A copy of `ID`'s number while it lives, [`NONE`] before and
        /// after. Const and without drop glue, so it can always be read,
        /// with no check of a lazy state.
        pub(super) static NUMBER: Cell<usize> = const { Cell::new(NONE) };
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/thread_id.rs"]
mod tests;
