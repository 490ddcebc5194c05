//! The guard that protects references into a pool.
//!
//! A [`Guard`] can only be made by [`pin()`], which announces the calling
//! thread to every pool's reclamation (see `announce`), so a guard passed
//! to [`HandlePool::get`](crate::HandlePool::get) or
//! [`iter`](crate::HandlePool::iter) always holds reclamation off: the type
//! proves it, and lookups check nothing at run time. (A crossbeam `Guard`
//! could be unprotected or pin another collector; checking that on every
//! lookup cost a good share of its instructions: docs/perf/0009.) It also
//! pins crossbeam-epoch's default collector, for the crossbeam structures a
//! caller protects with the same guard.

use core::fmt;
use core::marker::PhantomData;
use core::ops::Deref;

/// Protection for references into every pool, and a pinned participant of
/// crossbeam-epoch's default collector.
///
/// While a `Guard` lives, no value removed after it was pinned is dropped,
/// so the references a pool hands out for the guard's lifetime stay valid.
/// Make one with [`pin()`]; pinning is cheap and nests.
///
/// It dereferences to the underlying [`crossbeam_epoch::Guard`], so the same
/// pin also protects other crossbeam-epoch structures on the default
/// collector. It is neither `Send` nor `Sync`: a pin belongs to its thread.
/// Code that sends or shares one, such as a rayon closure that captures
/// it, fails with "`*const ThreadBound` cannot be shared
/// between threads safely"; [`ThreadBound`] shows the fix (one guard, or
/// one [`Reader`](crate::Reader), per rayon job, with `map_init`).
///
/// ```compile_fail,E0277
/// fn must_be_send<T: Send>(_: T) {}
/// must_be_send(handle_pool::pin());
/// ```
///
/// ```compile_fail,E0277
/// fn must_be_sync<T: Sync>(_: T) {}
/// must_be_sync(handle_pool::pin());
/// ```
/// A crossbeam-epoch guard is not a `Guard`: it may be unprotected or pin
/// another collector, and would not hold off the pool's reclamation.
///
/// ```compile_fail,E0308
/// let pool = handle_pool::HandlePool::new();
/// let h = pool.insert(1);
/// // SAFETY: were this to compile, the guard would only be handed to `get`,
/// // which must not take it.
/// let guard = unsafe { crossbeam_epoch::unprotected() };
/// let _ = pool.get(h, guard);
/// ```
#[must_use = "a guard protects references only while it lives"]
pub struct Guard {
    pinned: Pinned,
    /// Keeps the guard on its thread, and is what the compiler names when
    /// it is sent or shared (see [`ThreadBound`]).
    _thread: PhantomData<*const ThreadBound>,
}

/// What a [`Guard`] holds, apart from the marker that keeps it on its
/// thread.
struct Pinned {
    /// Pinned on the default collector, by construction (see [`pin`]).
    inner: crossbeam_epoch::Guard,
    /// The announcement every pool's reclamation respects.
    _announcement: crate::announce::Announcement,
}

// SAFETY: a `Pinned` is never sent nor shared: it lives only in a `Guard`,
// which its `PhantomData<*const ThreadBound>` keeps from being `Send` or
// `Sync` itself. These impls only keep the private raw pointers inside (a
// crossbeam `Local`, the announcement's) out of the compile errors of code
// that sends or shares a guard, which then name `ThreadBound` alone.
unsafe impl Send for Pinned {}

// SAFETY: as for `Send`: only ever inside a `Guard`, which is not `Sync`.
unsafe impl Sync for Pinned {}

