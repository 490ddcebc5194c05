//! The public pool: typed handles, guards and the operations on top of `shared`.

use core::fmt;
use core::marker::PhantomData;

use crossbeam_epoch::Guard;

use crate::config::Config;
use crate::error::CapacityError;
use crate::handle::{Handle, PoolHandle};
use crate::iter::{Drain, Iter, IterMut};
use crate::reclaim::{self, defer_batch, propagate, reclaim_now};
use crate::shared::{Acquired, Claimed, Shared};
use crate::slot::{Slot, SlotWord, State};
use crate::sync::{Arc, Ordering};

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
/// ```compile_fail
/// fn assert_sync<X: Sync>(_: &X) {}
/// let pool: handle_pool::HandlePool<std::cell::Cell<u32>> = handle_pool::HandlePool::new();
/// assert_sync(&pool);
/// ```
///
/// and a pool of `Rc`s cannot even be sent:
///
/// ```compile_fail
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<std::rc::Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool);
/// ```
pub struct HandlePool<T, H = Handle> {
    shared: Arc<Shared<T>>,
    _handle: PhantomData<fn(H) -> H>,
}

// SAFETY: moving the pool moves the ownership of its values, and values are
// also dropped by deferred reclamation on whatever thread runs the collector:
// both need only `T: Send`. The handle type is a plain `Copy` value.
unsafe impl<T: Send, H> Send for HandlePool<T, H> {}

