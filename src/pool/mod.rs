//! The public pool: typed handles over the raw pool in `raw`, and the API docs.

use core::fmt;
use core::marker::PhantomData;

use crate::Guard;

use crate::config::Config;
use crate::error::CapacityError;
use crate::handle::{Handle, PoolHandle};
use crate::iter::{Iter, Keys, Values};
use crate::raw::{HandleSink, RawPool};
use crate::reader::Reader;

mod exclusive;
mod remove;

/// A concurrent, lock-free pool of `T` values addressed by generational handles.
///
/// Every thread may [`insert`](Self::insert), [`get`](Self::get) and
/// [`remove`](Self::remove) at once through `&self`. Lookups are wait-free
/// (loads only), removal is one CAS on the slot, insertion is lock-free. A
/// handle to a removed value is stale forever. See the [crate docs](crate)
/// for the guarantees and the design.
///
/// `H` is the handle type: [`Handle`] or one made with
/// [`new_handle_type!`](crate::new_handle_type).
///
/// ```
/// use handle_pool::{pin, HandlePool};
///
/// let pool = HandlePool::new();
/// let a = pool.insert("apple");
/// let guard = pin();
/// assert_eq!(pool.get(a, &guard), Some(&"apple"));
/// assert!(pool.remove(a));
/// assert_eq!(pool.get(a, &guard), None);
/// ```
///
/// A pool is `Send` when `T: Send` and `Sync` when `T: Send + Sync`: threads
/// sharing it read `&T` and move values in and out. A pool of `Cell`s cannot
/// be shared,
///
/// ```compile_fail,E0277
/// fn assert_sync<X: Sync>(_: &X) {}
/// let pool: handle_pool::HandlePool<std::cell::Cell<u32>> = handle_pool::HandlePool::new();
/// assert_sync(&pool);
/// ```
///
/// and a pool of `Rc`s cannot even be sent:
///
/// ```compile_fail,E0277
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<std::rc::Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool);
/// ```
pub struct HandlePool<T, H = Handle> {
    raw: RawPool<T>,
    _handle: PhantomData<fn(H) -> H>,
}

impl<T> HandlePool<T> {
    /// An empty pool with [`Handle`] handles. Allocates nothing until the
    /// first insert.
    ///
    /// ```
    /// let pool: handle_pool::HandlePool<u32> = handle_pool::HandlePool::new();
    /// assert!(pool.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_handle_type()
    }

    /// An empty pool with room for at least `capacity` values before it
    /// allocates again.
    ///
    /// ```
    /// let pool: handle_pool::HandlePool<u32> = handle_pool::HandlePool::with_capacity(1000);
    /// assert!(pool.capacity() >= 1000);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_handle_type(capacity)
    }
}

impl<T, H: PoolHandle> HandlePool<T, H> {
    /// An empty pool handing out handles of type `H` (see
    /// [`new_handle_type!`](crate::new_handle_type)).
    ///
    /// ```
    /// handle_pool::new_handle_type! { struct Entity; }
    /// let pool = handle_pool::HandlePool::<&str, Entity>::with_handle_type();
    /// let e: Entity = pool.insert("e");
    /// assert!(pool.contains(e));
    /// ```
    pub fn with_handle_type() -> Self {
        Self::from_config(Config::default())
    }

    /// An empty pool handing out handles of type `H`, with room for at
    /// least `capacity` values before it allocates again.
    ///
    /// ```
    /// handle_pool::new_handle_type! { struct Entity; }
    /// let pool = handle_pool::HandlePool::<u8, Entity>::with_capacity_and_handle_type(10);
    /// assert!(pool.capacity() >= 10);
    /// ```
    pub fn with_capacity_and_handle_type(capacity: usize) -> Self {
        let pool = Self::with_handle_type();
        pool.raw.reserve(capacity);
        pool
    }

