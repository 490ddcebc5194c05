//! Iterators over a pool.

use core::iter::FusedIterator;
use core::marker::PhantomData;

use crate::handle::PoolHandle;
use crate::raw::{Drained, Entries, EntriesMut};

/// Iterator over `(handle, &value)`, from [`HandlePool::iter`](crate::HandlePool::iter).
///
/// Each item was in the pool at the moment its slot was visited. It visits
/// the slots in index order, or from the top with `rev()` (it is a
/// `DoubleEndedIterator`).
///
/// It has no `len()`: other threads may insert or remove while it runs, so
/// how many items are left is not known until they are visited. Its
/// `size_hint` says what is known, `(0, Some(slots left to visit))`. The
/// iterators of a pool borrowed mutably or owned ([`IterMut`],
/// [`ValuesMut`], [`Drain`], `IntoIter`) are exact and have `len()`.
///
/// ```
/// let pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// let guard = handle_pool::pin();
/// assert_eq!(pool.iter(&guard).map(|(_, v)| *v as u32).sum::<u32>(), 6);
/// let last = pool.iter(&guard).next_back().map(|(_, v)| *v);
/// assert_eq!(last, Some(3));
/// let (low, high) = pool.iter(&guard).size_hint();
/// assert!(low == 0 && high >= Some(3));
/// ```
///
/// It hands out `&T`, so it is `Send` and `Sync` exactly when `T: Sync`
/// (like `std::slice::Iter`); an iterator over `Cell`s stays on its thread:
///
/// ```compile_fail,E0277
/// use std::cell::Cell;
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<Cell<u32>> = handle_pool::HandlePool::new();
/// let guard = handle_pool::pin();
/// assert_send(pool.iter(&guard));
/// ```
pub struct Iter<'g, T, H> {
    entries: Entries<'g, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'g, T, H> Iter<'g, T, H> {
    pub(crate) fn new(entries: Entries<'g, T>) -> Self {
        Iter {
            entries,
            _handle: PhantomData,
        }
    }
}

impl<'g, T, H: PoolHandle> Iterator for Iter<'g, T, H> {
    type Item = (H, &'g T);

    fn next(&mut self) -> Option<Self::Item> {
        // The typed handle is made from the raw one and never read back, so
        // a `PoolHandle` that does not round-trip cannot steer the iteration.
        let (handle, value) = self.entries.next()?;
        Some((H::from_handle(handle), value))
    }

    /// `(0, Some(slots left to visit))`: under concurrency any other lower
    /// bound would be a guess.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

/// From the highest slot index down, with the same guarantees.
impl<T, H: PoolHandle> DoubleEndedIterator for Iter<'_, T, H> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.entries.next_back()?;
        Some((H::from_handle(handle), value))
    }
}

impl<T, H: PoolHandle> FusedIterator for Iter<'_, T, H> {}

/// Iterator over `(handle, &mut value)`, from [`HandlePool::iter_mut`](crate::HandlePool::iter_mut).
///
/// Exact (`len()`), and double-ended:
///
/// ```
/// let mut pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// pool.iter_mut().for_each(|(_, v)| *v *= 2);
/// assert_eq!(pool.iter_mut().len(), 3);
/// assert_eq!(pool.iter_mut().rev().map(|(_, v)| *v).collect::<Vec<_>>(), [6, 4, 2]);
/// assert_eq!(pool.into_iter().map(|(_, v)| v as u32).sum::<u32>(), 12);
/// ```
///
/// It hands out `&mut T`, so it is `Send` when `T: Send` and `Sync` when
/// `T: Sync` (like `std::slice::IterMut`); an iterator over `Rc`s stays on
/// its thread:
///
/// ```compile_fail,E0277
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut pool: handle_pool::HandlePool<Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool.iter_mut());
/// ```
pub struct IterMut<'a, T, H> {
    entries: EntriesMut<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T, H> IterMut<'a, T, H> {
    pub(crate) fn new(entries: EntriesMut<'a, T>) -> Self {
        IterMut {
            entries,
            _handle: PhantomData,
        }
    }
}

impl<'a, T, H: PoolHandle> Iterator for IterMut<'a, T, H> {
    type Item = (H, &'a mut T);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.entries.next()?;
        Some((H::from_handle(handle), value))
    }

    /// Exact: the pool's length, which `&mut` makes exact, counted down.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<T, H: PoolHandle> DoubleEndedIterator for IterMut<'_, T, H> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.entries.next_back()?;
        Some((H::from_handle(handle), value))
    }
}

impl<T, H: PoolHandle> FusedIterator for IterMut<'_, T, H> {}

impl<T, H: PoolHandle> ExactSizeIterator for IterMut<'_, T, H> {}

/// Draining iterator over `(handle, value)`, from [`HandlePool::drain`](crate::HandlePool::drain).
///
/// Dropping it early removes (and drops) the values not yet yielded.
///
/// ```
/// let mut pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// let first = pool.drain().next();
/// assert!(first.is_some());
/// assert!(pool.is_empty());
/// ```
///
/// It moves `T`s out, so it is `Send` when `T: Send` and `Sync` when
/// `T: Sync` (like `std::vec::Drain`); draining `Rc`s stays on one thread:
///
/// ```compile_fail,E0277
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut pool: handle_pool::HandlePool<Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool.drain());
/// ```
pub struct Drain<'a, T, H: PoolHandle> {
    drained: Drained<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T, H: PoolHandle> Drain<'a, T, H> {
    pub(crate) fn new(drained: Drained<'a, T>) -> Self {
        Drain {
            drained,
            _handle: PhantomData,
        }
    }
}

