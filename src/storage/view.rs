//! Finding slots through a view of the storage made earlier, or through
//! the storage as it is now.

use super::Storage;
use crate::slot::Slot;

/// The storage with the flat region's committed count as it was when the
/// view was made ([`Storage::view`]). Indices below that count are found
/// with an add; the others are looked up in the storage as it is now, so a
/// view never misses a slot committed after it was made. Not `Send` or
/// `Sync` (it holds a raw pointer): it lives in one thread's loop.
pub(crate) struct View<'a, T> {
    pub(super) storage: &'a Storage<T>,
    /// The flat region's first slot: `Storage::flat`.
    pub(super) flat: *const Slot<T>,
    /// Slots of the flat region committed when the view was made.
    pub(super) committed: usize,
}

impl<T> Clone for View<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for View<'_, T> {}

impl<'a, T> View<'a, T> {
    /// The slot at `index` if the flat region held it (committed) when the
    /// view was made.
    #[inline(always)]
    pub(super) fn flat_slot(&self, index: u32) -> Option<&'a Slot<T>> {
        let offset = Storage::<T>::flat_offset(index);
        if offset >= self.committed {
            return None;
        }
        // SAFETY: `offset` is below the count `Storage::view` read (Acquire,
        // pairing with `commit_flat`'s Release), so `flat` (read after it)
        // is the region's first slot and `flat + offset` a slot of the
        // region, committed (readable and writable) and initialised (fresh
        // pages are zero, the word `FREE(0, 0)`, as in `new_slots`; under
        // loom, constructed with the region) before that count was
        // published. The count only grows and the region is unmapped only
        // when the storage is dropped, which the view's borrow `'a`
        // outlives: the slot stays valid for `'a`.
        Some(unsafe { &*self.flat.add(offset) })
    }
}

/// Where a lookup finds the slot of an index: the storage as it is now
/// (`&Storage`), or a [`View`] of it made earlier. Either borrows the
/// storage for `'a`, so the slots it finds live that long.
pub(crate) trait FindSlot<'a, T: 'a> {
    /// `found` of the slot at `index`, or `missing` if it has none.
    fn find_or<R>(self, index: u32, found: impl FnOnce(&'a Slot<T>) -> R, missing: R) -> R;
}

impl<'a, T> FindSlot<'a, T> for &'a Storage<T> {
    #[inline(always)]
    fn find_or<R>(self, index: u32, found: impl FnOnce(&'a Slot<T>) -> R, missing: R) -> R {
        Storage::find_or(self, index, found, missing)
    }
}

impl<'a, T> FindSlot<'a, T> for View<'a, T> {
    /// The slot through the view, else through the storage as it is now.
    #[inline(always)]
    fn find_or<R>(self, index: u32, found: impl FnOnce(&'a Slot<T>) -> R, missing: R) -> R {
        if let Some(slot) = self.flat_slot(index) {
            return found(slot);
        }
        // The flat region may have grown since the view was made, and a
        // bucket the region covers is never allocated: look again in
        // the storage as it is now, whose count may hold the index.
        self.storage.find_or(index, found, missing)
    }
}
