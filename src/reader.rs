//! `Reader`: many lookups under one guard of its own.

use core::fmt;
use core::marker::PhantomData;

use crate::guard::{pin, Guard};
use crate::handle::{Handle, PoolHandle};
use crate::iter::Iter;
use crate::raw::RawPool;
use crate::storage::View;

/// Lookups in one pool under a guard of its own, for a loop of them; made
/// by [`HandlePool::reader`](crate::HandlePool::reader).
///
/// [`get`](Self::get) and [`contains`](Self::contains) answer exactly as
/// the pool's own [`get`](crate::HandlePool::get) and
/// [`contains`](crate::HandlePool::contains) would at the same moment.
/// What differs is the cost: the pool's methods read where its storage
/// starts and how much of it is in use again for every lookup (that count
/// is an atomic, which the compiler may not keep in a register across a
/// loop), and a reader reads them when it is made (and at
/// [`repin`](Self::repin)). A loop of lookups through a reader is
/// therefore shorter per lookup; docs/perf/0036 has the figures.
///
/// A reader never misses a value inserted after it was made: a handle past
/// the storage it saw is looked up in the pool as it is now.
///
/// The reader pins the thread when it is made, as [`pin`]
/// does, and its references live as long as it does: values removed
/// meanwhile are not dropped until the reader is dropped or
/// [`repin`](Self::repin)s, so a long-lived reader should repin between
/// batches of work, as a guard should. (Made while another guard of the
/// thread lives, it shares that guard's pin, and holds back what that pin
/// held back until it repins: see [`Guard::repin`].) Because it owns its
/// guard, rayon's `for_each_init` and `map_init` can make one per job
/// that rayon splits off (each a pin and an allocation):
///
/// ```
/// use handle_pool::{pin, HandlePool};
/// use rayon::prelude::*;
///
/// let pool: HandlePool<u64> = (0..10_000).collect();
/// let handles: Vec<_> = pool.iter(&pin()).map(|(h, _)| h).collect();
/// let total: u64 = handles
///     .par_iter()
///     .map_init(|| pool.reader(), |reader, &h| *reader.get(h).unwrap_or(&0))
///     .sum();
/// assert_eq!(total, (0..10_000).sum());
/// ```
///
/// Like a guard it stays on its thread (neither `Send` nor `Sync`). A
/// closure given to rayon's `map` or `for_each` is shared by every worker,
/// so one that captures a reader fails with
///
/// ```text
/// error[E0277]: `*const ThreadBound` cannot be shared between threads safely
/// ```
///
/// and the fix is the `map_init` above: a reader per job.
///
/// ```compile_fail,E0277
/// use handle_pool::{pin, HandlePool};
/// use rayon::prelude::*;
///
/// let pool: HandlePool<u64> = (0..100).collect();
/// let handles: Vec<_> = pool.keys(&pin()).collect();
/// let reader = pool.reader();
/// let total: u64 = handles.par_iter().map(|&h| *reader.get(h).unwrap()).sum();
/// ```
///
/// ```compile_fail,E0277
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<u32> = handle_pool::HandlePool::new();
/// assert_send(pool.reader());
/// ```
///
/// ```compile_fail,E0277
/// fn assert_sync<X: Sync>(_: &X) {}
/// let pool: handle_pool::HandlePool<u32> = handle_pool::HandlePool::new();
/// assert_sync(&pool.reader());
/// ```
///
/// Its references cannot outlive it, nor a [`repin`](Self::repin):
///
/// ```compile_fail,E0597
/// let pool = handle_pool::HandlePool::new();
/// let h = pool.insert(1);
/// let r = {
///     let reader = pool.reader();
///     reader.get(h).unwrap()
/// };
/// println!("{r}");
/// ```
///
/// ```compile_fail,E0502
/// let pool = handle_pool::HandlePool::new();
/// let h = pool.insert(1);
/// let mut reader = pool.reader();
/// let r = reader.get(h).unwrap();
/// reader.repin();
/// println!("{r}");
/// ```
pub struct Reader<'p, T, H = Handle> {
    /// The pool's storage as of the last pin.
    view: ReaderView<'p, T>,
    /// To read the storage again at `repin`.
    raw: &'p RawPool<T>,
    /// Boxed, so that the reader's own address never reaches code the
    /// compiler cannot see into: crossbeam's `Guard::repin` is not
    /// inlined, and had it taken the address of a guard inside the reader,
    /// the reader would live in memory and its view would be loaded again
    /// for every lookup, as through the pool (a reader in `bench_report`'s
    /// harness, which re-pins every 256 operations, measured no faster than
    /// `get` that way: docs/perf/0036). One allocation per reader.
    guard: Box<Guard>,
    _handle: PhantomData<fn(H) -> H>,
}

