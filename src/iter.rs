//! Iterators over a pool.

use core::iter::FusedIterator;
use core::marker::PhantomData;

use crate::handle::{Handle, PoolHandle};
use crate::pool::take_exclusive;
use crate::shared::Shared;
use crate::slot::{Slot, SlotWord, State};
use crate::storage::Slots;
use crate::sync::Ordering;

/// The next occupied slot from `slots`, with its handle.
#[inline]
fn next_occupied<'a, T, H: PoolHandle>(
    slots: &mut Slots<'a, T>,
    order: Ordering,
) -> Option<(H, &'a Slot<T>)> {
    for (index, slot) in slots.by_ref() {
        let word = SlotWord::from_bits(slot.word.load(order));
        if word.state() == State::Occupied {
            return Some((H::from_handle(Handle::new(index, word.generation())), slot));
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
        Some((handle, unsafe { slot.value_ref() }))
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
        Some((handle, unsafe { slot.value_mut() }))
    }
}

impl<T, H: PoolHandle> FusedIterator for IterMut<'_, T, H> {}

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
        let (handle, _) = next_occupied::<T, H>(&mut self.slots, Ordering::Relaxed)?;
        // SAFETY: the slot is OCCUPIED and the drain borrows the pool mutably.
        let value = unsafe { take_exclusive(self.shared, handle.handle().index()) };
        Some((handle, value))
    }
}

impl<T, H: PoolHandle> FusedIterator for Drain<'_, T, H> {}

impl<T, H: PoolHandle> Drop for Drain<'_, T, H> {
    fn drop(&mut self) {
        self.for_each(drop);
    }
}