    /// A pool with non-default parameters (this crate's tests and model
    /// checks, through the `testing` feature; not part of the stable API,
    /// and hidden from its docs).
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn with_config(config: Config) -> Self {
        Self::from_config(config)
    }

    fn from_config(config: Config) -> Self {
        HandlePool {
            raw: RawPool::new(config),
            _handle: PhantomData,
        }
    }

    /// Inserts a value and returns its handle.
    ///
    /// Reuses a removed slot when one is past its grace period. If growing
    /// the pool would take it past `4 × len + 1024` slots while removed
    /// slots wait for a guard pinned on another thread (or a `with` running
    /// there), it sleeps for at most 10 ms until they can be reclaimed (see
    /// "Memory under churn" in the [`design`](crate::design) docs). It never
    /// waits while its own thread holds reclamation back.
    ///
    /// # Panics
    /// When every one of the 2^32 - 1 slot indices is in use or retired.
    /// [`try_insert`](Self::try_insert) returns an error instead.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(7);
    /// assert_eq!(pool.get_cloned(h), Some(7));
    /// ```
    #[inline]
    pub fn insert(&self, value: T) -> H {
        H::from_handle(self.raw.insert_or(value, pool_is_full))
    }

    /// Inserts a value, or gives it back if the pool is full.
    ///
    /// # Errors
    /// [`CapacityError`] holding the value when no slot index is left.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
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

