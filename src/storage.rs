#![doc = include_str!("../docs/storage.md")]

use core::marker::PhantomData;
use core::ptr;

use crate::slot::Slot;
use crate::sync::{AtomicPtr, Ordering};

/// Four buckets per level, and enough levels for every index up to
/// `MAX_INDEX` with a first level of one slot (33 are needed); 64 levels so
/// that `bucket & (BUCKETS - 1)` proves the index in range without a bounds
/// check.
const BUCKETS: usize = 4 * 64;

pub(crate) struct Storage<T> {
    buckets: [AtomicPtr<Slot<T>>; BUCKETS],
    /// The first bucket's size, `1 << first_shift`.
    first: u64,
    /// `4 * first_shift + 4`: what `locate` subtracts from `4 * top + high`
    /// to number the buckets from 0.
    bucket_base: usize,
    /// The storage owns the slots, and through them the `T`s they hold: its
    /// auto traits (and those of everything that borrows it, such as the
    /// iterators) must follow `T`'s, not those of the atomic pointers.
    _owns: PhantomData<T>,
}

/// Where an index lives.
#[derive(Clone, Copy)]
struct Location {
    bucket: usize,
    offset: usize,
}

impl<T> Storage<T> {
    /// Storage whose first level holds `1 << first_shift` slots (at least
    /// 4, so that every level cuts into four buckets).
    pub(crate) fn new(first_shift: u32) -> Self {
        assert!(
            first_shift < 31,
            "the first bucket must be smaller than 2^31 slots"
        );
        let first_shift = first_shift.max(2);
        Storage {
            buckets: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            first: 1 << first_shift,
            bucket_base: 4 * first_shift as usize + 4,
            _owns: PhantomData,
        }
    }

    #[inline(always)]
    fn locate(&self, index: u32) -> Location {
        let shifted = index as u64 + self.first;
        // At least `first_shift`, so at least 2.
        let top = 63 - shifted.leading_zeros();
        let quarter_shift = top - 2;
        // The top bit and the two below it: 4 + the quarter.
        let high = shifted >> quarter_shift;
        // 4 * level + quarter, as one add.
        let bucket = (4 * top as usize + high as usize).wrapping_sub(self.bucket_base);
        Location {
            bucket: bucket & (BUCKETS - 1),
            offset: (shifted - (high << quarter_shift)) as usize,
        }
    }

    #[inline(always)]
    fn bucket_len(&self, bucket: usize) -> usize {
        // `bucket + bucket_base - 4` is `4 * top + quarter`.
        1usize << (((bucket + self.bucket_base - 4) >> 2) - 2)
    }

