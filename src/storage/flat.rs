//! A pool's flat region: the slots from [`FLAT_START`] on, in one mapping
//! that grows in place (see the storage's documentation).

use core::ptr;

#[cfg(doc)]
use super::FLAT_START;
use super::{new_slots, Storage, FLAT_BYTES};
use crate::region::Region;
use crate::slot::Slot;
use crate::sync::AtomicUsize;

/// A pool's flat region, as decided when it first needed one: the slots
/// of indices `FLAT_START..FLAT_START + reserved`, or none (`reserved` 0).
pub(super) struct FlatRegion<T> {
    /// The reserved address space, unmapped when this drops. `None` under
    /// loom (a heap slice instead), and where there is no region.
    pub(super) region: Option<Region>,
    /// The region's first slot (under loom, the first of a leaked heap
    /// slice of `reserved` slots; dangling where there is no region).
    pub(super) slots: *mut Slot<T>,
    /// How many slots the region holds.
    pub(super) reserved: usize,
    /// Bytes of the region mapped readable and writable, a whole number of
    /// pages, at least the storage's `flat_committed` slots' worth. Only
    /// grows. (0 under loom, where nothing is mapped.)
    pub(super) mapped: AtomicUsize,
}

impl<T> FlatRegion<T> {
    /// No region: every slot lives in buckets.
    pub(super) fn none() -> Self {
        FlatRegion {
            region: None,
            slots: ptr::NonNull::dangling().as_ptr(),
            reserved: 0,
            mapped: AtomicUsize::new(0),
        }
    }

    /// The region of a storage whose first level holds `first` slots, for
    /// at most `flat_slots` slots of the `max_slots` it may hand out: as
    /// many as [`Storage::flat_len`] says fit what the process may reserve
    /// now (see `Region::allowance`), or none if the system refuses.
    pub(super) fn reserve(first: u64, flat_slots: u32, max_slots: u32) -> Self {
        let size = core::mem::size_of::<Slot<T>>();
        if cfg!(all(test, handle_pool_loom)) {
            let reserved = Storage::<T>::flat_len(first, flat_slots, max_slots, FLAT_BYTES);
            // Under loom the flat region is a heap slice of slots
            // constructed when it is installed (loom's atomics cannot live
            // in zeroed pages, and loom cannot model a mapping): the models
            // run lookups, inserts and removals through the flat region, as
            // every 64-bit Unix pool does, with its installation and its
            // count's publication but not its `mprotect`. Every slot is a
            // few loom atomics: models ask for a handful.
            assert!(
                reserved <= 64,
                "a loom model's flat region should be tiny (Config::flat_slots)"
            );
            if reserved == 0 {
                return Self::none();
            }
            let slots = Box::into_raw(new_slots::<T>(reserved)).cast::<Slot<T>>();
            return FlatRegion {
                region: None,
                slots,
                reserved,
                mapped: AtomicUsize::new(0),
            };
        }
        let allowed = Region::allowance(FLAT_BYTES);
        let reserved = Storage::<T>::flat_len(first, flat_slots, max_slots, allowed);
        if reserved == 0 {
            return Self::none();
        }
        // The first page is mapped now, so that a region exists only if the
        // system lets it be used: later commits extend the mapped part of
        // the same mapping (no new mapping to count against the process's
        // limit), and a refusal here just means buckets.
        let region = Region::reserve(reserved * size, core::mem::align_of::<Slot<T>>())
            .filter(|region| region.commit(region.page()));
        match region {
            Some(region) => FlatRegion {
                slots: region.base().cast::<Slot<T>>(),
                mapped: AtomicUsize::new(region.page()),
                region: Some(region),
                reserved,
            },
            None => Self::none(),
        }
    }
}

impl<T> Drop for FlatRegion<T> {
    fn drop(&mut self) {
        if cfg!(all(test, handle_pool_loom)) && self.reserved > 0 {
            let slots = ptr::slice_from_raw_parts_mut(self.slots, self.reserved);
            // SAFETY: under loom, `slots` came from `Box::into_raw` of
            // `reserved` slots in `reserve`, and the storage that owned this
            // region is being dropped (or lost the race to install it, and
            // never shared it). Slots never drop their value cells.
            drop(unsafe { Box::from_raw(slots) });
        }
        // Elsewhere the region, if any, unmaps itself.
    }
}