/// A reader's view of the storage: a [`View`], which holds a raw pointer.
struct ReaderView<'p, T>(View<'p, T>);

// SAFETY: a `ReaderView` is never sent nor shared: it lives only in a
// `Reader`, whose guard (a `Guard`, which holds a
// `PhantomData<*const ThreadBound>`) keeps the reader from being `Send` or
// `Sync` itself, whatever `T`. These impls only keep the view's raw pointer
// out of the compile errors of code that sends or shares a reader, which
// then name `ThreadBound` alone.
unsafe impl<T> Send for ReaderView<'_, T> {}

// SAFETY: as for `Send`: only ever inside a `Reader`, which is not `Sync`.
unsafe impl<T> Sync for ReaderView<'_, T> {}

impl<'p, T, H: PoolHandle> Reader<'p, T, H> {
    #[inline]
    pub(crate) fn new(raw: &'p RawPool<T>) -> Self {
        // Pinned first, then the storage read: what the view holds is
        // read under the guard (not needed for the view's soundness, which
        // rests on the count only growing, but it keeps "as of the pin"
        // true).
        let guard = Box::new(pin());
        Reader {
            view: ReaderView(raw.view()),
            raw,
            guard,
            _handle: PhantomData,
        }
    }

    /// The value `handle` refers to, if it is in the pool: as
    /// [`HandlePool::get`](crate::HandlePool::get) with the reader's guard.
    /// Wait-free.
    #[inline]
    pub fn get(&self, handle: H) -> Option<&T> {
        RawPool::get_in(self.view.0, handle.handle(), &self.guard)
    }

    /// Whether `handle` refers to a value in the pool right now: as
    /// [`HandlePool::contains`](crate::HandlePool::contains). Wait-free.
    #[inline]
    pub fn contains(&self, handle: H) -> bool {
        RawPool::contains_in(self.view.0, handle.handle())
    }

    /// Unpins and pins again, so that values removed since the reader was
    /// made (or last repinned) can be dropped, and reads the pool's storage
    /// again. Takes `&mut self`: no reference obtained through the reader
    /// outlives the call. As [`Guard::repin`], it changes nothing while
    /// another guard of the same thread is alive.
    #[inline]
    pub fn repin(&mut self) {
        self.guard.repin();
        self.view = ReaderView(self.raw.view());
    }

    /// The reader's guard, for lookups in other pools, or in the
    /// crossbeam-epoch structures it also pins, under the same pin.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Iterates over `(handle, &value)` for the values in the pool, under
    /// the reader's guard: as [`HandlePool::iter`](crate::HandlePool::iter).
    /// `&Reader` is `IntoIterator` too, so a loop over a reader made for it
    /// needs no guard of its own:
    ///
    /// ```
    /// let pool: handle_pool::HandlePool<u32> = (1..=4).collect();
    /// let mut sum = 0;
    /// for (_, value) in &pool.reader() {
    ///     sum += value;
    /// }
    /// assert_eq!(sum, 10);
    /// assert_eq!(pool.reader().iter().count(), 4);
    /// ```
    pub fn iter(&self) -> Iter<'_, T, H> {
        Iter::new(self.raw.entries(&self.guard))
    }
}

impl<'r, T, H: PoolHandle> IntoIterator for &'r Reader<'_, T, H> {
    type Item = (H, &'r T);
    type IntoIter = Iter<'r, T, H>;

    /// Same as [`Reader::iter`].
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T, H> fmt::Debug for Reader<'_, T, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}
