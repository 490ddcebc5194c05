//! The pool's `&mut self` operations: no guard, no handshake, nothing in
//! flight, so they reach every slot at once.

use crate::handle::PoolHandle;
use crate::iter::{Drain, IterMut, ValuesMut};

use super::HandlePool;

impl<T, H: PoolHandle> HandlePool<T, H> {
    /// Iterates over `&mut value`. Needs no guard.
    ///
    /// ```
    /// let mut pool: handle_pool::HandlePool<u32> = (1..=4).collect();
    /// for v in pool.values_mut() { *v *= 10; }
    /// assert_eq!(pool.values_mut().map(|v| *v).sum::<u32>(), 100);
    /// ```
    pub fn values_mut(&mut self) -> ValuesMut<'_, T, H> {
        ValuesMut::new(self.iter_mut())
    }

    /// The value `handle` refers to, mutably. Needs no guard.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(1);
    /// *pool.get_mut(h).unwrap() += 1;
    /// assert_eq!(pool.get_cloned(h), Some(2));
    /// ```
    pub fn get_mut(&mut self, handle: H) -> Option<&mut T> {
        self.raw.get_mut(handle.handle())
    }

    /// Removes the value `handle` refers to and returns it. Needs no guard.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(String::from("mine"));
    /// assert_eq!(pool.take(h).as_deref(), Some("mine"));
    /// assert_eq!(pool.take(h), None);
    /// ```
    pub fn take(&mut self, handle: H) -> Option<T> {
        self.raw.take(handle.handle())
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
        // Each `PoolHandle::handle` is called once and its answer is what is
        // checked and used: a second call might answer differently.
        self.raw.get_disjoint_mut(handles.map(PoolHandle::handle))
    }

    /// Iterates over `(handle, &mut value)`. Needs no guard.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(1);
    /// for (_, v) in pool.iter_mut() { *v *= 10; }
    /// assert_eq!(pool.get_cloned(h), Some(10));
    /// ```
    pub fn iter_mut(&mut self) -> IterMut<'_, T, H> {
        IterMut::new(self.raw.entries_mut())
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
        self.raw
            .retain(|handle, value| keep(H::from_handle(handle), value));
    }

    /// Removes every value, returning `(handle, value)` pairs. Every old
    /// handle is stale once the iterator is dropped, whether or not it was
    /// consumed. If the iterator is leaked instead (`mem::forget`), the
    /// values it had not yielded stay in the pool, their handles valid, as
    /// they were.
    ///
    /// # Panics
    /// When the iterator is dropped, if the `Drop` of a value it had not
    /// yielded panics: after every such value was dropped, with the first
    /// panic (as [`clear`](Self::clear)).
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(5);
    /// let all: Vec<_> = pool.drain().collect();
    /// assert_eq!(all, vec![(h, 5)]);
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// ```
    pub fn drain(&mut self) -> Drain<'_, T, H> {
        Drain::new(self.raw.drain())
    }

    /// Removes every value; every old handle becomes stale. Pending
    /// reclamations are completed too (see [`reclaim`](Self::reclaim)).
    ///
    /// # Panics
    /// If a value's `Drop` panics: after every value was dropped, with the
    /// first panic.
    ///
    /// ```
    /// let mut pool = handle_pool::HandlePool::new();
    /// let h = pool.insert(5);
    /// pool.clear();
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// ```
    pub fn clear(&mut self) {
        // One exclusive pass over live and pending values alike: every value
        // is dropped even if some `Drop` panics, and the first panic is
        // re-raised once the pool is consistent (empty).
        if let Some(panic) = self.raw.reclaim_all(true) {
            std::panic::resume_unwind(panic);
        }
    }

    /// Drops, now, every removed value not reclaimed yet. `&mut self`
    /// proves no reader holds a reference, so there is nothing to wait for.
    /// Every such slot becomes reusable at once, and the sealed batches that
    /// held them are discarded.
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
        if let Some(panic) = self.raw.reclaim_all(false) {
            std::panic::resume_unwind(panic);
        }
    }
}
