//! Iterators over a secondary map: typed wrappers over the raw map's
//! cursors.

use core::iter::FusedIterator;
use core::marker::PhantomData;

use crate::handle::PoolHandle;

use super::raw::{Drained, Occupied};

/// Iterator over `(handle, &value)`, from [`SecondaryMap::iter`](super::SecondaryMap::iter).
///
/// Each item was in the map at the moment its entry was visited; entries
/// are visited in index order, once each.
///
/// ```
/// use handle_pool::{pin, HandlePool, SecondaryMap};
/// let pool = HandlePool::new();
/// let labels = SecondaryMap::new();
/// labels.insert(pool.insert(()), 'a');
/// let guard = pin();
/// assert_eq!(labels.iter(&guard).map(|(_, c)| *c).collect::<String>(), "a");
/// ```
///
/// It hands out `&V`, so it is `Send` and `Sync` exactly when `V: Sync`:
///
/// ```compile_fail,E0277
/// use std::cell::Cell;
/// fn assert_send<X: Send>(_: X) {}
/// let map: handle_pool::SecondaryMap<Cell<u32>> = handle_pool::SecondaryMap::new();
/// let guard = handle_pool::pin();
/// assert_send(map.iter(&guard));
/// ```
pub struct Iter<'g, V, H> {
    occupied: Occupied<'g, V>,
    _handle: PhantomData<fn() -> H>,
}

impl<'g, V, H> Iter<'g, V, H> {
    /// Over `occupied`, a cursor made under a guard that lives for `'g`.
    pub(crate) fn new(occupied: Occupied<'g, V>) -> Self {
        Iter {
            occupied,
            _handle: PhantomData,
        }
    }
}

impl<'g, V, H: PoolHandle> Iterator for Iter<'g, V, H> {
    type Item = (H, &'g V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (handle, found) = self.occupied.next()?;
        // SAFETY: the cursor loaded the word with Acquire under a guard
        // that lives for 'g (see `SecondaryMap::iter`).
        let value = unsafe { found.value_ref() };
        Some((H::from_handle(handle), value))
    }

    /// `(0, Some(entries left to visit))`: under concurrency any other
    /// lower bound would be a guess.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.occupied.size_hint()
    }
}

impl<V, H: PoolHandle> FusedIterator for Iter<'_, V, H> {}

/// Iterator over the handles of the values in the map, from
/// [`SecondaryMap::keys`](super::SecondaryMap::keys).
///
/// ```
/// use handle_pool::{pin, HandlePool, SecondaryMap};
/// let pool = HandlePool::new();
/// let h = pool.insert(());
/// let labels = SecondaryMap::new();
/// labels.insert(h, 'a');
/// assert_eq!(labels.keys(&pin()).collect::<Vec<_>>(), [h]);
/// ```
pub struct Keys<'g, V, H> {
    iter: Iter<'g, V, H>,
}

impl<'g, V, H> Keys<'g, V, H> {
    pub(crate) fn new(iter: Iter<'g, V, H>) -> Self {
        Keys { iter }
    }
}

impl<V, H: PoolHandle> Iterator for Keys<'_, V, H> {
    type Item = H;

    fn next(&mut self) -> Option<H> {
        self.iter.next().map(|(handle, _)| handle)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<V, H: PoolHandle> FusedIterator for Keys<'_, V, H> {}

/// Iterator over `&value`, from [`SecondaryMap::values`](super::SecondaryMap::values).
///
/// ```
/// use handle_pool::{pin, HandlePool, SecondaryMap};
/// let pool = HandlePool::new();
/// let health: SecondaryMap<u32> = (0..3).map(|i| (pool.insert(()), i)).collect();
/// assert_eq!(health.values(&pin()).sum::<u32>(), 3);
/// ```
pub struct Values<'g, V, H> {
    iter: Iter<'g, V, H>,
}

impl<'g, V, H> Values<'g, V, H> {
    pub(crate) fn new(iter: Iter<'g, V, H>) -> Self {
        Values { iter }
    }
}

impl<'g, V, H: PoolHandle> Iterator for Values<'g, V, H> {
    type Item = &'g V;

    fn next(&mut self) -> Option<&'g V> {
        self.iter.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<V, H: PoolHandle> FusedIterator for Values<'_, V, H> {}

/// A cursor over a map borrowed mutably, handing out `&mut V`.
pub(crate) struct Exclusive<'a, V> {
    occupied: Occupied<'a, V>,
    _values: PhantomData<&'a mut V>,
}

impl<'a, V> Exclusive<'a, V> {
    /// Over `occupied`, a cursor made from a map borrowed mutably for `'a`.
    pub(crate) fn new(occupied: Occupied<'a, V>) -> Self {
        Exclusive {
            occupied,
            _values: PhantomData,
        }
    }

    /// Splits the entries left in two; the parts visit disjoint entries.
    #[cfg(feature = "rayon")]
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        Some(Exclusive::new(self.occupied.split_off()?))
    }
}

