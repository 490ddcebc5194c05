//! The allocated slots of a range of indices, in index order.

use super::Storage;
use crate::slot::Slot;

/// Iterates over allocated slots in index order, skipping unallocated buckets.
pub(crate) struct Slots<'a, T> {
    pub(super) storage: &'a Storage<T>,
    pub(super) next: u64,
    pub(super) end: u64,
}

impl<T> Slots<'_, T> {
    /// How many indices are left to visit: an upper bound on the slots
    /// still to come (those in unallocated buckets are skipped).
    #[inline]
    pub(crate) fn indices_left(&self) -> u64 {
        self.end.saturating_sub(self.next)
    }

    #[cfg(feature = "rayon")]
    /// Splits the indices left in two and returns the upper part, keeping
    /// the lower; `None` if fewer than two are left.
    ///
    /// The cut is the middle of the range, moved to the nearest bucket
    /// boundary when that is within a quarter of the range from the middle,
    /// so that large ranges split into whole buckets and each part walks
    /// its own bucket pointers.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        let len = self.indices_left();
        if len < 2 {
            return None;
        }
        let middle = self.next + len / 2;
        // `middle < end <= 2^32`, so it is an index.
        let at = self.storage.locate(middle as u32);
        let bucket_start = middle - at.offset as u64;
        let bucket_end = bucket_start + Storage::<T>::bucket_len(at.bucket) as u64;
        let slack = len / 4;
        let cut = if bucket_start > self.next && middle - bucket_start <= slack {
            bucket_start
        } else if bucket_end < self.end && bucket_end - middle <= slack {
            bucket_end
        } else {
            middle
        };
        let upper = Slots {
            storage: self.storage,
            next: cut,
            end: self.end,
        };
        self.end = cut;
        Some(upper)
    }
}

impl<'a, T> Iterator for Slots<'a, T> {
    type Item = (u32, &'a Slot<T>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            let index = self.next as u32;
            match self.storage.find(index) {
                Some(slot) => {
                    self.next += 1;
                    return Some((index, slot));
                }
                None => {
                    // Buckets can be allocated out of order: skip the hole.
                    let at = self.storage.locate(index);
                    self.next += (Storage::<T>::bucket_len(at.bucket) - at.offset) as u64;
                }
            }
        }
        None
    }
}

impl<T> DoubleEndedIterator for Slots<'_, T> {
    /// The last allocated slot left, skipping unallocated buckets as
    /// `next` does, from the top.
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            let index = (self.end - 1) as u32;
            match self.storage.find(index) {
                Some(slot) => {
                    self.end -= 1;
                    return Some((index, slot));
                }
                None => {
                    // Skip the hole down to its bucket's first index.
                    let at = self.storage.locate(index);
                    self.end = (self.end - 1 - at.offset as u64).max(self.next);
                }
            }
        }
        None
    }
}
