//! Parallel iteration and collection with rayon (feature `rayon`).
//!
//! Typed wrappers over the raw pool's splittable cursors: each parallel
//! iterator is one range of slot indices, which rayon splits in halves
//! (cut at bucket boundaries where one is near) as threads go idle, with no
//! sequential pass first. The items are not counted in advance (only
//! occupied slots yield one), so these are unindexed parallel iterators.

use core::marker::PhantomData;

use crate::Guard;
use rayon::iter::plumbing::{
    bridge_unindexed, Consumer, Folder, Reducer, UnindexedConsumer, UnindexedProducer,
};
use rayon::iter::{FromParallelIterator, IntoParallelIterator, ParallelExtend, ParallelIterator};

use crate::handle::{Handle, PoolHandle};
use crate::pool::HandlePool;
use crate::raw::{Drained, Entries, EntriesMut, Inserter};

impl<T, H: PoolHandle> HandlePool<T, H> {
    /// A parallel iterator over `(handle, &value)` for the values in the
    /// pool: the items [`iter`](Self::iter) would yield, visited by rayon's
    /// threads.
    ///
    /// The same guarantee as `iter`: every item was in the pool at the
    /// moment its slot was visited, and a value inserted or removed during
    /// the iteration may or may not be yielded; each slot is visited once.
    /// The references are protected by `guard`, on whichever thread they
    /// are used: the guard stays borrowed (and so
    /// pinned) for as long as the iterator or any item lives. The iterator
    /// itself holds no guard, only the pool and a range of slots.
    ///
    /// Needs `T: Sync`, as sharing `&T` between threads does.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool};
    /// use rayon::prelude::*;
    /// let pool: HandlePool<u64> = (1..=1000).collect();
    /// let guard = pin();
    /// let sum: u64 = pool.par_iter(&guard).map(|(_, v)| *v).sum();
    /// assert_eq!(sum, 500_500);
    /// ```
    ///
    /// An item cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool};
    /// use rayon::prelude::*;
    /// let pool: HandlePool<u32> = (0..10).collect();
    /// let first = {
    ///     let guard = pin();
    ///     pool.par_iter(&guard).map(|(_, v)| v).min()
    /// };
    /// println!("{first:?}");
    /// ```
    ///
    /// nor its pool:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool};
    /// use rayon::prelude::*;
    /// let guard = pin();
    /// let first = {
    ///     let pool: HandlePool<u32> = (0..10).collect();
    ///     pool.par_iter(&guard).map(|(_, v)| v).min()
    /// };
    /// println!("{first:?}");
    /// ```
    ///
    /// and values that are not `Sync` cannot be shared with other threads:
    ///
    /// ```compile_fail,E0277
    /// use handle_pool::{pin, HandlePool};
    /// use rayon::prelude::*;
    /// let pool: HandlePool<std::cell::Cell<u32>> = HandlePool::new();
    /// let guard = pin();
    /// pool.par_iter(&guard).for_each(|(_, v)| v.set(1));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter<'g>(&'g self, guard: &'g Guard) -> ParIter<'g, T, H>
    where
        T: Sync,
    {
        ParIter {
            entries: self.raw().entries(guard),
            _handle: PhantomData,
        }
    }

    /// A parallel iterator over `(handle, &mut value)`. Needs no guard.
    ///
    /// Needs `T: Send`, as handing `&mut T` to other threads does.
    ///
    /// ```
    /// use handle_pool::HandlePool;
    /// use rayon::prelude::*;
    /// let mut pool: HandlePool<u64> = (0..1000).collect();
    /// pool.par_iter_mut().for_each(|(_, v)| *v += 1);
    /// assert_eq!(pool.into_iter().map(|(_, v)| v).sum::<u64>(), 500_500);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter_mut(&mut self) -> ParIterMut<'_, T, H>
    where
        T: Send,
    {
        ParIterMut {
            entries: self.raw_mut().entries_mut(),
            _handle: PhantomData,
        }
    }

    /// A parallel iterator over `&mut value`. Needs no guard.
    ///
    /// ```
    /// use handle_pool::HandlePool;
    /// use rayon::prelude::*;
    /// let mut pool: HandlePool<String> = ["a", "b"].map(String::from).into_iter().collect();
    /// pool.par_values_mut().for_each(|s| s.push('!'));
    /// let mut all: Vec<String> = pool.into_iter().map(|(_, v)| v).collect();
    /// all.sort();
    /// assert_eq!(all, ["a!", "b!"]);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_values_mut(&mut self) -> ParValuesMut<'_, T>
    where
        T: Send,
    {
        ParValuesMut {
            entries: self.raw_mut().entries_mut(),
        }
    }

