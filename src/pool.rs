//! The public pool: typed handles, guards and the operations on top of `shared`.

use core::fmt;
use core::marker::PhantomData;

use crossbeam_epoch::Guard;

use crate::config::Config;
use crate::error::CapacityError;
use crate::handle::{Handle, PoolHandle};
use crate::iter::{Drain, Iter, IterMut};
use crate::reclaim::{self, defer_batch, propagate, reclaim_now};
use crate::shared::{Acquired, Shared};
use crate::slot::{SlotWord, State};
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
        Ok(publish(acquired, value))
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
        let handle = H::from_handle(Handle::new(index, generation));
        // If `f` unwinds, burn the generation it saw and give the slot back.
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
        let value = f(handle);
        core::mem::forget(give_back);
        publish(acquired, value)
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
        check_guard(guard);
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
        check_guard(guard);
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
    /// nothing to wait for. Slots in batches already handed to the epoch
    /// collector become reusable when their closure runs (which then finds
    /// no value left to drop); all others become reusable at once.
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
        propagate(reclaim_now(&self.shared));
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
        let retiring = SlotWord::retiring(generation, crate::free_list::retiring_link(current));
        // Acquire pairs with `publish`'s Release store: we now own the
        // initialised value and hand it on to the reclamation.
        if slot
            .word
            .compare_exchange(
                expected,
                retiring.to_bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false;
        }
        let batch = self.shared.config.batch;
        if let Some(full) = stripe.push_retiring(&slot.word, index, generation, current, batch) {
            defer_batch(&self.shared, home, full);
        }
        true
    }
}

/// Writes the value into a slot `acquire` gave us and makes it visible.
#[inline]
fn publish<T, H: PoolHandle>(acquired: Acquired<'_, T>, value: T) -> H {
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
    H::from_handle(Handle::new(index, generation))
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
fn check_guard(guard: &Guard) {
    match guard.collector() {
        Some(collector) if collector == crossbeam_epoch::default_collector() => {}
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
        let shared = &*self.shared;
        // Pending reclamations first, so the scan below sees only live values.
        let mut first_panic = reclaim_now(shared);
        for (_, slot) in shared.storage.slots(shared.used_slots()) {
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            if word.state() == State::Occupied {
                slot.word.store(
                    SlotWord::free(word.generation(), crate::slot::NIL).to_bits(),
                    Ordering::Relaxed,
                );
                // SAFETY: OCCUPIED means initialised, and `&mut self` in drop
                // is exclusive; the word no longer says OCCUPIED, so no one
                // drops it again.
                let value = unsafe { slot.take_value() };
                if let Err(payload) =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(value)))
                {
                    first_panic.get_or_insert(payload);
                }
            }
        }
        // Pending closures keep the storage alive through their own `Arc`s
        // and find no value left to drop.
        reclaim::propagate(first_panic);
    }
}