/// Names, in a compile error, the thread a [`Guard`] or a
/// [`Reader`](crate::Reader) belongs to. Nothing else uses it.
///
/// A guard pins the thread that made it, and a reader owns such a guard,
/// so neither is `Send` or `Sync`. Code that sends or shares one with
/// another thread fails with
///
/// ```text
/// error[E0277]: `*const ThreadBound` cannot be shared between threads safely
/// ```
///
/// (`sent` for `Send`). With rayon, where a closure given to `map` or
/// `for_each` is shared by every worker, make one per job instead, with
/// `map_init` or `for_each_init`: each job that rayon splits off pins its own.
///
/// ```compile_fail,E0277
/// use handle_pool::{pin, HandlePool};
/// use rayon::prelude::*;
///
/// let pool: HandlePool<u64> = (0..100).collect();
/// let handles: Vec<_> = pool.keys(&pin()).collect();
/// let guard = pin();
/// // error[E0277]: `*const ThreadBound` cannot be shared between threads safely
/// let total: u64 = handles.par_iter().map(|&h| *pool.get(h, &guard).unwrap()).sum();
/// ```
///
/// ```
/// use handle_pool::{pin, HandlePool};
/// use rayon::prelude::*;
///
/// let pool: HandlePool<u64> = (0..100).collect();
/// let handles: Vec<_> = pool.keys(&pin()).collect();
/// let total: u64 = handles
///     .par_iter()
///     .map_init(|| pool.reader(), |reader, &h| *reader.get(h).unwrap())
///     .sum();
/// assert_eq!(total, (0..100).sum());
/// ```
///
/// References found under one guard cannot outlive it, so a `Vec<&T>`
/// cannot be collected from parallel lookups, each job under a guard of
/// its own; collect handles, or cloned values, instead, or iterate the
/// pool itself in parallel under one guard with `par_iter(&guard)`
/// (feature `rayon`), whose parts the workers share.
pub struct ThreadBound {
    _private: (),
}

impl fmt::Debug for ThreadBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("ThreadBound")
    }
}

/// Protects the current thread's references into every pool, and pins it
/// on crossbeam-epoch's default collector.
///
/// ```
/// use handle_pool::{pin, HandlePool};
///
/// let pool = HandlePool::new();
/// let h = pool.insert(7);
/// let guard = pin();
/// assert_eq!(pool.get(h, &guard), Some(&7));
/// ```
#[inline]
pub fn pin() -> Guard {
    // crossbeam's pin first: should it panic, nothing is announced.
    let inner = crossbeam_epoch::pin();
    Guard {
        pinned: Pinned {
            inner,
            _announcement: crate::announce::Announcement::begin(),
        },
        _thread: PhantomData,
    }
}

impl Guard {
    /// Unpins and pins again, so that values removed since the guard was
    /// pinned can be dropped. Takes `&mut self`: no reference obtained
    /// through the guard outlives the call.
    ///
    /// Nested in another guard of the same thread, it changes nothing: the
    /// outer guard still protects what it protected. A guard made while
    /// another of its thread's guards lives shares that guard's pin, and
    /// keeps it after that guard is dropped, until it repins: values
    /// removed since the oldest of them was pinned wait for it meanwhile.
    #[inline]
    pub fn repin(&mut self) {
        self.pinned.inner.repin();
        crate::announce::renew();
    }

    /// Unpins for the duration of `f`, then pins again (also if `f`
    /// panics). Nested in another guard of the same thread, the outer one
    /// keeps protecting during `f`.
    #[inline]
    pub fn repin_after<F: FnOnce() -> R, R>(&mut self, f: F) -> R {
        /// Enters again when `f` returns or unwinds: the guard's drop
        /// leaves.
        struct EnterAgain;
        impl Drop for EnterAgain {
            fn drop(&mut self) {
                crate::announce::enter();
            }
        }
        crate::announce::leave();
        let _again = EnterAgain;
        self.pinned.inner.repin_after(f)
    }
}

impl Deref for Guard {
    type Target = crossbeam_epoch::Guard;

    /// The crossbeam-epoch guard, pinned on the default collector. There is
    /// deliberately no `DerefMut`: swapping in another crossbeam guard would
    /// break the promise this type makes.
    #[inline]
    fn deref(&self) -> &crossbeam_epoch::Guard {
        &self.pinned.inner
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Guard { .. }")
    }
}