impl<'a, V> Iterator for Exclusive<'a, V> {
    type Item = (crate::Handle, &'a mut V);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (handle, found) = self.occupied.next()?;
        // SAFETY: the map is borrowed mutably for 'a, and each entry is
        // visited once (parts split off visit disjoint ranges), its value in
        // its own room or in a value pool slot no other entry names: the
        // references are unique.
        Some((handle, unsafe { found.value_mut() }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.occupied.size_hint()
    }
}

// SAFETY: an `Exclusive` is a `&mut` borrow of the map handing out `&mut V`,
// one per entry: sending it sends those, which needs `V: Send`, as for
// `std::slice::IterMut`. Its own state is a cursor over entry words and
// shared borrows of the table and of the value pool's storage, which it
// only loads.
unsafe impl<V: Send> Send for Exclusive<'_, V> {}

// SAFETY: through `&Exclusive` nothing can be reached (`next` needs `&mut`);
// `Sync` follows `&mut V`'s rule, `V: Sync`, as for `std::slice::IterMut`.
unsafe impl<V: Sync> Sync for Exclusive<'_, V> {}

/// Iterator over `(handle, &mut value)`, from
/// [`SecondaryMap::iter_mut`](super::SecondaryMap::iter_mut).
///
/// ```
/// use handle_pool::{HandlePool, SecondaryMap};
/// let pool = HandlePool::new();
/// let h = pool.insert(());
/// let mut health = SecondaryMap::new();
/// health.insert(h, 10);
/// health.iter_mut().for_each(|(_, hp)| *hp -= 1);
/// assert_eq!(health.get_cloned(h), Some(9));
/// ```
///
/// It hands out `&mut V`, so it is `Send` when `V: Send` (like
/// `std::slice::IterMut`):
///
/// ```compile_fail,E0277
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut map: handle_pool::SecondaryMap<Rc<u32>> = handle_pool::SecondaryMap::new();
/// assert_send(map.iter_mut());
/// ```
pub struct IterMut<'a, V, H> {
    exclusive: Exclusive<'a, V>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, V, H> IterMut<'a, V, H> {
    pub(crate) fn new(exclusive: Exclusive<'a, V>) -> Self {
        IterMut {
            exclusive,
            _handle: PhantomData,
        }
    }
}

impl<'a, V, H: PoolHandle> Iterator for IterMut<'a, V, H> {
    type Item = (H, &'a mut V);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.exclusive.next()?;
        Some((H::from_handle(handle), value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.exclusive.size_hint()
    }
}

impl<V, H: PoolHandle> FusedIterator for IterMut<'_, V, H> {}

/// Iterator over `&mut value`, from
/// [`SecondaryMap::values_mut`](super::SecondaryMap::values_mut).
///
/// ```
/// use handle_pool::{HandlePool, SecondaryMap};
/// let pool = HandlePool::new();
/// let mut health: SecondaryMap<u32> = (0..3).map(|_| (pool.insert(()), 10)).collect();
/// health.values_mut().for_each(|hp| *hp /= 2);
/// assert_eq!(health.values_mut().map(|hp| *hp).sum::<u32>(), 15);
/// ```
pub struct ValuesMut<'a, V, H> {
    iter: IterMut<'a, V, H>,
}

impl<'a, V, H> ValuesMut<'a, V, H> {
    pub(crate) fn new(iter: IterMut<'a, V, H>) -> Self {
        ValuesMut { iter }
    }
}

impl<'a, V, H: PoolHandle> Iterator for ValuesMut<'a, V, H> {
    type Item = &'a mut V;

    fn next(&mut self) -> Option<&'a mut V> {
        self.iter.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<V, H: PoolHandle> FusedIterator for ValuesMut<'_, V, H> {}

/// Draining iterator over `(handle, value)`, from
/// [`SecondaryMap::drain`](super::SecondaryMap::drain).
///
/// Dropping it, used or not, leaves the map empty: the values it did not
/// yield are dropped. Leaked instead (`mem::forget`), it leaves them in the
/// map, their handles resolving as before.
///
/// ```
/// use handle_pool::{HandlePool, SecondaryMap};
/// let pool = HandlePool::new();
/// let mut names: SecondaryMap<&str> = [(pool.insert(()), "a"), (pool.insert(()), "b")]
///     .into_iter()
///     .collect();
/// assert!(names.drain().next().is_some());
/// assert!(names.is_empty());
/// ```
///
/// It moves `V`s out, so it is `Send` when `V: Send` (like
/// `std::vec::Drain`):
///
/// ```compile_fail,E0277
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut map: handle_pool::SecondaryMap<Rc<u32>> = handle_pool::SecondaryMap::new();
/// assert_send(map.drain());
/// ```
pub struct Drain<'a, V, H> {
    drained: Drained<'a, V>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, V, H> Drain<'a, V, H> {
    pub(crate) fn new(drained: Drained<'a, V>) -> Self {
        Drain {
            drained,
            _handle: PhantomData,
        }
    }
}

impl<V, H: PoolHandle> Iterator for Drain<'_, V, H> {
    type Item = (H, V);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.drained.next()?;
        Some((H::from_handle(handle), value))
    }

    /// `(0, Some(values left))`.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.drained.size_hint()
    }
}

impl<V, H: PoolHandle> FusedIterator for Drain<'_, V, H> {}

impl<V, H> Drop for Drain<'_, V, H> {
    /// Drops the values not yielded, every one even if some `Drop` panics,
    /// then raises the first such panic.
    fn drop(&mut self) {
        self.drained.finish();
    }
}
