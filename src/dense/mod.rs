#![doc = include_str!("../../docs/dense.md")]

mod column;
mod exclusive;
mod flat;
mod index;
mod insert;
mod iter;
mod lookup;
#[cfg(feature = "rayon")]
mod par;
mod raw;
mod remove;

use core::cmp::Ordering;
use core::fmt;
use core::marker::PhantomData;

use crate::config::Config;
use crate::error::CapacityError;
use crate::handle::{Handle, PoolHandle};
use crate::Guard;

pub use iter::{Drain, Iter, IterMut, SlicesMut, Values, ValuesMut};
#[cfg(feature = "rayon")]
pub use par::{ParIterMut, ParValuesMut};

use raw::RawDense;

/// A concurrent pool of `T` values addressed by generational handles, with
/// the values packed in one array for loops over them.
///
/// The handles and guarantees of [`HandlePool`](crate::HandlePool): every
/// thread may [`insert`](Self::insert), [`get`](Self::get) and
/// [`remove`](Self::remove) at once through `&self`; a handle to a removed
/// value is stale forever; a slot index is retired when its generation runs
/// out. What differs is where the values live: an insert appends its value
/// to a dense array, a remove leaves a hole there, and every `&mut self`
/// call fills the holes first with the last values
/// ([`compact`](Self::compact)), so that [`values_mut`](Self::values_mut),
/// [`as_mut_slices`](Self::as_mut_slices) and `par_iter_mut` walk nothing
/// but live values. Under `&self` no value ever moves, so a reference stays
/// valid while its guard lives. See the [module docs](self) for the design
/// and [the crate docs](crate) for choosing between this and `HandlePool`.
///
/// `H` is the handle type: [`Handle`] or one made with
/// [`new_handle_type!`](crate::new_handle_type).
///
/// ```
/// use handle_pool::{pin, DensePool};
///
/// let mut pool = DensePool::new();
/// let a = pool.insert(1.0);
/// let b = pool.insert(2.0);
/// let guard = pin();
/// assert_eq!(pool.get(a, &guard), Some(&1.0));
/// assert!(pool.remove(a)); // a hole until the next `&mut` call
/// assert_eq!(pool.holes(), 1);
/// drop(guard);
/// for v in pool.values_mut() { *v *= 10.0; } // compacts first
/// assert_eq!(pool.holes(), 0);
/// assert_eq!(pool.position(b), Some(0));
/// ```
///
/// Compaction moves values, so it needs `&mut self`, which no reference a
/// guard protects can outlive:
///
/// ```compile_fail,E0502
/// use handle_pool::{pin, DensePool};
/// let mut pool = DensePool::new();
/// let h = pool.insert(1);
/// let guard = pin();
/// let r = pool.get(h, &guard).unwrap();
/// pool.compact();
/// println!("{r}");
/// ```
///
/// A pool is `Send` when `T: Send` and `Sync` when `T: Send + Sync`:
///
/// ```compile_fail,E0277
/// fn assert_sync<X: Sync>(_: &X) {}
/// let pool: handle_pool::DensePool<std::cell::Cell<u32>> = handle_pool::DensePool::new();
/// assert_sync(&pool);
/// ```
pub struct DensePool<T, H = Handle> {
    raw: RawDense<T>,
    _handle: PhantomData<fn(H) -> H>,
}

impl<T> DensePool<T> {
    /// An empty pool with [`Handle`] handles.
    ///
    /// ```
    /// let pool: handle_pool::DensePool<u32> = handle_pool::DensePool::new();
    /// assert!(pool.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_handle_type()
    }

    /// An empty pool with room for at least `capacity` values before it
    /// allocates again.
    ///
    /// ```
    /// let pool: handle_pool::DensePool<u32> = handle_pool::DensePool::with_capacity(1000);
    /// assert!(pool.capacity() >= 1000);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_handle_type(capacity)
    }
}

impl<T, H: PoolHandle> DensePool<T, H> {
    /// An empty pool handing out handles of type `H` (see
    /// [`new_handle_type!`](crate::new_handle_type)).
    ///
    /// ```
    /// handle_pool::new_handle_type! { struct Particle; }
    /// let pool = handle_pool::DensePool::<[f32; 3], Particle>::with_handle_type();
    /// let p: Particle = pool.insert([0.0; 3]);
    /// assert!(pool.contains(p));
    /// ```
    pub fn with_handle_type() -> Self {
        Self::from_config(Config::default())
    }

