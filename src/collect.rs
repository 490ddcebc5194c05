//! Building a pool from values and taking it apart: `FromIterator`,
//! `Extend` and `IntoIterator`.
//!
//! `&HandlePool` has no `IntoIterator`: a shared iteration needs a guard to
//! keep removed values alive, so it is [`HandlePool::iter`] with an explicit
//! [`Guard`](crate::Guard), or a loop over a [`Reader`](crate::Reader),
//! which owns its guard: `for (h, v) in &pool.reader()`.

use core::iter::FusedIterator;

use core::marker::PhantomData;

use crate::handle::PoolHandle;
use crate::iter::IterMut;
use crate::pool::HandlePool;
use crate::raw::IntoEntries;

impl<T, H: PoolHandle> FromIterator<T> for HandlePool<T, H> {
    /// A pool holding the values, inserted as one batch.
    ///
    /// ```
    /// use handle_pool::HandlePool;
    /// let pool: HandlePool<u32> = (0..10).collect();
    /// assert_eq!(pool.len(), 10);
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        let pool = Self::with_handle_type();
        pool.insert_all(values);
        pool
    }
}

impl<T, H: PoolHandle> Extend<T> for HandlePool<T, H> {
    /// Inserts the values as one batch (their handles are not returned: use
    /// [`insert_many`](HandlePool::insert_many) for those).
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// pool.extend(["a", "b"]);
    /// assert_eq!(pool.len(), 2);
    /// ```
    fn extend<I: IntoIterator<Item = T>>(&mut self, values: I) {
        self.insert_all(values);
    }
}

impl<'a, T, H: PoolHandle> IntoIterator for &'a mut HandlePool<T, H> {
    type Item = (H, &'a mut T);
    type IntoIter = IterMut<'a, T, H>;

    /// Same as [`HandlePool::iter_mut`].
    ///
    /// ```
    /// let mut pool: handle_pool::HandlePool<u32> = (0..3).collect();
    /// for (_, v) in &mut pool { *v += 1; }
    /// let mut all: Vec<u32> = pool.into_iter().map(|(_, v)| v).collect();
    /// all.sort();
    /// assert_eq!(all, [1, 2, 3]);
    /// ```
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<T, H: PoolHandle> IntoIterator for HandlePool<T, H> {
    type Item = (H, T);
    type IntoIter = IntoIter<T, H>;

    /// Takes the pool apart into its `(handle, value)` pairs, in index order.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert('x');
    /// assert_eq!(pool.into_iter().collect::<Vec<_>>(), vec![(h, 'x')]);
    /// ```
    fn into_iter(self) -> Self::IntoIter {
        IntoIter {
            entries: self.into_raw().into_entries(),
            _handle: PhantomData,
        }
    }
}

/// Owning iterator over `(handle, value)`, from `HandlePool::into_iter`.
/// Values not yet yielded are dropped with it.
///
/// ```
/// let pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// let mut values: Vec<u8> = pool.into_iter().map(|(_, v)| v).collect();
/// values.sort();
/// assert_eq!(values, [1, 2, 3]);
/// ```
///
/// It owns the pool, so it is `Send` when `T: Send`; `Rc`s stay on one thread:
///
/// ```compile_fail,E0277
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool.into_iter());
/// ```
pub struct IntoIter<T, H: PoolHandle> {
    entries: IntoEntries<T>,
    _handle: PhantomData<fn() -> H>,
}

impl<T, H: PoolHandle> Iterator for IntoIter<T, H> {
    type Item = (H, T);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.entries.next()?;
        Some((H::from_handle(handle), value))
    }

    /// Exact: the pool's length, exact when owned, counted down.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<T, H: PoolHandle> DoubleEndedIterator for IntoIter<T, H> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.entries.next_back()?;
        Some((H::from_handle(handle), value))
    }
}

impl<T, H: PoolHandle> FusedIterator for IntoIter<T, H> {}

impl<T, H: PoolHandle> ExactSizeIterator for IntoIter<T, H> {}
