//! Parallel iteration over a secondary map (feature `rayon`): typed
//! wrappers over the raw map's cursor, one range of slot indices that rayon
//! splits in halves (cut at leaf boundaries) as threads go idle.

use core::marker::PhantomData;

use rayon::iter::plumbing::UnindexedConsumer;
use rayon::iter::ParallelIterator;

use crate::handle::{Handle, PoolHandle};
use crate::par::{bridge, Cursor};
use crate::Guard;

use super::iter::Exclusive;
use super::raw::Occupied;
use super::SecondaryMap;

impl<V, H: PoolHandle> SecondaryMap<V, H> {
    /// A parallel iterator over `(handle, &value)`: the items
    /// [`iter`](Self::iter) would yield, visited by rayon's threads.
    ///
    /// The same guarantee as `iter`: every item was in the map at the
    /// moment its entry was visited; each entry is visited once. The
    /// references are protected by `guard` on whichever thread they are
    /// used: the guard stays borrowed for as long as the iterator or any
    /// item lives.
    ///
    /// Needs `V: Sync`, as sharing `&V` between threads does.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// use rayon::prelude::*;
    /// let entities = HandlePool::new();
    /// let health: SecondaryMap<u64> = (1..=1000).map(|hp| (entities.insert(()), hp)).collect();
    /// let guard = pin();
    /// assert_eq!(health.par_iter(&guard).map(|(_, hp)| *hp).sum::<u64>(), 500_500);
    /// ```
    ///
    /// An item cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// use rayon::prelude::*;
    /// let entities = HandlePool::new();
    /// let health: SecondaryMap<u32> = (0..10).map(|hp| (entities.insert(()), hp)).collect();
    /// let lowest = {
    ///     let guard = pin();
    ///     health.par_iter(&guard).map(|(_, hp)| hp).min()
    /// };
    /// println!("{lowest:?}");
    /// ```
    ///
    /// and values that are not `Sync` cannot be shared with other threads:
    ///
    /// ```compile_fail,E0277
    /// use handle_pool::{pin, SecondaryMap};
    /// use rayon::prelude::*;
    /// let map: SecondaryMap<std::cell::Cell<u32>> = SecondaryMap::new();
    /// let guard = pin();
    /// map.par_iter(&guard).for_each(|(_, v)| v.set(1));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter<'g>(&'g self, guard: &'g Guard) -> ParIter<'g, V, H>
    where
        V: Sync,
    {
        let _ = guard;
        ParIter {
            shared: Shared(self.raw.occupied()),
            _handle: PhantomData,
        }
    }

    /// A parallel iterator over `(handle, &mut value)`. Needs no guard.
    ///
    /// Needs `V: Send`, as handing `&mut V` to other threads does.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// use rayon::prelude::*;
    /// let entities = HandlePool::new();
    /// let mut health: SecondaryMap<u64> = (0..1000).map(|hp| (entities.insert(()), hp)).collect();
    /// health.par_iter_mut().for_each(|(_, hp)| *hp += 1);
    /// assert_eq!(health.values_mut().map(|hp| *hp).sum::<u64>(), 500_500);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter_mut(&mut self) -> ParIterMut<'_, V, H>
    where
        V: Send,
    {
        ParIterMut {
            exclusive: Exclusive::new(self.raw.occupied()),
            _handle: PhantomData,
        }
    }
}

/// The cursor of a `par_iter`: made under the caller's guard, which the
/// iterator borrows for `'g`.
struct Shared<'g, V>(Occupied<'g, V>);

impl<'g, V> Iterator for Shared<'g, V> {
    type Item = (Handle, &'g V);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, found) = self.0.next()?;
        // SAFETY: the cursor loaded the word with Acquire under the guard
        // `par_iter` borrows for 'g.
        Some((handle, unsafe { found.value_ref() }))
    }
}

impl<'g, V: Sync> Cursor for Shared<'g, V> {
    type Value = &'g V;
    const GUARDED: bool = true;
    fn split_off(&mut self) -> Option<Self> {
        Some(Shared(self.0.split_off()?))
    }
}

impl<'a, V: Send> Cursor for Exclusive<'a, V> {
    type Value = &'a mut V;
    const GUARDED: bool = false;
    fn split_off(&mut self) -> Option<Self> {
        Exclusive::split_off(self)
    }
}

/// Parallel iterator over `(handle, &value)`, from [`SecondaryMap::par_iter`].
///
/// It holds the map and a range of entries, not the guard, so it is `Send`
/// exactly when `V: Sync`.
///
/// ```
/// use handle_pool::{pin, HandlePool, SecondaryMap};
/// use rayon::prelude::*;
/// let entities = HandlePool::new();
/// let tags: SecondaryMap<u8> = (0..10).map(|t| (entities.insert(()), t)).collect();
/// assert_eq!(tags.par_iter(&pin()).count(), 10);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParIter<'g, V, H> {
    shared: Shared<'g, V>,
    _handle: PhantomData<fn() -> H>,
}

impl<'g, V: Sync, H: PoolHandle + Send> ParallelIterator for ParIter<'g, V, H> {
    type Item = (H, &'g V);

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        bridge::<_, H, _>(self.shared, consumer)
    }
}

/// Parallel iterator over `(handle, &mut value)`, from
/// [`SecondaryMap::par_iter_mut`].
///
/// ```
/// use handle_pool::{HandlePool, SecondaryMap};
/// use rayon::prelude::*;
/// let entities = HandlePool::new();
/// let mut tags: SecondaryMap<u8> = (0..10).map(|t| (entities.insert(()), t)).collect();
/// assert_eq!(tags.par_iter_mut().filter(|(_, t)| **t % 2 == 0).count(), 5);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParIterMut<'a, V, H> {
    exclusive: Exclusive<'a, V>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, V: Send, H: PoolHandle + Send> ParallelIterator for ParIterMut<'a, V, H> {
    type Item = (H, &'a mut V);

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        bridge::<_, H, _>(self.exclusive, consumer)
    }
}