    /// Removes every value in parallel, yielding `(handle, value)` pairs.
    /// Every old handle is stale afterwards.
    ///
    /// Every value is either yielded or dropped, exactly once: the values
    /// not yielded (the iterator was dropped unused, or a consumer such as
    /// `find_any` stopped early) are dropped when the iterator, or the part
    /// of it a thread was working on, is dropped.
    ///
    /// ```
    /// use handle_pool::HandlePool;
    /// use rayon::prelude::*;
    /// let mut pool: HandlePool<u32> = (0..100).collect();
    /// let sum: u32 = pool.par_drain().map(|(_, v)| v).sum();
    /// assert_eq!(sum, 4950);
    /// assert!(pool.is_empty());
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_drain(&mut self) -> ParDrain<'_, T, H>
    where
        T: Send,
    {
        ParDrain {
            drained: self.raw_mut().drain(),
            _handle: PhantomData,
        }
    }
}

/// A raw cursor over a range of slots (a pool's, or a secondary map's
/// entries) that splits in two: what [`bridge`] hands to rayon.
pub(crate) trait Cursor: Iterator<Item = (Handle, Self::Value)> + Send + Sized {
    type Value: Send;
    /// Whether the values are borrowed under the caller's guard (see
    /// `Producer::fold_with`).
    const GUARDED: bool = false;
    /// The upper part of the range, cut off this cursor, if there is one
    /// worth a thread.
    fn split_off(&mut self) -> Option<Self>;
}

impl<'g, T: Sync> Cursor for Entries<'g, T> {
    type Value = &'g T;
    const GUARDED: bool = true;
    fn split_off(&mut self) -> Option<Self> {
        Entries::split_off(self)
    }
}

impl<'a, T: Send> Cursor for EntriesMut<'a, T> {
    type Value = &'a mut T;
    fn split_off(&mut self) -> Option<Self> {
        EntriesMut::split_off(self)
    }
}

impl<T: Send> Cursor for Drained<'_, T> {
    type Value = T;
    fn split_off(&mut self) -> Option<Self> {
        Drained::split_off(self)
    }
}

/// One part of a parallel iteration, typing the handles of a raw cursor.
struct Producer<C, H> {
    cursor: C,
    _handle: PhantomData<fn() -> H>,
}

impl<C: Cursor, H: PoolHandle + Send> UnindexedProducer for Producer<C, H> {
    type Item = (H, C::Value);

    fn split(mut self) -> (Self, Option<Self>) {
        let upper = self.cursor.split_off().map(|cursor| Producer {
            cursor,
            _handle: PhantomData,
        });
        (self, upper)
    }

    fn fold_with<F: Folder<Self::Item>>(self, folder: F) -> F {
        // A worker visiting values under the caller's guard announces
        // itself too, so that the pool (or a secondary map's value pool)
        // knows it is held back here: the caller's guard (older than this
        // announcement, so nothing more is held back) lasts until every part
        // is done, and an insert from the user's closure that waited at the
        // pool's bound for it would wait out its whole patience (see
        // `RawPool::wait_at_bound`).
        let _section = C::GUARDED.then(crate::announce::Announcement::begin);
        // A folder that stops early drops the cursor with the rest of its
        // range; a draining cursor then drops the values left in it.
        folder.consume_iter(
            self.cursor
                .map(|(handle, value)| (H::from_handle(handle), value)),
        )
    }
}

/// Drives `consumer` over `cursor`'s items, typing their handles as `H`.
pub(crate) fn bridge<C, H, R>(cursor: C, consumer: R) -> R::Result
where
    C: Cursor,
    H: PoolHandle + Send,
    R: UnindexedConsumer<(H, C::Value)>,
{
    let producer: Producer<C, H> = Producer {
        cursor,
        _handle: PhantomData,
    };
    bridge_unindexed(producer, consumer)
}

/// Parallel iterator over `(handle, &value)`, from [`HandlePool::par_iter`].
///
/// It holds the pool and a range of slots, not the guard, so it is `Send`
/// exactly when `T: Sync`.
///
/// ```
/// use handle_pool::{pin, HandlePool};
/// use rayon::prelude::*;
/// let pool: HandlePool<u32> = (0..10).collect();
/// let guard = pin();
/// assert_eq!(pool.par_iter(&guard).count(), 10);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParIter<'g, T, H> {
    entries: Entries<'g, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'g, T: Sync, H: PoolHandle + Send> ParallelIterator for ParIter<'g, T, H> {
    type Item = (H, &'g T);

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        bridge::<_, H, _>(self.entries, consumer)
    }
}

/// Parallel iterator over `(handle, &mut value)`, from [`HandlePool::par_iter_mut`].
///
/// ```
/// use handle_pool::HandlePool;
/// use rayon::prelude::*;
/// let mut pool: HandlePool<u32> = (0..10).collect();
/// assert_eq!(pool.par_iter_mut().filter(|(_, v)| **v % 2 == 0).count(), 5);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParIterMut<'a, T, H> {
    entries: EntriesMut<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T: Send, H: PoolHandle + Send> ParallelIterator for ParIterMut<'a, T, H> {
    type Item = (H, &'a mut T);

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        bridge::<_, H, _>(self.entries, consumer)
    }
}