impl<T, H: PoolHandle> Iterator for Drain<'_, T, H> {
    type Item = (H, T);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.drained.next()?;
        Some((H::from_handle(handle), value))
    }

    /// Exact: the pool's length, which `&mut` makes exact, counted down.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.drained.size_hint()
    }
}

impl<T, H: PoolHandle> DoubleEndedIterator for Drain<'_, T, H> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.drained.next_back()?;
        Some((H::from_handle(handle), value))
    }
}

impl<T, H: PoolHandle> FusedIterator for Drain<'_, T, H> {}

impl<T, H: PoolHandle> ExactSizeIterator for Drain<'_, T, H> {}

/// Iterator over the handles of the values in the pool, from
/// [`HandlePool::keys`](crate::HandlePool::keys).
///
/// Each handle was live at the moment its slot was visited.
///
/// ```
/// let pool = handle_pool::HandlePool::new();
/// let h = pool.insert('a');
/// let guard = handle_pool::pin();
/// assert_eq!(pool.keys(&guard).collect::<Vec<_>>(), [h]);
/// ```
pub struct Keys<'g, T, H> {
    iter: Iter<'g, T, H>,
}

impl<'g, T, H> Keys<'g, T, H> {
    pub(crate) fn new(iter: Iter<'g, T, H>) -> Self {
        Keys { iter }
    }
}

impl<T, H: PoolHandle> Iterator for Keys<'_, T, H> {
    type Item = H;

    fn next(&mut self) -> Option<H> {
        self.iter.next().map(|(handle, _)| handle)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<T, H: PoolHandle> DoubleEndedIterator for Keys<'_, T, H> {
    fn next_back(&mut self) -> Option<H> {
        self.iter.next_back().map(|(handle, _)| handle)
    }
}

impl<T, H: PoolHandle> FusedIterator for Keys<'_, T, H> {}

/// Iterator over `&value` for the values in the pool, from
/// [`HandlePool::values`](crate::HandlePool::values).
///
/// ```
/// let pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// let guard = handle_pool::pin();
/// assert_eq!(pool.values(&guard).map(|v| *v as u32).sum::<u32>(), 6);
/// ```
///
/// Like [`Iter`], it is `Send` and `Sync` exactly when `T: Sync`:
///
/// ```compile_fail,E0277
/// use std::cell::Cell;
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<Cell<u32>> = handle_pool::HandlePool::new();
/// let guard = handle_pool::pin();
/// assert_send(pool.values(&guard));
/// ```
pub struct Values<'g, T, H> {
    iter: Iter<'g, T, H>,
}

impl<'g, T, H> Values<'g, T, H> {
    pub(crate) fn new(iter: Iter<'g, T, H>) -> Self {
        Values { iter }
    }
}

impl<'g, T, H: PoolHandle> Iterator for Values<'g, T, H> {
    type Item = &'g T;

    fn next(&mut self) -> Option<&'g T> {
        self.iter.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<T, H: PoolHandle> DoubleEndedIterator for Values<'_, T, H> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.iter.next_back().map(|(_, value)| value)
    }
}

impl<T, H: PoolHandle> FusedIterator for Values<'_, T, H> {}

/// Iterator over `&mut value`, from
/// [`HandlePool::values_mut`](crate::HandlePool::values_mut).
///
/// ```
/// let mut pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// pool.values_mut().for_each(|v| *v += 1);
/// assert_eq!(pool.values_mut().map(|v| *v as u32).sum::<u32>(), 9);
/// ```
///
/// It hands out `&mut T`, so it is `Send` when `T: Send` and `Sync` when
/// `T: Sync` (like `std::slice::IterMut`):
///
/// ```compile_fail,E0277
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut pool: handle_pool::HandlePool<Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool.values_mut());
/// ```
///
/// ```compile_fail,E0277
/// use std::cell::Cell;
/// fn assert_sync<X: Sync>(_: X) {}
/// let mut pool: handle_pool::HandlePool<Cell<u32>> = handle_pool::HandlePool::new();
/// assert_sync(pool.values_mut());
/// ```
pub struct ValuesMut<'a, T, H> {
    iter: IterMut<'a, T, H>,
}

impl<'a, T, H> ValuesMut<'a, T, H> {
    pub(crate) fn new(iter: IterMut<'a, T, H>) -> Self {
        ValuesMut { iter }
    }
}

impl<'a, T, H: PoolHandle> Iterator for ValuesMut<'a, T, H> {
    type Item = &'a mut T;

    fn next(&mut self) -> Option<&'a mut T> {
        self.iter.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<T, H: PoolHandle> DoubleEndedIterator for ValuesMut<'_, T, H> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.iter.next_back().map(|(_, value)| value)
    }
}

impl<T, H: PoolHandle> FusedIterator for ValuesMut<'_, T, H> {}

impl<T, H: PoolHandle> ExactSizeIterator for ValuesMut<'_, T, H> {}