    /// An empty pool handing out handles of type `H`, with room for at
    /// least `capacity` values before it allocates again.
    ///
    /// ```
    /// handle_pool::new_handle_type! { struct Particle; }
    /// let pool = handle_pool::DensePool::<u8, Particle>::with_capacity_and_handle_type(10);
    /// assert!(pool.capacity() >= 10);
    /// ```
    pub fn with_capacity_and_handle_type(capacity: usize) -> Self {
        let pool = Self::with_handle_type();
        pool.raw.reserve(capacity);
        pool
    }

    /// A pool with non-default parameters (this crate's tests and model
    /// checks, through the `testing` feature; not part of the stable API).
    /// `max_slots` bounds both the live values and the inserts between two
    /// `&mut` calls.
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn with_config(config: Config) -> Self {
        Self::from_config(config)
    }

    fn from_config(config: Config) -> Self {
        DensePool {
            raw: RawDense::new(config),
            _handle: PhantomData,
        }
    }

    /// Inserts a value at the end of the dense array and returns its handle.
    ///
    /// Wait-free but for allocation: one `fetch_add` draws the position and
    /// the slot index, then the value is written and published.
    ///
    /// # Panics
    /// When the pool is full: every slot index is in use or retired, or
    /// 2^32 - 1 values were inserted since the last `&mut` call (positions
    /// are reused only by compaction). [`try_insert`](Self::try_insert)
    /// returns an error instead.
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert(7);
    /// assert_eq!(pool.get_cloned(h), Some(7));
    /// ```
    #[inline]
    pub fn insert(&self, value: T) -> H {
        match self.raw.insert(value) {
            Ok(handle) => H::from_handle(handle),
            Err(_) => pool_is_full(),
        }
    }

    /// Inserts a value, or gives it back if the pool is full.
    ///
    /// # Errors
    /// [`CapacityError`] holding the value when no slot index or no position
    /// is left this round (see [`insert`](Self::insert)).
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.try_insert(7).unwrap();
    /// assert!(pool.contains(h));
    /// ```
    #[inline]
    pub fn try_insert(&self, value: T) -> Result<H, CapacityError<T>> {
        self.raw
            .insert(value)
            .map(H::from_handle)
            .map_err(CapacityError)
    }

    /// Inserts the value `f` makes from its own handle.
    ///
    /// If `f` panics, nothing is inserted, the handle it was shown stays
    /// stale forever, and its position is a hole until the next `&mut`
    /// call.
    ///
    /// # Panics
    /// When the pool is full, as [`insert`](Self::insert); and if `f` panics.
    ///
    /// ```
    /// use handle_pool::{DensePool, Handle};
    /// let pool: DensePool<(Handle, &str)> = DensePool::new();
    /// let h = pool.insert_with(|me| (me, "knows itself"));
    /// assert_eq!(pool.with(h, |v| v.0), Some(h));
    /// ```
    pub fn insert_with(&self, f: impl FnOnce(H) -> T) -> H {
        // `H::from_handle` runs once, inside the closure, where a panic of
        // it is covered like one of `f`; the caller gets the handle `f` saw.
        let mut shown = None;
        let made = self.raw.insert_with(|handle| {
            let handle = *shown.insert(H::from_handle(handle));
            f(handle)
        });
        match (made, shown) {
            (Some(_), Some(handle)) => handle,
            _ => pool_is_full(),
        }
    }

    /// Whether `handle` refers to a value in the pool right now.
    ///
    /// Wait-free and needs no guard: two loads.
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert(1);
    /// assert!(pool.contains(h));
    /// pool.remove(h);
    /// assert!(!pool.contains(h));
    /// ```
    #[inline]
    pub fn contains(&self, handle: H) -> bool {
        self.raw.contains(handle.handle())
    }

