//! The only module that names atomics, `UnsafeCell`, `Arc` and thread-locals.
//!
//! When the library is built as its own unit tests under `--cfg
//! handle_pool_loom` (see `ci/loom.sh`), everything comes from `loom`, so the
//! models in `loom_tests/` explore every interleaving of the real code;
//! otherwise from `std`. (`test` is part of the switch because loom is a
//! dev-dependency: the library built as a dependency, even of its own tests,
//! must not need it.) The std `UnsafeCell` wrapper offers loom's closure API so both
//! builds compile the same code. Nothing here appears in a public signature.

#[cfg(all(test, handle_pool_loom))]
pub(crate) use loom::thread::yield_now;
#[cfg(not(all(test, handle_pool_loom)))]
pub(crate) use std::thread::yield_now;

#[cfg(all(test, handle_pool_loom))]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::atomic::{AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    sync::Arc,
};

#[cfg(not(all(test, handle_pool_loom)))]
pub(crate) use std::sync::{
    atomic::{AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering},
    Arc,
};

/// `std::cell::UnsafeCell` with loom's `with`/`with_mut` API.
#[cfg(not(all(test, handle_pool_loom)))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(all(test, handle_pool_loom)))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// A small per-thread number used to pick a stripe (see `free_list`).
///
/// Threads are numbered round-robin on first use; the number only spreads
/// threads over stripes and never affects correctness, so there is no limit on
/// how many threads there may be.
#[inline]
pub(crate) fn thread_stripe_hint() -> usize {
    use std::cell::Cell;

    #[cfg(not(all(test, handle_pool_loom)))]
    {
        use std::sync::atomic::AtomicUsize;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        std::thread_local! {
            static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
        }
        HINT.with(|hint| {
            if hint.get() == usize::MAX {
                hint.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            hint.get()
        })
    }
    // Under loom the counter must be reset for every explored execution, or
    // the model would not be deterministic.
    #[cfg(all(test, handle_pool_loom))]
    {
        use loom::sync::atomic::AtomicUsize;
        loom::lazy_static! {
            static ref NEXT: AtomicUsize = AtomicUsize::new(0);
        }
        loom::thread_local! {
            static HINT: Cell<usize> = Cell::new(usize::MAX);
        }
        HINT.with(|hint| {
            if hint.get() == usize::MAX {
                hint.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            hint.get()
        })
    }
}