/// Parallel iterator over `&mut value`, from [`HandlePool::par_values_mut`].
///
/// ```
/// use handle_pool::HandlePool;
/// use rayon::prelude::*;
/// let mut pool: HandlePool<u32> = (0..10).collect();
/// assert_eq!(pool.par_values_mut().map(|v| *v).max(), Some(9));
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParValuesMut<'a, T> {
    entries: EntriesMut<'a, T>,
}

impl<'a, T: Send> ParallelIterator for ParValuesMut<'a, T> {
    type Item = &'a mut T;

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        let pairs = ParIterMut::<'a, T, Handle> {
            entries: self.entries,
            _handle: PhantomData,
        };
        pairs.map(|(_, value)| value).drive_unindexed(consumer)
    }
}

/// Parallel draining iterator over `(handle, value)`, from [`HandlePool::par_drain`].
///
/// Dropping it, used or not, leaves the pool empty: the values it did not
/// yield are dropped.
///
/// ```
/// use handle_pool::HandlePool;
/// use rayon::prelude::*;
/// let mut pool: HandlePool<u32> = (0..10).collect();
/// let mut values: Vec<u32> = pool.par_drain().map(|(_, v)| v).collect();
/// values.sort();
/// assert_eq!(values, (0..10).collect::<Vec<_>>());
/// assert!(pool.is_empty());
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParDrain<'a, T, H> {
    drained: Drained<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<T: Send, H: PoolHandle + Send> ParallelIterator for ParDrain<'_, T, H> {
    type Item = (H, T);

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        bridge::<_, H, _>(self.drained, consumer)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
impl<T: Send, H: PoolHandle> FromParallelIterator<T> for HandlePool<T, H> {
    /// A pool holding the values: each rayon job inserts its part as one
    /// batch (see [`insert_many`](HandlePool::insert_many)).
    ///
    /// # Panics
    /// When the pool is full, as [`insert`](HandlePool::insert).
    ///
    /// ```
    /// use handle_pool::HandlePool;
    /// use rayon::prelude::*;
    /// let pool: HandlePool<u32> = (0..1000).into_par_iter().collect();
    /// assert_eq!(pool.len(), 1000);
    /// ```
    fn from_par_iter<I: IntoParallelIterator<Item = T>>(values: I) -> Self {
        let mut pool = Self::with_handle_type();
        pool.par_extend(values);
        pool
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
impl<T: Send, H: PoolHandle> ParallelExtend<T> for HandlePool<T, H> {
    /// Inserts the values: each rayon job inserts its part as one batch
    /// (their handles are not returned).
    ///
    /// # Panics
    /// When the pool is full, as [`insert`](HandlePool::insert); the values
    /// inserted before that stay in the pool.
    ///
    /// ```
    /// use handle_pool::HandlePool;
    /// use rayon::prelude::*;
    /// let mut pool: HandlePool<u32> = HandlePool::new();
    /// pool.par_extend((0..100).into_par_iter().map(|i| i * 2));
    /// assert_eq!(pool.len(), 100);
    /// ```
    fn par_extend<I: IntoParallelIterator<Item = T>>(&mut self, values: I) {
        let inserter = InsertConsumer(self.raw_mut().inserter());
        values.into_par_iter().drive_unindexed(inserter);
    }
}

/// The consumer of a parallel insert: every folder inserts what it is given
/// as one batch.
struct InsertConsumer<'a, T>(Inserter<'a, T>);

impl<T> Clone for InsertConsumer<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for InsertConsumer<'_, T> {}

const FULL: &str =
    "HandlePool: extending a full pool (all 2^32 - 1 slot indices are in use or retired)";

impl<T: Send> Consumer<T> for InsertConsumer<'_, T> {
    type Folder = Self;
    type Reducer = Inserted;
    type Result = ();

    fn split_at(self, _index: usize) -> (Self, Self, Inserted) {
        (self, self, Inserted)
    }

    fn into_folder(self) -> Self {
        self
    }

    fn full(&self) -> bool {
        false
    }
}

impl<T: Send> UnindexedConsumer<T> for InsertConsumer<'_, T> {
    fn split_off_left(&self) -> Self {
        *self
    }

    fn to_reducer(&self) -> Inserted {
        Inserted
    }
}

impl<T: Send> Folder<T> for InsertConsumer<'_, T> {
    type Result = ();

    fn consume(self, value: T) -> Self {
        if self.0.insert(value).is_err() {
            panic!("{FULL}");
        }
        self
    }

    fn consume_iter<I: IntoIterator<Item = T>>(self, values: I) -> Self {
        if self.0.insert_all(values).is_err() {
            panic!("{FULL}");
        }
        self
    }

    fn complete(self) {}

    fn full(&self) -> bool {
        false
    }
}

/// Joins the parts of a parallel insert: there is nothing to join.
struct Inserted;

impl Reducer<()> for Inserted {
    fn reduce(self, _left: (), _right: ()) {}
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/par.rs"]
mod tests;