// SAFETY: through `&HandlePool` threads share `&T` (from `get`, `with`, `iter`),
// which needs `T: Sync`, and insert or remove values on any thread, which
// moves them between threads and needs `T: Send`.
unsafe impl<T: Send + Sync, H> Sync for HandlePool<T, H> {}

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
        Self::with_config(Config::default())
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
        let end = capacity.min(pool.shared.config.max_slots as usize) as u32;
        pool.shared.storage.ensure(0, end);
        pool
    }

    /// A pool with non-default parameters (tests and model checks).
    #[doc(hidden)]
    pub fn with_config(config: Config) -> Self {
        HandlePool {
            shared: Arc::new(Shared::new(config)),
            _handle: PhantomData,
        }
    }

    /// Inserts a value and returns its handle.
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
    pub fn insert(&self, value: T) -> H {
        match self.try_insert(value) {
            Ok(handle) => handle,
            Err(_) => panic!("HandlePool::insert: the pool is full (all 2^32 - 1 slot indices are in use or retired)"),
        }
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
    pub fn try_insert(&self, value: T) -> Result<H, CapacityError<T>> {
        let Some(acquired) = self.shared.acquire(self.shared.home()) else {
            return Err(CapacityError(value));
        };
        Ok(H::from_handle(publish(acquired, value)))
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
        let home = self.shared.home();
        let Some(acquired) = self.shared.acquire(home) else {
            panic!("HandlePool::insert_with: the pool is full (all 2^32 - 1 slot indices are in use or retired)");
        };
        let (index, generation) = (acquired.index, acquired.generation);
        // If anything below unwinds (`H::from_handle` or `f`, both user
        // code), burn the generation `f` may have seen and give the slot back.
        struct GiveBack<'a, T> {
            shared: &'a Shared<T>,
            home: usize,
            index: u32,
            generation: u32,
        }
        impl<T> Drop for GiveBack<'_, T> {
            fn drop(&mut self) {
                let max = self.shared.config.max_generation;
                let word = SlotWord::vacated(self.generation, crate::slot::NIL, max);
                self.shared.release(self.home, self.index, word);
            }
        }
        let give_back = GiveBack {
            shared: &self.shared,
            home,
            index,
            generation,
        };
        let handle = H::from_handle(Handle::new(index, generation));
        let value = f(handle);
        core::mem::forget(give_back);
        publish(acquired, value);
        // The handle `f` was shown, not a second `from_handle`.
        handle
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
        /// The first run's length limit, before the iterator has produced anything.
        const FIRST_RUN: usize = 64;
        let shared = &*self.shared;
        let home = shared.home();
        let mut values = values.into_iter();
        // Dropped on every exit, unwinding included: gives back what is left.
        let mut claimed = None;
        let mut inserted = 0usize;
        while let Some(value) = values.next() {
            let slot = match claimed.as_mut().and_then(Claimed::take) {
                Some(slot) => slot,
                None => {
                    // `value` is one more than the hint's count of what is left.
                    let left = values.size_hint().0.saturating_add(1);
                    let want = left.min(inserted.max(FIRST_RUN)).min(u32::MAX as usize);
                    let mut run = shared.claim(home, want as u32).unwrap_or_else(|| {
                        panic!("HandlePool::insert_many: the pool is full (all 2^32 - 1 slot indices are in use or retired)")
                    });
                    handles.reserve(want);
                    let slot = run.take().expect("a claim holds at least one slot");
                    claimed = Some(run);
                    slot
                }
            };
            handles.push(H::from_handle(publish(slot, value)));
            inserted += 1;
        }
    }

    /// Whether `handle` refers to a value in the pool right now.
    ///
    /// Wait-free and needs no guard: it only loads the slot word.
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
        let h = handle.handle();
        self.shared
            .occupied_slot(h.index(), h.generation())
            .is_some()
    }

    /// The value `handle` refers to, if it is still in the pool.
    ///
    /// Wait-free: one or two loads, no write to shared memory. The reference
    /// lives as long as both the borrow of the pool and the guard; a value
    /// removed meanwhile is not dropped, nor its slot reused, until the guard
    /// is dropped.
    ///
    /// # Panics
    /// If `guard` is not a pinned guard of the default collector (from
    /// [`pin()`](crate::pin)): an unprotected guard or one of another collector
    /// would not hold off reclamation.
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
    /// ```compile_fail
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
    /// ```compile_fail
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
        check_guard(&self.shared, guard);
        let h = handle.handle();
        let slot = self.shared.occupied_slot(h.index(), h.generation())?;
        // SAFETY: the word was OCCUPIED(g), so the value is initialised (the
        // Acquire load saw its publication). The guard was pinned before that
        // load, so even if the value is removed now, its reclamation is
        // deferred until the guard is dropped, and the storage lives as long
        // as `&'g self`: the reference is valid for 'g.
        Some(unsafe { slot.value_ref() })
    }

    /// Calls `f` with the value `handle` refers to, pinning internally.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(vec![1, 2, 3]);
    /// assert_eq!(pool.with(h, |v| v.len()), Some(3));
    /// ```
    #[inline]
    pub fn with<R>(&self, handle: H, f: impl FnOnce(&T) -> R) -> Option<R> {
        let guard = crossbeam_epoch::pin();
        self.get(handle, &guard).map(f)
    }

    /// A clone of the value `handle` refers to, pinning internally.
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
    /// Exact when no operation is in flight. Under concurrency it is the sum
    /// of per-stripe counters read one after another, so it may lag behind
    /// (or briefly run ahead of) the operations in progress.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// assert_eq!(pool.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.shared.len()
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

    /// Number of slots allocated: live, free, awaiting reclamation and retired.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// assert!(pool.capacity() >= 1);
    /// ```
    pub fn capacity(&self) -> usize {
        self.shared.storage.capacity()
    }

    /// Number of slots ever handed out (live, free, awaiting reclamation or
    /// retired); at most [`capacity`](Self::capacity). A diagnostic for how
    /// far reuse keeps up with removal.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// pool.insert(1);
    /// assert!(pool.slots_used() >= 1 && pool.slots_used() <= pool.capacity());
    /// ```
    pub fn slots_used(&self) -> usize {
        self.shared.used_slots() as usize
    }

    /// Iterates over `(handle, &value)` for the values in the pool.
    ///
    /// Under concurrency every item yielded was in the pool at the moment its
    /// slot was visited; a value inserted or removed during the iteration may
    /// or may not be yielded. Slots are visited in index order, once each.
    ///
    /// # Panics
    /// As [`get`](Self::get), for a guard that is not pinned by [`pin()`](crate::pin).
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
        check_guard(&self.shared, guard);
        Iter::new(&self.shared)
    }

    /// The value `handle` refers to, mutably. No epoch cost.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(1);
    /// *pool.get_mut(h).unwrap() += 1;
    /// assert_eq!(pool.get_cloned(h), Some(2));
    /// ```
    pub fn get_mut(&mut self, handle: H) -> Option<&mut T> {
        let h = handle.handle();
        let slot = self.shared.occupied_slot(h.index(), h.generation())?;
        // SAFETY: OCCUPIED means initialised; `&mut self` excludes every
        // other access to the pool for the returned lifetime.
        Some(unsafe { slot.value_mut() })
    }

    /// Removes the value `handle` refers to and returns it. No epoch cost.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(String::from("mine"));
    /// assert_eq!(pool.take(h).as_deref(), Some("mine"));
    /// assert_eq!(pool.take(h), None);
    /// ```
    pub fn take(&mut self, handle: H) -> Option<T> {
        let h = handle.handle();
        self.shared.occupied_slot(h.index(), h.generation())?;
        // SAFETY: we just saw the slot OCCUPIED(g), and `&mut self` means it
        // cannot change.
        Some(unsafe { take_exclusive(&self.shared, h.index()) })
    }

    /// Mutable references to several values at once, or `None` if any
    /// handle is stale or two handles refer to the same value.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let a = pool.insert(1);
    /// let b = pool.insert(2);
    /// let [x, y] = pool.get_disjoint_mut([a, b]).unwrap();
    /// std::mem::swap(x, y);
    /// assert_eq!(pool.get_cloned(a), Some(2));
    /// assert!(pool.get_disjoint_mut([a, a]).is_none());
    /// ```
    pub fn get_disjoint_mut<const N: usize>(&mut self, handles: [H; N]) -> Option<[&mut T; N]> {
        // Each `PoolHandle::handle` is called once and its answer is what we
        // check and use: a second call might answer differently.
        let raw = handles.map(PoolHandle::handle);
        for (i, h) in raw.iter().enumerate() {
            self.shared.occupied_slot(h.index(), h.generation())?;
            if raw[..i].iter().any(|other| other.index() == h.index()) {
                return None;
            }
        }
        Some(raw.map(|h| {
            let slot = self.shared.storage.slot(h.index());
            // SAFETY: every slot was just seen OCCUPIED and `&mut self` keeps
            // it so; the indices are pairwise distinct, so the references
            // do not alias.
            unsafe { slot.value_mut() }
        }))
    }

    /// Gives an empty pool exactly `entries.len()` slots, slot `i` as entry
    /// `i` says: a live value under its generation, or vacant with the
    /// generation of its last occupant (retired if at the limit). Every
    /// entry is checked before anything is written, so on error the values
    /// are still in `entries` and dropped with it, and the pool stays empty.
    ///
    /// Allocates the slots themselves only: at most about `2 * len + 64`.
    ///
    /// # Errors
    /// The first entry [`Shared::check_entry`] rejects.
    ///
    /// # Panics
    /// If the pool has ever handed out a slot.
    #[cfg(feature = "serde")]
    pub(crate) fn restore(
        &mut self,
        entries: Vec<crate::slot::SlotEntry<T>>,
    ) -> Result<(), crate::shared::RestoreError> {
        use crate::slot::SlotEntry;

        let shared = &*self.shared;
        assert_eq!(shared.used_slots(), 0, "restore needs an empty pool");
        for (index, entry) in entries.iter().enumerate() {
            shared.check_entry(index, entry)?;
        }
        // Checked above: every index is below `max_slots`, a `u32`.
        let count = entries.len() as u32;
        if count == 0 {
            return Ok(());
        }
        let Some((0, reserved)) = shared.reserve_fresh(count) else {
            unreachable!("an empty pool reserves from slot 0");
        };
        debug_assert_eq!(reserved, count);
        let max_generation = shared.config.max_generation;
        let mut live = 0isize;
        // FREE slots, linked in index order: built back to front.
        let mut free: Option<crate::free_list::Chain> = None;
        for (index, entry) in entries.into_iter().enumerate().rev() {
            let index = index as u32;
            let slot = shared.storage.slot(index);
            match entry {
                SlotEntry::Live(generation, value) => {
                    // SAFETY: `&mut self` is exclusive and the slot was just
                    // reserved fresh: it holds no value and no one else sees it.
                    unsafe { slot.write_value(value) };
                    // Relaxed: whoever gets this pool gets it through `&mut`
                    // or a move, which orders these writes before their reads.
                    slot.word
                        .store(SlotWord::occupied(generation).to_bits(), Ordering::Relaxed);
                    live += 1;
                }
                SlotEntry::Vacant(generation) => {
                    let next = free.map_or(crate::slot::NIL, |chain| chain.first);
                    let word = SlotWord::vacated(generation, next, max_generation);
                    slot.word.store(word.to_bits(), Ordering::Relaxed);
                    if word.state() == State::Free {
                        free = Some(crate::free_list::Chain {
                            first: index,
                            last: free.map_or(index, |chain| chain.last),
                        });
                    }
                }
            }
        }
        let home = shared.home();
        if let Some(chain) = free {
            shared.stripes[home].push_chain(&shared.storage, chain);
        }
        // The length counts pops; the live values came without any.
        shared.stripes[home].adjust_len(live);
        Ok(())
    }

    /// The shared state (for the iterators).
    pub(crate) fn shared(&self) -> &Shared<T> {
        &self.shared
    }

    /// Slots handed out so far (for the iterators).
    pub(crate) fn used_slots(&self) -> u64 {
        self.shared.used_slots()
    }

    /// Iterates over `(handle, &mut value)`. No epoch cost.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(1);
    /// for (_, v) in pool.iter_mut() { *v *= 10; }
    /// assert_eq!(pool.get_cloned(h), Some(10));
    /// ```
    pub fn iter_mut(&mut self) -> IterMut<'_, T, H> {
        IterMut::new(&self.shared)
    }

    /// Keeps only the values for which `keep` returns `true`.
    ///
    /// # Panics
    /// If `keep` panics, the pool stays consistent: values already visited
    /// are kept or removed as decided, the rest are kept.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// for i in 0..10 { pool.insert(i); }
    /// pool.retain(|_, v| *v % 2 == 0);
    /// assert_eq!(pool.len(), 5);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(H, &mut T) -> bool) {
        let shared = &*self.shared;
        for (index, slot) in shared.storage.slots(shared.used_slots()) {
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            if word.state() != State::Occupied {
                continue;
            }
            let handle = H::from_handle(Handle::new(index, word.generation()));
            // SAFETY: OCCUPIED means initialised; `&mut self` is exclusive.
            if !keep(handle, unsafe { slot.value_mut() }) {
                // SAFETY: the slot is OCCUPIED and we hold `&mut self`.
                drop(unsafe { take_exclusive(shared, index) });
            }
        }
    }

    /// Removes every value, returning `(handle, value)` pairs. Every old
    /// handle is stale afterwards, whether or not the iterator is consumed.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(5);
    /// let all: Vec<_> = pool.drain().collect();
    /// assert_eq!(all, vec![(h, 5)]);
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// ```
    pub fn drain(&mut self) -> Drain<'_, T, H> {
        Drain::new(&self.shared)
    }

    /// Removes every value; every old handle becomes stale. Pending
    /// reclamations are completed too (see [`reclaim`](Self::reclaim)).
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(5);
    /// pool.clear();
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// ```
    pub fn clear(&mut self) {
        self.drain().for_each(drop);
        self.reclaim();
    }

    /// Drops, now, every removed value whose deferred reclamation has not
    /// run yet. `&mut self` proves no reader holds a reference, so there is
    /// nothing to wait for. Every such slot becomes reusable at once; a
    /// batch the epoch collector releases later is recognised as already
    /// reclaimed (by its era) and discarded.
    ///
    /// Costs O(capacity).
    ///
    /// # Panics
    /// If a value's `Drop` panics: after every pending value was dropped.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let value = Arc::new(());
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(Arc::clone(&value));
    /// pool.remove(h);
    /// pool.reclaim();
    /// assert_eq!(Arc::strong_count(&value), 1);
    /// ```
    pub fn reclaim(&mut self) {
        propagate(reclaim_now(&self.shared, false));
    }
}

