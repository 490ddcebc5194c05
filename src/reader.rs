//! `Reader`: many lookups under one guard.

use core::fmt;
use core::marker::PhantomData;

use crate::guard::Guard;
use crate::handle::{Handle, PoolHandle};
use crate::raw::{RawPool, View};

/// Lookups in one pool under one guard, for a loop of them; made by
/// [`HandlePool::reader`](crate::HandlePool::reader).
///
/// [`get`](Self::get) and [`contains`](Self::contains) answer exactly as the
/// pool's own [`get`](crate::HandlePool::get) and
/// [`contains`](crate::HandlePool::contains) would at the same moment, and
/// [`get`](Self::get)'s references live as long as the guard. What differs
/// is the cost: the pool's methods read where its storage starts and how
/// much of it is in use again for every lookup (that count is an atomic,
/// which the compiler may not keep in a register across a loop), and a
/// reader reads them once, when it is made. A loop of lookups through a
/// reader is a few instructions shorter per lookup; BENCHES.md ("Lookups
/// through a reader") has the figures.
///
/// A reader never misses a value inserted after it was made: a handle past
/// the storage it saw is looked up in the pool as it is now.
///
/// ```
/// use handle_pool::{pin, HandlePool};
///
/// let pool: HandlePool<u64> = (0..1000).collect();
/// let handles: Vec<_> = pool.iter(&pin()).map(|(h, _)| h).collect();
///
/// let guard = pin();
/// let reader = pool.reader(&guard);
/// let later = pool.insert(1000); // past what the reader saw: still found
/// let sum: u64 = handles.iter().filter_map(|&h| reader.get(h)).sum();
/// assert_eq!(sum, (0..1000).sum());
/// assert_eq!(reader.get(later), Some(&1000));
/// ```
///
/// It is `Copy`, and like its guard it stays on its thread (neither `Send`
/// nor `Sync`):
///
/// ```compile_fail,E0277
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<u32> = handle_pool::HandlePool::new();
/// let guard = handle_pool::pin();
/// assert_send(pool.reader(&guard));
/// ```
///
/// ```compile_fail,E0277
/// fn assert_sync<X: Sync>(_: &X) {}
/// let pool: handle_pool::HandlePool<u32> = handle_pool::HandlePool::new();
/// let guard = handle_pool::pin();
/// assert_sync(&pool.reader(&guard));
/// ```
///
/// Its references cannot outlive the guard:
///
/// ```compile_fail,E0597
/// use handle_pool::{pin, HandlePool};
/// let pool = HandlePool::new();
/// let h = pool.insert(1);
/// let r = {
///     let guard = pin();
///     pool.reader(&guard).get(h).unwrap()
/// };
/// println!("{r}");
/// ```
pub struct Reader<'g, T, H = Handle> {
    view: View<'g, T>,
    guard: &'g Guard,
    _handle: PhantomData<fn(H) -> H>,
}

impl<'g, T, H: PoolHandle> Reader<'g, T, H> {
    pub(crate) fn new(view: View<'g, T>, guard: &'g Guard) -> Self {
        Reader {
            view,
            guard,
            _handle: PhantomData,
        }
    }

    /// The value `handle` refers to, if it is in the pool: as
    /// [`HandlePool::get`](crate::HandlePool::get) with the reader's guard.
    /// Wait-free.
    #[inline]
    pub fn get(&self, handle: H) -> Option<&'g T> {
        RawPool::get_in(self.view, handle.handle(), self.guard)
    }

    /// Whether `handle` refers to a value in the pool right now: as
    /// [`HandlePool::contains`](crate::HandlePool::contains). Wait-free.
    #[inline]
    pub fn contains(&self, handle: H) -> bool {
        RawPool::contains_in(self.view, handle.handle())
    }

    /// The guard the reader's references are tied to.
    pub fn guard(&self) -> &'g Guard {
        self.guard
    }
}

impl<T, H> Clone for Reader<'_, T, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, H> Copy for Reader<'_, T, H> {}

impl<T, H> fmt::Debug for Reader<'_, T, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}