    /// The value `handle` refers to, if it is still in the pool.
    ///
    /// Wait-free: three loads, no write to shared memory. The reference
    /// lives as long as both the borrow of the pool and the guard: a value
    /// removed meanwhile is not dropped until the guard is, and no value
    /// moves until a `&mut` call, which the borrow rules out.
    ///
    /// ```
    /// use handle_pool::{pin, DensePool};
    /// let pool = DensePool::new();
    /// let h = pool.insert(String::from("hi"));
    /// let guard = pin();
    /// let s: &String = pool.get(h, &guard).unwrap();
    /// pool.remove(h); // stale at once, but `s` stays valid while `guard` lives
    /// assert_eq!(s, "hi");
    /// assert!(pool.get(h, &guard).is_none());
    /// ```
    ///
    /// The reference cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, DensePool};
    /// let pool = DensePool::new();
    /// let h = pool.insert(1);
    /// let r = {
    ///     let guard = pin();
    ///     pool.get(h, &guard).unwrap()
    /// };
    /// println!("{r}");
    /// ```
    #[inline]
    pub fn get<'g>(&'g self, handle: H, guard: &'g Guard) -> Option<&'g T> {
        self.raw.get(handle.handle(), guard)
    }

    /// Calls `f` with the value `handle` refers to, protected for the call
    /// as [`HandlePool::with`](crate::HandlePool::with) is: no value removed
    /// meanwhile is dropped until `f` returns.
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert(vec![1, 2, 3]);
    /// assert_eq!(pool.with(h, |v| v.len()), Some(3));
    /// ```
    #[inline]
    pub fn with<R>(&self, handle: H, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.raw.with(handle.handle(), f)
    }

    /// A clone of the value `handle` refers to (protected as in
    /// [`with`](Self::with)).
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert(String::from("x"));
    /// assert_eq!(pool.get_cloned(h).as_deref(), Some("x"));
    /// ```
    #[inline]
    pub fn get_cloned(&self, handle: H) -> Option<T>
    where
        T: Clone,
    {
        self.with(handle, T::clone)
    }

    /// Removes the value `handle` refers to. Returns `false` if it was not
    /// in the pool (stale, forged, or removed by another thread first).
    ///
    /// The handle is stale from this moment on, and the value's position
    /// is a hole until the next `&mut` call. The value itself is dropped
    /// once no guard pinned, and no [`with`](Self::with) begun, before its
    /// batch was sealed is left (see
    /// [`HandlePool::remove`](crate::HandlePool::remove)), at the latest by
    /// [`flush`](Self::flush) or the next `&mut` call. The slot index is
    /// reused only after the next `&mut` call, behind every index freed
    /// before it.
    ///
    /// Lock-free: one CAS decides between racing removers.
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert(1);
    /// assert!(pool.remove(h));
    /// assert!(!pool.remove(h));
    /// ```
    #[inline]
    pub fn remove(&self, handle: H) -> bool {
        self.raw.remove(handle.handle())
    }

    /// Number of values in the pool.
    ///
    /// Exact when no operation is in flight; under concurrency a sum of
    /// counts read one after another, which may lag behind (or briefly run
    /// ahead of) the operations in progress.
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// pool.insert(1);
    /// assert_eq!(pool.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether [`len`](Self::len) is 0.
    ///
    /// ```
    /// let pool: handle_pool::DensePool<u8> = handle_pool::DensePool::new();
    /// assert!(pool.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holes in the dense array: positions whose value was removed (or
    /// whose insert was abandoned) since the last `&mut` call. An iteration
    /// under `&self` visits `len() + holes()` positions. 0 after every
    /// `&mut` call.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let h = pool.insert(1);
    /// pool.insert(2);
    /// pool.remove(h);
    /// assert_eq!((pool.len(), pool.holes()), (1, 1));
    /// pool.compact();
    /// assert_eq!((pool.len(), pool.holes()), (1, 0));
    /// ```
    pub fn holes(&self) -> usize {
        self.raw.holes()
    }

    /// Number of positions allocated in the dense array.
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// pool.insert(1);
    /// assert!(pool.capacity() >= 1);
    /// ```
    pub fn capacity(&self) -> usize {
        self.raw.capacity()
    }

