//! Cursors: the iterators over occupied slots.

use crate::Guard;

use crate::handle::Handle;
use crate::slot::{drop_catching, keep_first, Slot, SlotWord, State};
use crate::storage::{Slots, Storage};
use crate::sync::Ordering;

use super::RawPool;

/// The occupied slots among those handed out, in index order, each with
/// the raw handle of its occupant, read with one load of `order`.
pub(super) struct Occupied<'a, T> {
    slots: Slots<'a, T>,
    order: Ordering,
}

impl<'a, T> Occupied<'a, T> {
    pub(super) fn new(storage: &'a Storage<T>, end: u64, order: Ordering) -> Self {
        Occupied {
            slots: storage.slots(end),
            order,
        }
    }

    #[cfg(feature = "rayon")]
    /// Splits the slots left in two (see [`Slots::split_off`]): keeps the
    /// lower part, returns the upper one.
    pub(super) fn split_off(&mut self) -> Option<Self> {
        Some(Occupied {
            slots: self.slots.split_off()?,
            order: self.order,
        })
    }

    /// An upper bound on the items left: the slot indices left to visit.
    fn bound(&self) -> usize {
        usize::try_from(self.slots.indices_left()).unwrap_or(usize::MAX)
    }
}

/// How many values an exclusive iterator has left: counted down from the
/// pool's length, exact while the pool is borrowed mutably or owned (no
/// operation in flight); unknown once the range is split.
#[derive(Clone, Copy)]
pub(super) struct Left(Option<usize>);

impl Left {
    fn yielded(&mut self) {
        if let Some(left) = &mut self.0 {
            *left = left.saturating_sub(1);
        }
    }

    fn finished(&mut self) {
        debug_assert!(
            matches!(self.0, None | Some(0)),
            "handle-pool bug: the length disagrees with the occupied slots"
        );
        self.0 = Some(0);
    }

    fn size_hint(&self, bound: usize) -> (usize, Option<usize>) {
        match self.0 {
            Some(left) => (left, Some(left)),
            None => (0, Some(bound)),
        }
    }
}

/// The handle of `slot`'s occupant, from one load of its word with
/// `order`, if it is `OCCUPIED`.
#[inline(always)]
fn occupant<T>(order: Ordering, index: u32, slot: &Slot<T>) -> Option<(Handle, &Slot<T>)> {
    let word = SlotWord::from_bits(slot.word.load(order));
    (word.state() == State::Occupied).then(|| (Handle::new(index, word.generation()), slot))
}

impl<'a, T> Iterator for Occupied<'a, T> {
    type Item = (Handle, &'a Slot<T>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let order = self.order;
        self.slots
            .by_ref()
            .find_map(|(index, slot)| occupant(order, index, slot))
    }
}

/// From the highest index down; the two ends never visit a slot twice.
impl<T> DoubleEndedIterator for Occupied<'_, T> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let order = self.order;
        self.slots
            .by_ref()
            .rev()
            .find_map(|(index, slot)| occupant(order, index, slot))
    }
}

/// `(handle, &value)`, from [`RawPool::entries`].
///
/// It holds no guard, only the storage and a range of slot indices: the
/// guard given to `entries` (a `Guard`, so announced) is borrowed for `'g`
/// by whoever made it. So it is `Send` exactly when `&T` is (`T: Sync`),
/// and a part split off may run on another thread: every visit there
/// happens after the announcement and its fence (the hand-off to that
/// thread synchronizes with the announcing thread), which is all the
/// argument in `reclaim.md` needs of a reader's loads (a `SeqCst` fence
/// that happens before a load orders it as one sequenced after it would),
/// so the value's reclamation waits for the guard, which outlives `'g`.
pub(crate) struct Entries<'g, T>(Occupied<'g, T>);

impl<T> Entries<'_, T> {
    #[cfg(feature = "rayon")]
    /// Splits the slots left in two: keeps the lower part, returns the upper.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        Some(Entries(self.0.split_off()?))
    }
}

