//! The switch between std and loom: the only module that names atomics,
//! `UnsafeCell` and the thread yield. (Thread-locals and process-wide
//! statics switch the same way where they are declared: `announce`,
//! `thread_id`, `reclaim`.)
//!
//! When the library is built as its own unit tests under `--cfg
//! handle_pool_loom` (see `.ci/loom.sh`), everything comes from `loom`, so the
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
    sync::atomic::{
        fence, AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    },
};

#[cfg(not(all(test, handle_pool_loom)))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
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