impl<T: Send + 'static, H: PoolHandle> HandlePool<T, H> {
    /// Removes the value `handle` refers to. Returns `false` if it was not
    /// in the pool (stale, forged, or removed by another thread first).
    ///
    /// The handle is stale from this moment on. The value is dropped, and the
    /// slot made reusable, once no guard pinned before the removal is left
    /// (in batches; see [`reclaim`](Self::reclaim) to force it).
    /// Wait-free on the slot: one CAS decides between racing removers.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(1);
    /// assert!(pool.remove(h));
    /// assert!(!pool.remove(h));
    /// ```
    pub fn remove(&self, handle: H) -> bool {
        let h = handle.handle();
        let (index, generation) = (h.index(), h.generation());
        let Some(slot) = self.shared.storage.get(index) else {
            return false;
        };
        let expected = SlotWord::occupied(generation).to_bits();
        // A plain load first: a stale handle costs no write to the line.
        if slot.word.load(Ordering::Relaxed) != expected {
            return false;
        }
        let home = self.shared.home();
        let stripe = &self.shared.stripes[home];
        let current = stripe.retiring_head();
        if !slot.try_retire(generation, crate::free_list::retiring_link(current)) {
            return false;
        }
        let batch = self.shared.config.batch;
        if let Some(full) = stripe.push_retiring(&slot.word, generation, index, 1, current, batch) {
            defer_batch(&self.shared, home, full);
        }
        true
    }

    /// Removes every value the handles refer to and returns how many were
    /// removed. Stale, forged and repeated handles are skipped.
    ///
    /// Each removal is one CAS on its slot, as in [`remove`](Self::remove),
    /// but the removed slots are retired together: one push onto the
    /// stripe's retirement batch for the whole call (a call that fills the
    /// batch hands it to the collector as one deferred reclamation).
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let handles = pool.insert_many(0..10);
    /// assert_eq!(pool.remove_many(&handles[..4]), 4);
    /// assert_eq!(pool.remove_many(&handles), 6); // the first four are stale now
    /// assert!(pool.is_empty());
    /// ```
    pub fn remove_many(&self, handles: &[H]) -> usize {
        let shared = &*self.shared;
        // Joins the stripe's batch when dropped, also if a `handle()` call
        // (user code) panics part-way: no retired slot is left outside a batch.
        let mut chain = RetiringChain {
            shared: &self.shared,
            home: shared.home(),
            head: crate::slot::NIL,
            tail: None,
            count: 0,
        };
        for handle in handles {
            let h = handle.handle();
            let Some(slot) = shared.storage.get(h.index()) else {
                continue;
            };
            let expected = SlotWord::occupied(h.generation()).to_bits();
            if slot.word.load(Ordering::Relaxed) != expected {
                continue;
            }
            if slot.try_retire(h.generation(), chain.head) {
                chain.head = h.index();
                chain.tail.get_or_insert((slot, h.generation()));
                chain.count += 1;
            }
        }
        chain.count as usize
    }
}

