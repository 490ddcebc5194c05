//! Removing values through `&self`: the handle is stale at once, the
//! value dropped after every reader that could see it is gone.

use crate::handle::PoolHandle;
use crate::Guard;

use super::HandlePool;

impl<T, H: PoolHandle> HandlePool<T, H> {
    /// Drops every removed value that no guard protects and makes its slot
    /// reusable, now, without `&mut`.
    ///
    /// Seals every partially filled removal batch, and reclaims on this
    /// thread every sealed batch that no reader holds back. A batch is
    /// sealed at the latest during this call, so a value stays if a guard
    /// pinned before its seal, on any thread including this one, is still
    /// alive, or a [`with`](Self::with) call on this pool that began before
    /// it is still running; it goes with a later `flush` or pool operation
    /// once the guard is dropped (the call returned).
    /// [`reclaim`](Self::reclaim) needs `&mut self` and has nothing to wait
    /// for.
    ///
    /// Costs a few microseconds plus the drops, whatever the pool's size.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let value = Arc::new(());
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(Arc::clone(&value));
    /// pool.remove(h);
    /// pool.flush();
    /// assert_eq!(Arc::strong_count(&value), 1);
    /// ```
    pub fn flush(&self) {
        self.raw.flush();
    }

    /// Removes the value `handle` refers to. Returns `false` if it was not
    /// in the pool (stale, forged, or removed by another thread first).
    ///
    /// The handle is stale from this moment on. It returns `bool`, not the
    /// value, because other threads may still be reading the value through
    /// references taken under their guards or in [`with`](Self::with): the
    /// value is dropped, and the slot made reusable, only once no guard
    /// pinned, and no `with` call begun, before its batch was sealed (at or
    /// after the removal) is left. That happens in batches, on whichever thread runs the pool
    /// operation that reclaims the batch (usually a later insert; see
    /// [`reclaim`](Self::reclaim) to force it). To read the value as it
    /// goes, use [`remove_get`](Self::remove_get) (under a guard) or
    /// [`remove_with`](Self::remove_with) (a closure); to own it, use
    /// [`take`](Self::take), which needs `&mut self` and so no grace period.
    ///
    /// Wait-free on the slot: one CAS decides between racing removers.
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(1);
    /// assert!(pool.remove(h));
    /// assert!(!pool.remove(h));
    /// ```
    #[inline]
    pub fn remove(&self, handle: H) -> bool {
        self.raw.remove(handle.handle())
    }

    /// Removes the value `handle` refers to and returns it, readable for as
    /// long as the guard lives: [`remove`](Self::remove) and
    /// [`get`](Self::get) in one step. `None` if it was not in the pool
    /// (stale, forged, or removed by another thread first); of racing
    /// removers, exactly one gets the value.
    ///
    /// The handle is stale at once, as with `remove`. The value is not
    /// moved out, since other threads may still be reading it: it is
    /// dropped by reclamation, as any removed value is, once the guard,
    /// and every other guard pinned before the removal, is gone. To own
    /// it, clone it, or use [`take`](Self::take) (`&mut self`).
    ///
    /// Costs what `remove` costs: one CAS decides.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool};
    ///
    /// let pool = HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let guard = pin();
    /// let value: &String = pool.remove_get(h, &guard).unwrap();
    /// assert!(!pool.contains(h)); // stale at once
    /// assert_eq!(value, "gone"); // still readable: the guard lives
    /// assert_eq!(pool.remove_get(h, &guard), None); // removed once
    /// ```
    ///
    /// The value cannot outlive its guard,
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let value = {
    ///     let guard = pin();
    ///     pool.remove_get(h, &guard).unwrap()
    /// };
    /// println!("{value}");
    /// ```
    ///
    /// which cannot be dropped, nor repinned, while the value is borrowed,
    ///
    /// ```compile_fail,E0505
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let guard = pin();
    /// let value = pool.remove_get(h, &guard).unwrap();
    /// drop(guard);
    /// println!("{value}");
    /// ```
    ///
    /// ```compile_fail,E0502
    /// use handle_pool::{pin, HandlePool};
    /// let pool = HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let mut guard = pin();
    /// let value = pool.remove_get(h, &guard).unwrap();
    /// guard.repin();
    /// println!("{value}");
    /// ```
    ///
    /// nor can the pool be dropped, or used mutably (`clear`, `take`), while
    /// the value is borrowed:
    ///
    /// ```compile_fail,E0505
    /// use handle_pool::{pin, HandlePool};
    /// let guard = pin();
    /// let pool = HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let value = pool.remove_get(h, &guard).unwrap();
    /// drop(pool);
    /// println!("{value}");
    /// ```
    ///
    /// ```compile_fail,E0502
    /// use handle_pool::{pin, HandlePool};
    /// let guard = pin();
    /// let mut pool = HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let value = pool.remove_get(h, &guard).unwrap();
    /// pool.clear();
    /// println!("{value}");
    /// ```
    #[inline]
    pub fn remove_get<'g>(&'g self, handle: H, guard: &'g Guard) -> Option<&'g T> {
        self.raw.remove_get(handle.handle(), guard)
    }

    /// Removes the value `handle` refers to and calls `f` with it:
    /// [`remove`](Self::remove) and [`with`](Self::with) in one step.
    /// `None` if it was not in the pool (stale, forged, or removed by
    /// another thread first, and then `f` is not called); of racing
    /// removers, exactly one gets the value.
    ///
    /// The handle is stale at once, as with `remove`. The value stays
    /// readable until `f` returns, protected as in `with` (no pin needed),
    /// and is then dropped by reclamation, as any removed value is. To own
    /// it, clone it in `f` (`pool.remove_with(h, T::clone)`) or use
    /// [`take`](Self::take) (`&mut self`).
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(vec![1, 2, 3]);
    /// assert_eq!(pool.remove_with(h, |v| v.len()), Some(3));
    /// assert_eq!(pool.remove_with(h, |v| v.len()), None); // removed once
    /// let h = pool.insert(vec![4]);
    /// assert_eq!(pool.remove_with(h, Vec::clone), Some(vec![4]));
    /// ```
    ///
    /// The value cannot leave the closure:
    ///
    /// ```compile_fail,E0521
    /// let pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(String::from("gone"));
    /// let mut kept = None;
    /// pool.remove_with(h, |value| kept = Some(value));
    /// println!("{kept:?}");
    /// ```
    #[inline]
    pub fn remove_with<R>(&self, handle: H, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.raw.remove_with(handle.handle(), f)
    }

    /// Removes every value the handles refer to and returns how many were
    /// removed. Stale, forged and repeated handles are skipped.
    ///
    /// Each removal is one CAS on its slot, as in [`remove`](Self::remove),
    /// but the removed slots join the thread's removal batch together, with
    /// one push for the whole call (a call that fills the batch seals it
    /// whole, as one batch, however many slots it added).
    ///
    /// ```
    /// let pool = handle_pool::HandlePool::new();
    /// let handles = pool.insert_many(0..10);
    /// assert_eq!(pool.remove_many(&handles[..4]), 4);
    /// assert_eq!(pool.remove_many(&handles), 6); // the first four are stale now
    /// assert!(pool.is_empty());
    /// ```
    pub fn remove_many(&self, handles: &[H]) -> usize {
        // One `handle()` call per element, as the removal goes: if one
        // panics, what was removed before it stays removed, in a batch.
        self.raw
            .remove_many(handles.iter().map(|handle| handle.handle()))
    }
}