    /// Inserts the value `f` makes from its own handle, so an object can
    /// know its handle.
    ///
    /// If `f` panics, nothing is inserted and the handle it was shown stays
    /// stale forever.
    ///
    /// # Panics
    /// When the pool is full, as [`insert`](Self::insert); and if `f` panics.
    ///
    /// ```
    /// use handle_pool::{Handle, HandlePool};
    /// let pool: HandlePool<(Handle, &str)> = HandlePool::new();
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
            _ => panic!("HandlePool::insert_with: the pool is full (all 2^32 - 1 slot indices are in use or retired)"),
        }
    }

    /// Inserts the value `f` makes from its own handle, or gives `f` back,
    /// not called, if the pool is full: [`insert_with`](Self::insert_with)
    /// as [`try_insert`](Self::try_insert) is to [`insert`](Self::insert).
    ///
    /// If `f` panics, nothing is inserted and the handle it was shown stays
    /// stale forever.
    ///
    /// # Errors
    /// [`CapacityError`] holding `f` when no slot index is left.
    ///
    /// # Panics
    /// If `f` panics.
    ///
    /// ```
    /// use handle_pool::{Handle, HandlePool};
    /// let pool: HandlePool<(Handle, u32)> = HandlePool::new();
    /// match pool.try_insert_with(|me| (me, 7)) {
    ///     Ok(h) => assert_eq!(pool.with(h, |v| v.0), Some(h)),
    ///     Err(full) => drop(full.into_inner()), // the closure, never called
    /// }
    /// ```
    pub fn try_insert_with<F: FnOnce(H) -> T>(&self, f: F) -> Result<H, CapacityError<F>> {
        // `f` stays here until the raw pool has a slot for it: if it has
        // none, it calls nothing and `f` is given back.
        let mut pending = Some(f);
        let mut shown = None;
        let made = self.raw.insert_with(|handle| {
            let handle = *shown.insert(H::from_handle(handle));
            let f = pending.take().expect("the raw pool calls the closure once");
            f(handle)
        });
        match (made, shown, pending) {
            (Some(_), Some(handle), _) => Ok(handle),
            (_, _, Some(f)) => Err(CapacityError(f)),
            _ => unreachable!("the closure ran, so the value was inserted"),
        }
    }

    /// Inserts many values at once and returns their handles, in order.
    ///
    /// Slots are claimed in runs: reusable ones off the free list, one CAS
    /// per run, else a block of consecutive fresh indices, one atomic step
    /// per block. A run is as long as the iterator's `size_hint` says is
    /// left, but never longer than what the iterator has already produced
    /// (64 at first): an iterator whose hint lies costs at most that many
    /// slots ahead, and every slot claimed and not filled is given back,
    /// also when the iterator panics. See
    /// [`insert_many_into`](Self::insert_many_into) to reuse a buffer.
    ///
    /// # Panics
    /// When the pool is full, as [`insert`](Self::insert); the values
    /// inserted before that stay in the pool. If the iterator panics, the
    /// values it produced before stay in the pool.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let handles = pool.insert_many(0..100);
    /// assert_eq!(handles.len(), 100);
    /// // A fresh pool has nothing to reuse: fresh blocks, consecutive here.
    /// assert!(handles.windows(2).all(|w| w[1].index() == w[0].index() + 1));
    /// assert_eq!(pool.get_cloned(handles[42]), Some(42));
    /// ```
    pub fn insert_many(&self, values: impl IntoIterator<Item = T>) -> Vec<H> {
        let mut handles = Vec::new();
        self.insert_many_into(values, &mut handles);
        handles
    }

    /// Inserts many values at once, appending their handles to `handles`.
    /// Otherwise the same as [`insert_many`](Self::insert_many).
    ///
    /// # Panics
    /// When the pool is full, or the iterator panics; the values inserted
    /// before that stay in the pool and their handles are in `handles`.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let mut handles = Vec::with_capacity(64);
    /// for frame in 0..3 {
    ///     handles.clear();
    ///     pool.insert_many_into((0..64).map(|i| (frame, i)), &mut handles);
    ///     assert_eq!(handles.len(), 64);
    /// }
    /// assert_eq!(pool.len(), 192);
    /// ```
    pub fn insert_many_into(&self, values: impl IntoIterator<Item = T>, handles: &mut Vec<H>) {
        if self.raw.insert_many(values, handles).is_err() {
            panic!("HandlePool::insert_many: the pool is full (all 2^32 - 1 slot indices are in use or retired)");
        }
    }

    /// Inserts every value as a batch, keeping no handles (`Extend`,
    /// `FromIterator`).
    pub(crate) fn insert_all(&self, values: impl IntoIterator<Item = T>) {
        if self.raw.insert_many(values, &mut ()).is_err() {
            panic!("HandlePool: extending a full pool (all 2^32 - 1 slot indices are in use or retired)");
        }
    }

    /// Whether `handle` refers to a value in the pool right now.
    ///
    /// Wait-free and needs no guard: it only loads the slot word. A `true`
    /// orders the calling thread after the insert, as a `get` that finds
    /// the value does.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
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
    /// Wait-free: one or two loads, no write to shared memory. The reference
    /// lives as long as both the borrow of the pool and the guard; a value
    /// removed meanwhile is not dropped, nor its slot reused, until the guard
    /// is dropped.
    /// The guard comes from [`pin()`](crate::pin), so it always holds
    /// reclamation off: nothing is checked at run time.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
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
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
    /// let h = pool.insert(1);
    /// let r = {
    ///     let guard = pin();
    ///     pool.get(h, &guard).unwrap()
    /// };
    /// println!("{r}");
    /// ```
    ///
    /// nor its pool:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool};
    /// let guard = pin();
    /// let r = {
    ///     let pool = HandlePool::new();
    ///     let h = pool.insert(1);
    ///     pool.get(h, &guard).unwrap()
    /// };
    /// println!("{r}");
    /// ```
    #[inline]
    pub fn get<'g>(&'g self, handle: H, guard: &'g Guard) -> Option<&'g T> {
        self.raw.get(handle.handle(), guard)
    }

    /// A [`Reader`] for many lookups: the answers of [`get`](Self::get)
    /// and [`contains`](Self::contains), under a guard the reader pins and
    /// owns, with the pool's storage read once instead of per lookup, for
    /// a hot loop.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let handles: Vec<_> = (0..100).map(|i| pool.insert(i)).collect();
    /// let reader = pool.reader();
    /// assert_eq!(handles.iter().filter_map(|&h| reader.get(h)).sum::<i32>(), 4950);
    /// ```
    #[inline]
    pub fn reader(&self) -> Reader<'_, T, H> {
        Reader::new(&self.raw)
    }

    /// Calls `f` with the value `handle` refers to.
    ///
    /// Wait-free, and cheaper than a pin: the read is protected by a word
    /// of the calling thread's own in the pool, and one fence. A value
    /// removed meanwhile is not dropped, nor its slot reused, until `f`
    /// returns; while `f` runs, the values removed after the call began
    /// wait for it, as they would for a guard held as long. Calls nest, and
    /// `f` may call any method of the pool. (A thread numbered past the
    /// pool's stripe count pins instead.)
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
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
    /// let pool = handle_pool::HandlePool::new();
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

    /// Number of values in the pool.
    ///
    /// Exact when no operation is in flight. Under concurrency it is a sum
    /// of per-thread-group counts read one after another, so it may lag behind
    /// (or briefly run ahead of) the operations in progress.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// assert_eq!(pool.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether [`len`](Self::len) is 0.
    ///
    /// ```
    /// let pool: handle_pool::HandlePool<u8> = handle_pool::HandlePool::new();
    /// assert!(pool.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Allocates room for at least `additional` slots past those handed
    /// out so far: afterwards `capacity() >= slots_used() + additional`, up
    /// to the pool's limit of `MAX_INDEX + 1` slots. Inserts use that room
    /// before they allocate (they reserve fresh slots a few at a time, so
    /// with many threads inserting a little more may be allocated). Takes
    /// `&self`: other threads may insert meanwhile, into the same room.
    ///
    /// As for `Vec::reserve`, the memory is the caller's to ask for: a
    /// request the system cannot meet aborts the process.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// pool.reserve(1000);
    /// assert!(pool.capacity() >= pool.slots_used() + 1000);
    /// ```
    pub fn reserve(&self, additional: usize) {
        let used = self.raw.slots_used() as usize;
        self.raw.reserve(used.saturating_add(additional));
    }

    /// Number of slots allocated (committed in the flat region or in
    /// buckets): live, free, awaiting reclamation and retired.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// assert!(pool.capacity() >= 1);
    /// ```
    pub fn capacity(&self) -> usize {
        self.raw.capacity()
    }

    /// Number of slots ever handed out (live, free, awaiting reclamation or
    /// retired). A diagnostic for how far reuse keeps up with removal.
    ///
    /// At most [`capacity`](Self::capacity) when no insert is running: an
    /// insert takes fresh indices before it allocates their slots, so
    /// meanwhile another thread may read a count a few slots past the
    /// capacity.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// assert!(pool.slots_used() >= 1 && pool.slots_used() <= pool.capacity());
    /// ```
    pub fn slots_used(&self) -> usize {
        self.raw.slots_used() as usize
    }

    /// Iterates over `(handle, &value)` for the values in the pool.
    ///
    /// Under concurrency every item yielded was in the pool at the moment its
    /// slot was visited; a value inserted or removed during the iteration may
    /// or may not be yielded. Slots are visited in index order, once each.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
    /// pool.insert(1);
    /// pool.insert(2);
    /// let guard = pin();
    /// let sum: i32 = pool.iter(&guard).map(|(_, v)| v).sum();
    /// assert_eq!(sum, 3);
    /// ```
    pub fn iter<'g>(&'g self, guard: &'g Guard) -> Iter<'g, T, H> {
        Iter::new(self.raw.entries(guard))
    }

    /// Iterates over the handles of the values in the pool, with the same
    /// guarantees as [`iter`](Self::iter): each handle yielded was live when
    /// its slot was visited.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
    /// let a = pool.insert(1);
    /// let b = pool.insert(2);
    /// let guard = pin();
    /// let mut keys: Vec<_> = pool.keys(&guard).collect();
    /// keys.sort();
    /// assert_eq!(keys, [a, b]);
    /// ```
    pub fn keys<'g>(&'g self, guard: &'g Guard) -> Keys<'g, T, H> {
        Keys::new(self.iter(guard))
    }

    /// Iterates over `&value` for the values in the pool, with the same
    /// guarantees as [`iter`](Self::iter).
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool};
    /// let pool: HandlePool<u32> = (1..=4).collect();
    /// let guard = pin();
    /// assert_eq!(pool.values(&guard).sum::<u32>(), 10);
    /// ```
    ///
    /// A value cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool};
    /// let pool: HandlePool<u32> = (1..=4).collect();
    /// let max = {
    ///     let guard = pin();
    ///     pool.values(&guard).max()
    /// };
    /// println!("{max:?}");
    /// ```
    pub fn values<'g>(&'g self, guard: &'g Guard) -> Values<'g, T, H> {
        Values::new(self.iter(guard))
    }

    /// The raw pool (for `serde_impl`, `par` and the loom models).
    #[cfg(any(feature = "serde", feature = "rayon", all(test, handle_pool_loom)))]
    pub(crate) fn raw(&self) -> &RawPool<T> {
        &self.raw
    }

    /// The raw pool, mutably.
    #[cfg(any(feature = "serde", feature = "rayon"))]
    pub(crate) fn raw_mut(&mut self) -> &mut RawPool<T> {
        &mut self.raw
    }

    /// The raw pool, owned (for `IntoIter`).
    pub(crate) fn into_raw(self) -> RawPool<T> {
        self.raw
    }
}