    /// The position of the value `handle` refers to in the dense array: the
    /// index of its value among those [`iter`](Self::iter) visits, and after
    /// a `&mut` call its index in the concatenation of
    /// [`as_mut_slices`](Self::as_mut_slices). Positions change only under
    /// `&mut`.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let a = pool.insert('a');
    /// let b = pool.insert('b');
    /// assert_eq!((pool.position(a), pool.position(b)), (Some(0), Some(1)));
    /// pool.remove(a);
    /// pool.compact(); // the last value fills the hole
    /// assert_eq!(pool.position(b), Some(0));
    /// assert_eq!(pool.handle_at(0), Some(b));
    /// ```
    #[inline]
    pub fn position(&self, handle: H) -> Option<usize> {
        self.raw
            .position(handle.handle())
            .map(|position| position as usize)
    }

    /// The handle of the value at `position` in the dense array, if a value
    /// is there (not a hole, not past the end): the inverse of
    /// [`position`](Self::position).
    ///
    /// ```
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert("x");
    /// assert_eq!(pool.handle_at(0), Some(h));
    /// assert_eq!(pool.handle_at(1), None);
    /// ```
    pub fn handle_at(&self, position: usize) -> Option<H> {
        let position = u32::try_from(position).ok()?;
        self.raw.handle_at(position).map(H::from_handle)
    }

    /// Iterates over `(handle, &value)` in position order, skipping holes.
    ///
    /// Under concurrency every item yielded was in the pool when its
    /// position was visited; a value inserted or removed during the
    /// iteration may or may not be yielded; each position is visited once.
    /// It visits `len() + holes()` positions.
    ///
    /// ```
    /// use handle_pool::{pin, DensePool};
    /// let pool = DensePool::new();
    /// let a = pool.insert(1);
    /// pool.insert(2);
    /// pool.remove(a);
    /// let guard = pin();
    /// let all: Vec<_> = pool.iter(&guard).map(|(_, v)| *v).collect();
    /// assert_eq!(all, [2]);
    /// ```
    pub fn iter<'g>(&'g self, _guard: &'g Guard) -> Iter<'g, T, H> {
        Iter::new(&self.raw)
    }

    /// Iterates over `&value` in position order, skipping holes, with the
    /// guarantees of [`iter`](Self::iter).
    ///
    /// ```
    /// use handle_pool::{pin, DensePool};
    /// let pool: DensePool<u32> = (1..=4).collect();
    /// let guard = pin();
    /// assert_eq!(pool.values(&guard).sum::<u32>(), 10);
    /// ```
    ///
    /// A value cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, DensePool};
    /// let pool: DensePool<u32> = (1..=4).collect();
    /// let max = {
    ///     let guard = pin();
    ///     pool.values(&guard).max()
    /// };
    /// println!("{max:?}");
    /// ```
    pub fn values<'g>(&'g self, _guard: &'g Guard) -> Values<'g, T> {
        Values::new(&self.raw)
    }

    /// Drops every removed value that no guard protects, now, without
    /// `&mut`: seals every partial removal batch and reclaims those no
    /// reader holds back (as [`HandlePool::flush`](crate::HandlePool::flush)).
    /// Their positions stay holes until the next `&mut` call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let value = Arc::new(());
    /// let pool = handle_pool::DensePool::new();
    /// let h = pool.insert(Arc::clone(&value));
    /// pool.remove(h);
    /// pool.flush();
    /// assert_eq!(Arc::strong_count(&value), 1);
    /// ```
    pub fn flush(&self) {
        self.raw.flush();
    }

    /// Ends the round: fills every hole with the last live value
    /// (BitSquid's swap-remove), drops the removed values not dropped yet,
    /// and makes the slot indices freed since the last `&mut` call reusable.
    /// Values before the first hole keep their positions; each hole, lowest
    /// first, gets the last value. Costs nothing without holes, else a step
    /// per position in use.
    ///
    /// Every other `&mut` method but [`get_mut`](Self::get_mut) begins with
    /// it.
    ///
    /// # Panics
    /// If a removed value's `Drop` panics: after every value was dropped
    /// and the pool is dense, with the first panic.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let [a, b, c] = ["a", "b", "c"].map(|v| pool.insert(v));
    /// pool.remove(a);
    /// pool.compact();
    /// assert_eq!(pool.as_mut_slices().next(), Some(&mut ["c", "b"][..]));
    /// assert_eq!(pool.get_cloned(c), Some("c"));
    /// # let _ = b;
    /// ```
    pub fn compact(&mut self) {
        if let Some(panic) = self.raw.compact() {
            std::panic::resume_unwind(panic);
        }
    }