impl<'g, T> Iterator for Entries<'g, T> {
    type Item = (Handle, &'g T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (handle, slot) = self.0.next()?;
        // SAFETY: the word was OCCUPIED (an Acquire load), so the value is
        // initialised; the guard given to `entries` and borrowed for 'g
        // announced before that load (on this thread, or on the thread that
        // handed this part over, which is all the argument of `reclaim.md`
        // needs), so the value outlives 'g even if removed.
        Some((handle, unsafe { slot.value_ref() }))
    }

    /// Concurrent inserts and removes make any lower bound but 0 a guess;
    /// the slots left to visit bound it above.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.0.bound()))
    }
}

impl<T> DoubleEndedIterator for Entries<'_, T> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let (handle, slot) = self.0.next_back()?;
        // SAFETY: as in `next`.
        Some((handle, unsafe { slot.value_ref() }))
    }
}

/// `(handle, &mut value)`, from [`RawPool::entries_mut`].
pub(crate) struct EntriesMut<'a, T> {
    occupied: Occupied<'a, T>,
    left: Left,
}

impl<T> EntriesMut<'_, T> {
    #[cfg(feature = "rayon")]
    /// Splits the slots left in two: keeps the lower part, returns the upper.
    /// The parts visit disjoint slots, so their references never alias.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        let upper = self.occupied.split_off()?;
        self.left = Left(None);
        Some(EntriesMut {
            occupied: upper,
            left: Left(None),
        })
    }
}

impl<'a, T> Iterator for EntriesMut<'a, T> {
    type Item = (Handle, &'a mut T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let Some((handle, slot)) = self.occupied.next() else {
            self.left.finished();
            return None;
        };
        self.left.yielded();
        // SAFETY: OCCUPIED means initialised; the iterator borrows the pool
        // mutably for 'a and visits each slot once (parts split off visit
        // disjoint ranges), so the references are unique.
        Some((handle, unsafe { slot.value_mut() }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.left.size_hint(self.occupied.bound())
    }
}

impl<T> DoubleEndedIterator for EntriesMut<'_, T> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let Some((handle, slot)) = self.occupied.next_back() else {
            self.left.finished();
            return None;
        };
        self.left.yielded();
        // SAFETY: as in `next`: the two ends never visit a slot twice.
        Some((handle, unsafe { slot.value_mut() }))
    }
}

// SAFETY: an `EntriesMut` is a `&mut` borrow of the pool handing out `&mut T`,
// one per slot: sending it sends those `&mut T`, which needs `T: Send`, as
// for `std::slice::IterMut`. Its own state is a cursor and a shared borrow of
// the storage's bucket pointers, which it only loads.
unsafe impl<T: Send> Send for EntriesMut<'_, T> {}

// SAFETY: through `&EntriesMut` nothing can be reached (`next` needs `&mut`),
// but `Sync` follows `&mut T`'s rule, `T: Sync`, as for `std::slice::IterMut`.
unsafe impl<T: Sync> Sync for EntriesMut<'_, T> {}

/// `(handle, value)` taken out of the pool, from [`RawPool::drain`].
pub(crate) struct Drained<'a, T> {
    pool: &'a RawPool<T>,
    occupied: Occupied<'a, T>,
    left: Left,
}

impl<T> Drained<'_, T> {
    #[cfg(feature = "rayon")]
    /// Splits the slots left in two: keeps the lower part, returns the
    /// upper. Each part takes out (or, when dropped, drops) the values of
    /// its own range, so every value goes exactly once.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        let upper = self.occupied.split_off()?;
        self.left = Left(None);
        Some(Drained {
            pool: self.pool,
            occupied: upper,
            left: Left(None),
        })
    }
}

impl<T> Iterator for Drained<'_, T> {
    type Item = (Handle, T);

    fn next(&mut self) -> Option<Self::Item> {
        let Some((handle, _)) = self.occupied.next() else {
            self.left.finished();
            return None;
        };
        self.left.yielded();
        // SAFETY: the slot is OCCUPIED, `drain` borrowed the pool mutably for
        // as long as this iterator (and every part split off it) lives, and
        // no other part visits this slot: the access is exclusive.
        let value = unsafe { self.pool.take_exclusive(handle.index()) };
        Some((handle, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.left.size_hint(self.occupied.bound())
    }
}

impl<T> DoubleEndedIterator for Drained<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let Some((handle, _)) = self.occupied.next_back() else {
            self.left.finished();
            return None;
        };
        self.left.yielded();
        // SAFETY: as in `next`: the two ends never visit a slot twice.
        let value = unsafe { self.pool.take_exclusive(handle.index()) };
        Some((handle, value))
    }
}

