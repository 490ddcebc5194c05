//! Iterators over a pool.

use core::iter::FusedIterator;
use core::marker::PhantomData;

use crate::handle::{Handle, PoolHandle};
use crate::pool::take_exclusive;
use crate::shared::Shared;
use crate::slot::{Slot, SlotWord, State};
use crate::storage::Slots;
use crate::sync::Ordering;

/// The next occupied slot from `slots`, with its raw handle.
///
/// The raw handle is what the iterators act on; the typed handle they yield
/// is made from it with `H::from_handle` and never read back, so a
/// `PoolHandle` implementation that does not round-trip cannot steer them.
#[inline]
fn next_occupied<'a, T>(
    slots: &mut Slots<'a, T>,
    order: Ordering,
) -> Option<(Handle, &'a Slot<T>)> {
    for (index, slot) in slots.by_ref() {
        let word = SlotWord::from_bits(slot.word.load(order));
        if word.state() == State::Occupied {
            return Some((Handle::new(index, word.generation()), slot));
        }
    }
    None
}

/// Iterator over `(handle, &value)`, from [`HandlePool::iter`](crate::HandlePool::iter).
///
/// Each item was in the pool at the moment its slot was visited.
///
/// ```
/// let pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// let guard = handle_pool::pin();
/// assert_eq!(pool.iter(&guard).map(|(_, v)| *v as u32).sum::<u32>(), 6);
/// ```
///
/// It hands out `&T`, so it is `Send` and `Sync` exactly when `T: Sync`
/// (like `std::slice::Iter`); an iterator over `Cell`s stays on its thread:
///
/// ```compile_fail
/// use std::cell::Cell;
/// fn assert_send<X: Send>(_: X) {}
/// let pool: handle_pool::HandlePool<Cell<u32>> = handle_pool::HandlePool::new();
/// let guard = handle_pool::pin();
/// assert_send(pool.iter(&guard));
/// ```
pub struct Iter<'g, T, H> {
    slots: Slots<'g, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'g, T, H> Iter<'g, T, H> {
    pub(crate) fn new(shared: &'g Shared<T>) -> Self {
        Iter {
            slots: shared.storage.slots(shared.used_slots()),
            _handle: PhantomData,
        }
    }
}

impl<'g, T, H: PoolHandle> Iterator for Iter<'g, T, H> {
    type Item = (H, &'g T);

    fn next(&mut self) -> Option<Self::Item> {
        // Acquire pairs with the Release store that published each occupant.
        let (handle, slot) = next_occupied(&mut self.slots, Ordering::Acquire)?;
        // SAFETY: the word was OCCUPIED, so the value is initialised; the
        // caller's guard (checked by `HandlePool::iter`, borrowed for 'g) was
        // pinned before the load, so the value outlives 'g even if removed.
        Some((H::from_handle(handle), unsafe { slot.value_ref() }))
    }
}

impl<T, H: PoolHandle> FusedIterator for Iter<'_, T, H> {}

/// Iterator over `(handle, &mut value)`, from [`HandlePool::iter_mut`](crate::HandlePool::iter_mut).
///
/// ```
/// let mut pool: handle_pool::HandlePool<u8> = (1..=3).collect();
/// pool.iter_mut().for_each(|(_, v)| *v *= 2);
/// assert_eq!(pool.into_iter().map(|(_, v)| v as u32).sum::<u32>(), 12);
/// ```
///
/// It hands out `&mut T`, so it is `Send` when `T: Send` and `Sync` when
/// `T: Sync` (like `std::slice::IterMut`); an iterator over `Rc`s stays on
/// its thread:
///
/// ```compile_fail
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut pool: handle_pool::HandlePool<Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool.iter_mut());
/// ```
pub struct IterMut<'a, T, H> {
    slots: Slots<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T, H> IterMut<'a, T, H> {
    pub(crate) fn new(shared: &'a Shared<T>) -> Self {
        IterMut {
            slots: shared.storage.slots(shared.used_slots()),
            _handle: PhantomData,
        }
    }
}

impl<'a, T, H: PoolHandle> Iterator for IterMut<'a, T, H> {
    type Item = (H, &'a mut T);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, slot) = next_occupied(&mut self.slots, Ordering::Relaxed)?;
        // SAFETY: OCCUPIED means initialised; the iterator borrows the pool
        // mutably for 'a and visits each slot once, so the references are
        // unique.
        Some((H::from_handle(handle), unsafe { slot.value_mut() }))
    }
}

impl<T, H: PoolHandle> FusedIterator for IterMut<'_, T, H> {}

// SAFETY: an `IterMut` is a `&mut` borrow of the pool handing out `&mut T`,
// one per slot: sending it sends those `&mut T`, which needs `T: Send`, as
// for `std::slice::IterMut`. Its own state is a cursor and a shared borrow of
// the storage's bucket pointers, which it only loads.
unsafe impl<T: Send, H> Send for IterMut<'_, T, H> {}

// SAFETY: through `&IterMut` nothing can be reached (`next` needs `&mut`),
// but `Sync` follows `&mut T`'s rule, `T: Sync`, as for `std::slice::IterMut`.
unsafe impl<T: Sync, H> Sync for IterMut<'_, T, H> {}

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
/// ```compile_fail
/// use std::rc::Rc;
/// fn assert_send<X: Send>(_: X) {}
/// let mut pool: handle_pool::HandlePool<Rc<u32>> = handle_pool::HandlePool::new();
/// assert_send(pool.drain());
/// ```
pub struct Drain<'a, T, H: PoolHandle> {
    shared: &'a Shared<T>,
    slots: Slots<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T, H: PoolHandle> Drain<'a, T, H> {
    pub(crate) fn new(shared: &'a Shared<T>) -> Self {
        Drain {
            shared,
            slots: shared.storage.slots(shared.used_slots()),
            _handle: PhantomData,
        }
    }
}

impl<T, H: PoolHandle> Iterator for Drain<'_, T, H> {
    type Item = (H, T);

    fn next(&mut self) -> Option<Self::Item> {
        let (handle, _) = next_occupied(&mut self.slots, Ordering::Relaxed)?;
        // SAFETY: the slot is OCCUPIED and the drain borrows the pool mutably.
        let value = unsafe { take_exclusive(self.shared, handle.index()) };
        Some((H::from_handle(handle), value))
    }
}

impl<T, H: PoolHandle> FusedIterator for Drain<'_, T, H> {}

// SAFETY: a `Drain` borrows the pool mutably and moves values out of it:
// sending it sends those values, which needs `T: Send` (as for
// `std::vec::Drain`). What else it touches, the slot words and a stripe's
// free list, are atomics the pool shares between threads anyway.
unsafe impl<T: Send, H: PoolHandle> Send for Drain<'_, T, H> {}

// SAFETY: `&Drain` reaches nothing (`next` needs `&mut`); `Sync` follows
// `T: Sync`, as for `std::vec::Drain`.
unsafe impl<T: Sync, H: PoolHandle> Sync for Drain<'_, T, H> {}

impl<T, H: PoolHandle> Drop for Drain<'_, T, H> {
    fn drop(&mut self) {
        self.for_each(drop);
    }
}