    /// The value `handle` refers to, mutably. Needs no guard, and does not
    /// compact.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let h = pool.insert(1);
    /// *pool.get_mut(h).unwrap() += 1;
    /// assert_eq!(pool.get_cloned(h), Some(2));
    /// ```
    pub fn get_mut(&mut self, handle: H) -> Option<&mut T> {
        self.raw.get_mut(handle.handle())
    }

    /// Removes the value `handle` refers to and returns it, moving the last
    /// value into its place (after compacting).
    ///
    /// # Panics
    /// As [`compact`](Self::compact), before anything is taken.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let h = pool.insert(String::from("mine"));
    /// assert_eq!(pool.take(h).as_deref(), Some("mine"));
    /// assert_eq!(pool.take(h), None);
    /// ```
    pub fn take(&mut self, handle: H) -> Option<T> {
        let handle = handle.handle();
        self.compact();
        self.raw.take(handle)
    }

    /// Iterates over `(handle, &mut value)` in position order, after
    /// compacting: the live values and nothing else.
    ///
    /// # Panics
    /// As [`compact`](Self::compact).
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let h = pool.insert(1);
    /// for (_, v) in pool.iter_mut() { *v *= 10; }
    /// assert_eq!(pool.get_cloned(h), Some(10));
    /// ```
    pub fn iter_mut(&mut self) -> IterMut<'_, T, H> {
        self.compact();
        IterMut::new(&mut self.raw)
    }

    /// Iterates over `&mut value` in position order, after compacting.
    ///
    /// # Panics
    /// As [`compact`](Self::compact).
    ///
    /// ```
    /// let mut pool: handle_pool::DensePool<u32> = (1..=4).collect();
    /// for v in pool.values_mut() { *v *= 10; }
    /// assert_eq!(pool.values_mut().map(|v| *v).sum::<u32>(), 100);
    /// ```
    pub fn values_mut(&mut self) -> ValuesMut<'_, T> {
        self.compact();
        ValuesMut::new(&mut self.raw)
    }

    /// The live values as slices, after compacting, in position order (the
    /// first starts at position 0, each next one where the previous ended):
    /// the first 64 positions, then the rest as one slice where the
    /// system lets the pool reserve address space for them (64-bit Unix,
    /// up to 1 GiB of values), else (and past that) one slice per segment
    /// of the dense array (doubling in length), so a loop over them touches
    /// nothing but values. [`handle_at`](Self::handle_at) gives the handle
    /// of a position.
    ///
    /// # Panics
    /// As [`compact`](Self::compact).
    ///
    /// ```
    /// let mut pool: handle_pool::DensePool<f32> = (0..100).map(|i| i as f32).collect();
    /// for slice in pool.as_mut_slices() {
    ///     for v in slice { *v = v.sqrt(); }
    /// }
    /// assert_eq!(pool.values_mut().count(), 100);
    /// ```
    pub fn as_mut_slices(&mut self) -> SlicesMut<'_, T> {
        self.compact();
        SlicesMut::new(&mut self.raw)
    }

    /// Keeps only the values for which `keep` returns `true`, after
    /// compacting; each value removed is replaced by the last one, which is
    /// visited next, so the pool stays dense.
    ///
    /// # Panics
    /// As [`compact`](Self::compact); and if `keep` or a value's `Drop`
    /// panics, with the pool dense and consistent: the values visited are
    /// kept or removed as decided, the rest are kept.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// for i in 0..10 { pool.insert(i); }
    /// pool.retain(|_, v| *v % 2 == 0);
    /// assert_eq!(pool.len(), 5);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(H, &mut T) -> bool) {
        self.compact();
        self.raw
            .retain(|handle, value| keep(H::from_handle(handle), value));
    }

    /// Removes every value, returning `(handle, value)` pairs from the last
    /// position down, after compacting. Every old handle is stale once the
    /// iterator is dropped; if it is leaked (`mem::forget`), the values it
    /// had not yielded stay in the pool, their handles valid.
    ///
    /// # Panics
    /// As [`compact`](Self::compact); and when the iterator is dropped, if
    /// the `Drop` of a value it had not yielded panics: after every such
    /// value was dropped, with the first panic.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let h = pool.insert(5);
    /// let all: Vec<_> = pool.drain().collect();
    /// assert_eq!(all, vec![(h, 5)]);
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// ```
    pub fn drain(&mut self) -> Drain<'_, T, H> {
        self.compact();
        Drain::new(&mut self.raw)
    }

    /// Removes every value; every old handle becomes stale.
    ///
    /// # Panics
    /// If a value's `Drop` panics: after every value was dropped, with the
    /// first panic.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let h = pool.insert(5);
    /// pool.clear();
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// ```
    pub fn clear(&mut self) {
        let compacted = self.raw.compact();
        let cleared = self.raw.clear();
        if let Some(panic) = compacted.or(cleared) {
            std::panic::resume_unwind(panic);
        }
    }

    /// Sorts the values in the dense array with `compare` (stable, like
    /// `slice::sort_by`), after compacting: every handle stays valid and
    /// follows its value (`handle_map`'s defragment).
    ///
    /// The positions are sorted first and the values moved after, so a
    /// panic in `compare` leaves every value where it was; moving runs no
    /// user code.
    ///
    /// # Panics
    /// As [`compact`](Self::compact); and if `compare` panics (or does not
    /// implement a total order and the sort notices), with the pool as it
    /// was after compacting.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let handles: Vec<_> = [3, 1, 2].into_iter().map(|v| pool.insert(v)).collect();
    /// pool.sort_by(|a, b| a.cmp(b));
    /// assert_eq!(pool.values_mut().map(|v| *v).collect::<Vec<_>>(), [1, 2, 3]);
    /// assert_eq!(pool.get_cloned(handles[0]), Some(3));
    /// assert_eq!(pool.position(handles[0]), Some(2));
    /// ```
    pub fn sort_by(&mut self, compare: impl FnMut(&T, &T) -> Ordering) {
        self.compact();
        self.raw.sort_by(compare);
    }

    /// Sorts the values by the key `key` extracts (stable), as
    /// [`sort_by`](Self::sort_by).
    ///
    /// # Panics
    /// As [`sort_by`](Self::sort_by), for a panic in `key` or in `K`'s `Ord`.
    ///
    /// ```
    /// let mut pool = handle_pool::DensePool::new();
    /// let far = pool.insert((9.0f32, "far"));
    /// pool.insert((1.0f32, "near"));
    /// pool.sort_by_key(|&(depth, _)| depth as u32);
    /// assert_eq!(pool.position(far), Some(1));
    /// ```
    pub fn sort_by_key<K: Ord>(&mut self, key: impl FnMut(&T) -> K) {
        self.compact();
        self.raw.sort_by_key(key);
    }

    /// The raw pool, mutably (for `par`).
    #[cfg(feature = "rayon")]
    fn raw_mut(&mut self) -> &mut RawDense<T> {
        &mut self.raw
    }
}