/// Slots `remove_many` has moved to `RETIRING`, linked `head` → … → tail.
struct RetiringChain<'a, T: Send + 'static> {
    shared: &'a Arc<Shared<T>>,
    home: usize,
    head: u32,
    tail: Option<(&'a Slot<T>, u32)>,
    count: u32,
}

impl<T: Send + 'static> Drop for RetiringChain<'_, T> {
    fn drop(&mut self) {
        let Some((tail, tail_generation)) = self.tail else {
            return;
        };
        // One push for the whole chain: it joins the stripe's batch, or fills
        // it and goes to the collector with it.
        let stripe = &self.shared.stripes[self.home];
        let current = stripe.retiring_head();
        tail.word.store(
            SlotWord::retiring(tail_generation, crate::free_list::retiring_link(current)).to_bits(),
            Ordering::Relaxed,
        );
        let batch = self.shared.config.batch;
        if let Some(full) = stripe.push_retiring(
            &tail.word,
            tail_generation,
            self.head,
            self.count,
            current,
            batch,
        ) {
            defer_batch(self.shared, self.home, full);
        }
    }
}

/// Writes the value into a slot `acquire` gave us and makes it visible.
#[inline]
fn publish<T>(acquired: Acquired<'_, T>, value: T) -> Handle {
    let Acquired {
        index,
        slot,
        generation,
    } = acquired;
    // SAFETY: `acquire` popped the slot off a free list, so this thread owns
    // it: it is FREE, holds no value, and no reader dereferences it until the
    // word below says OCCUPIED.
    unsafe { slot.write_value(value) };
    // Release pairs with the Acquire load in `Shared::occupied_slot` (and
    // with `remove`'s CAS): the value is written before the handle resolves.
    slot.word
        .store(SlotWord::occupied(generation).to_bits(), Ordering::Release);
    Handle::new(index, generation)
}

/// Moves the value out of an OCCUPIED slot under `&mut` and frees the slot.
///
/// # Safety
/// Slot `index` is OCCUPIED and the caller has exclusive access to the pool.
pub(crate) unsafe fn take_exclusive<T>(shared: &Shared<T>, index: u32) -> T {
    let slot = shared.storage.slot(index);
    let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
    // SAFETY: the caller guarantees OCCUPIED (initialised) and exclusivity.
    let value = unsafe { slot.take_value() };
    let home = shared.home();
    let vacant = SlotWord::vacated(
        word.generation(),
        crate::slot::NIL,
        shared.config.max_generation,
    );
    shared.release(home, index, vacant);
    value
}

/// Panics unless `guard` pins the default collector, the one reclamation
/// defers on.
#[inline]
fn check_guard<T>(shared: &Shared<T>, guard: &Guard) {
    match guard.collector() {
        Some(collector) if *collector == shared.collector => {}
        Some(_) => panic!(
            "HandlePool: the guard belongs to another epoch collector; pin with handle_pool::pin()"
        ),
        None => panic!(
            "HandlePool: an unprotected guard cannot protect a reference; pin with handle_pool::pin()"
        ),
    }
}

impl<T, H: PoolHandle> Default for HandlePool<T, H> {
    fn default() -> Self {
        Self::with_handle_type()
    }
}

impl<T: fmt::Debug, H: PoolHandle> fmt::Debug for HandlePool<T, H> {
    /// Lists the live `(handle, value)` pairs, pinning internally.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = crossbeam_epoch::pin();
        f.debug_map().entries(self.iter(&guard)).finish()
    }
}

impl<T, H> Drop for HandlePool<T, H> {
    fn drop(&mut self) {
        // Pending and live values alike, in one pass. Pending closures keep
        // the storage alive through their own `Arc`s and find nothing left.
        reclaim::propagate(reclaim_now(&self.shared, true));
    }
}