    /// The slot at `index`, or `None` if its bucket was never allocated.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&Slot<T>> {
        let at = self.locate(index);
        // Acquire pairs with the Release CAS in `allocate_bucket`: the slots
        // are initialised before we read through the pointer.
        let bucket = self.buckets[at.bucket].load(Ordering::Acquire);
        if bucket.is_null() {
            return None;
        }
        // SAFETY: a non-null bucket pointer points to `bucket_len(bucket)`
        // initialised slots that live until `self` is dropped, and `locate`
        // returns an offset below that length.
        Some(unsafe { &*bucket.add(at.offset) })
    }

    /// The slot at `index`, which some list or handle says was handed out.
    ///
    /// # Panics
    /// If its bucket was never allocated: that would be a bug in the pool.
    #[inline]
    pub(crate) fn slot(&self, index: u32) -> &Slot<T> {
        match self.get(index) {
            Some(slot) => slot,
            None => panic!("handle-pool bug: slot {index} was handed out but never allocated"),
        }
    }

    /// Makes sure every slot in `start..end` is allocated.
    pub(crate) fn ensure(&self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        let mut index = start as u64;
        while index < end as u64 {
            let at = self.locate(index as u32);
            // Relaxed: a non-null pointer is only used after the Acquire load in `get`.
            if self.buckets[at.bucket].load(Ordering::Relaxed).is_null() {
                self.allocate_bucket(at.bucket);
            }
            // On to the next bucket.
            index += (self.bucket_len(at.bucket) - at.offset) as u64;
        }
    }

    #[cold]
    fn allocate_bucket(&self, bucket: usize) {
        let len = self.bucket_len(bucket);
        let fresh = Box::into_raw(new_slots::<T>(len)) as *mut Slot<T>;
        // Release publishes the initialised slots to `get`'s Acquire load;
        // Acquire on failure is not needed: the loser only frees its own copy.
        if self.buckets[bucket]
            .compare_exchange(ptr::null_mut(), fresh, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: `fresh` came from `Box::into_raw` of a slice of `len`
            // slots just above and was never shared: we lost the race.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
        }
    }

    /// Number of slots in allocated buckets.
    pub(crate) fn capacity(&self) -> usize {
        (0..BUCKETS)
            .filter(|&b| !self.buckets[b].load(Ordering::Relaxed).is_null())
            .map(|b| self.bucket_len(b))
            .sum()
    }

    /// A cursor over the allocated slots with indices below `end`.
    pub(crate) fn slots(&self, end: u64) -> Slots<'_, T> {
        Slots {
            storage: self,
            next: 0,
            end,
        }
    }
}

/// `len` fresh slots, each `FREE(0, 0)`.
///
/// With std atomics an all-zero slot is exactly that state, so a zeroed
/// allocation does the job: large buckets then come straight from the OS as
/// untouched zero pages instead of being written slot by slot. Loom's atomics
/// must be constructed.
#[cfg(not(all(test, handle_pool_loom)))]
fn new_slots<T>(len: usize) -> Box<[Slot<T>]> {
    use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
    if len == 0 || core::mem::size_of::<Slot<T>>() == 0 {
        return (0..len).map(|_| Slot::new()).collect();
    }
    let layout = Layout::array::<Slot<T>>(len).expect("bucket size overflows the address space");
    // SAFETY: the layout has a non-zero size (checked above).
    let ptr = unsafe { alloc_zeroed(layout) } as *mut Slot<T>;
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `ptr` is a fresh allocation with the layout of `[Slot<T>; len]`,
    // as `Box<[Slot<T>]>` expects, and all-zero bytes are a valid `Slot<T>`:
    // an `AtomicU64` holding 0 (the word `FREE(0, 0)`) and a `MaybeUninit`
    // value cell, which may hold any bytes.
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ptr, len)) }
}

#[cfg(all(test, handle_pool_loom))]
fn new_slots<T>(len: usize) -> Box<[Slot<T>]> {
    (0..len).map(|_| Slot::new()).collect()
}

/// Iterates over allocated slots in index order, skipping unallocated buckets.
pub(crate) struct Slots<'a, T> {
    storage: &'a Storage<T>,
    next: u64,
    end: u64,
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
        let bucket_end = bucket_start + self.storage.bucket_len(at.bucket) as u64;
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
            match self.storage.get(index) {
                Some(slot) => {
                    self.next += 1;
                    return Some((index, slot));
                }
                None => {
                    // Buckets can be allocated out of order: skip the hole.
                    let at = self.storage.locate(index);
                    self.next += (self.storage.bucket_len(at.bucket) - at.offset) as u64;
                }
            }
        }
        None
    }
}

impl<T> Drop for Storage<T> {
    fn drop(&mut self) {
        for bucket in 0..BUCKETS {
            let ptr = self.buckets[bucket].load(Ordering::Relaxed);
            if !ptr.is_null() {
                let len = self.bucket_len(bucket);
                // SAFETY: the pointer came from `Box::into_raw` of `len` slots in
                // `allocate_bucket`, and `&mut self` means no one else uses it.
                // Slots never drop their value cells: the pool drops values.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(ptr, len)) });
            }
        }
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/storage.rs"]
mod tests;