/// [`DensePool::insert`]'s panic, out of line and cold.
#[cold]
#[inline(never)]
fn pool_is_full() -> ! {
    panic!("DensePool::insert: the pool is full (every slot index is in use or retired, or 2^32 - 1 inserts since the last &mut call)")
}

impl<T, H: PoolHandle> Default for DensePool<T, H> {
    fn default() -> Self {
        Self::with_handle_type()
    }
}

impl<T, H: PoolHandle> Extend<T> for DensePool<T, H> {
    /// Inserts every value.
    ///
    /// # Panics
    /// When the pool is full, as [`DensePool::insert`].
    fn extend<I: IntoIterator<Item = T>>(&mut self, values: I) {
        for value in values {
            self.insert(value);
        }
    }
}

impl<T, H: PoolHandle> FromIterator<T> for DensePool<T, H> {
    /// A pool of the values, in order.
    ///
    /// ```
    /// let pool: handle_pool::DensePool<u32> = (0..3).collect();
    /// assert_eq!(pool.len(), 3);
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        let mut pool = Self::with_handle_type();
        pool.extend(values);
        pool
    }
}

impl<T: fmt::Debug, H: PoolHandle> fmt::Debug for DensePool<T, H> {
    /// Lists the live `(handle, value)` pairs in position order, pinning
    /// internally.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = crate::pin();
        f.debug_map().entries(self.iter(&guard)).finish()
    }
}