/// [`HandlePool::insert`]'s panic, out of line and cold: the inlined insert
/// carries no panic or formatting code, and its success path is laid out
/// straight through.
#[cold]
#[inline(never)]
fn pool_is_full() -> ! {
    panic!("HandlePool::insert: the pool is full (all 2^32 - 1 slot indices are in use or retired)")
}

/// A batch insert's handles, typed.
impl<H: PoolHandle> HandleSink for Vec<H> {
    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    fn push(&mut self, handle: Handle) {
        Vec::push(self, H::from_handle(handle));
    }
}

impl<T, H: PoolHandle> Default for HandlePool<T, H> {
    fn default() -> Self {
        Self::with_handle_type()
    }
}

impl<T: Clone, H: PoolHandle> Clone for HandlePool<T, H> {
    /// A separate pool in which every handle means what it meant here: each
    /// live handle resolves to a clone of its value, each stale handle stays
    /// stale for good (a retired slot stays retired), and inserts into
    /// either pool never touch the other. New inserts may be given other
    /// handles in the clone than here.
    ///
    /// Under concurrency each slot is read once, and the clone holds the
    /// state the slot had at that moment: a handle removed before the call
    /// began never resolves in the clone; one inserted or removed during
    /// the call may or may not, and one that does not may later name
    /// another value in the clone, as a handle from after the call may. Each
    /// value is cloned under a guard, repinned every few dozen slots, so
    /// reclamation waits for a few values' clones at a time, not for the
    /// whole call; a value's `clone` may use this pool. If one panics, the
    /// clones made so far are dropped and this pool is unchanged.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let kept = pool.insert("kept");
    /// let gone = pool.insert("gone");
    /// pool.remove(gone);
    /// let copy = pool.clone();
    /// assert_eq!(copy.get_cloned(kept), Some("kept"));
    /// assert!(!copy.contains(gone));
    /// copy.remove(kept);
    /// assert!(pool.contains(kept));
    /// ```
    fn clone(&self) -> Self {
        HandlePool {
            raw: self.raw.clone(),
            _handle: PhantomData,
        }
    }
}

impl<T: fmt::Debug, H: PoolHandle> fmt::Debug for HandlePool<T, H> {
    /// Lists the live `(handle, value)` pairs, pinning internally.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = crate::pin();
        f.debug_map().entries(self.iter(&guard)).finish()
    }
}