impl<T> Drop for Drained<'_, T> {
    /// Drops the values not taken, every one even if some `Drop` panics
    /// (as `clear` does), then re-raises the first such panic.
    fn drop(&mut self) {
        let mut first_panic = None;
        for (_, value) in self.by_ref() {
            keep_first(&mut first_panic, drop_catching(value));
        }
        if let Some(panic) = first_panic {
            std::panic::resume_unwind(panic);
        }
    }
}

// SAFETY: a `Drained` borrows the pool mutably and moves values out of it:
// sending it sends those values, which needs `T: Send` (as for
// `std::vec::Drain`); it never hands out a `&T`, so parts split off it may
// run on several threads at once without `T: Sync`. What else it touches,
// the slot words of its own range, the length shares and the stripes' free
// lists, are atomics the pool shares between threads anyway.
unsafe impl<T: Send> Send for Drained<'_, T> {}

// SAFETY: `&Drained` reaches nothing (`next` needs `&mut`); `Sync` follows
// `T: Sync`, as for `std::vec::Drain`.
unsafe impl<T: Sync> Sync for Drained<'_, T> {}

/// `(handle, value)`, owning the pool, from [`RawPool::into_entries`].
pub(crate) struct IntoEntries<T> {
    pool: RawPool<T>,
    next: u64,
    end: u64,
    left: Left,
}

impl<T> IntoEntries<T> {
    /// The value of slot `index` and its handle, if it is occupied.
    fn take(&mut self, index: u32) -> Option<(Handle, T)> {
        let slot = self.pool.storage.find(index)?;
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        if word.state() != State::Occupied {
            return None;
        }
        self.left.yielded();
        // SAFETY: the slot is OCCUPIED, the iterator owns the pool, and the
        // two ends never visit a slot twice.
        let value = unsafe { self.pool.take_exclusive(index) };
        Some((Handle::new(index, word.generation()), value))
    }
}

impl<T> Iterator for IntoEntries<T> {
    type Item = (Handle, T);

    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            let index = self.next as u32;
            self.next += 1;
            if let Some(entry) = self.take(index) {
                return Some(entry);
            }
        }
        self.left.finished();
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let bound = usize::try_from(self.end.saturating_sub(self.next)).unwrap_or(usize::MAX);
        self.left.size_hint(bound)
    }
}

impl<T> DoubleEndedIterator for IntoEntries<T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            self.end -= 1;
            if let Some(entry) = self.take(self.end as u32) {
                return Some(entry);
            }
        }
        self.left.finished();
        None
    }
}

impl<T> RawPool<T> {
    /// `(handle, &value)` for the values in the pool, protected by `_guard`
    /// (as in [`get`](Self::get)).
    pub(crate) fn entries<'g>(&'g self, _guard: &'g Guard) -> Entries<'g, T> {
        // Acquire pairs with the Release store that published each occupant.
        Entries(Occupied::new(
            &self.storage,
            self.slots_used(),
            Ordering::Acquire,
        ))
    }

    pub(crate) fn entries_mut(&mut self) -> EntriesMut<'_, T> {
        EntriesMut {
            left: Left(Some(self.len())),
            occupied: Occupied::new(&self.storage, self.slots_used(), Ordering::Relaxed),
        }
    }

    /// Takes every value out; the rest go when the iterator drops.
    pub(crate) fn drain(&mut self) -> Drained<'_, T> {
        Drained {
            left: Left(Some(self.len())),
            occupied: Occupied::new(&self.storage, self.slots_used(), Ordering::Relaxed),
            pool: self,
        }
    }

    /// The pool taken apart into its values.
    pub(crate) fn into_entries(self) -> IntoEntries<T> {
        IntoEntries {
            next: 0,
            end: self.slots_used(),
            left: Left(Some(self.len())),
            pool: self,
        }
    }
}
