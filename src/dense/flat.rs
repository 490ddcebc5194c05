//! The values' region: the values of the column's segments from the second
//! on, in one reservation that grows in place, as the storage's flat region
//! holds a pool's slots (see "The values' region" in the module docs).
//!
//! Segment `k >= 1` of the column starts `first * (2^k - 2)` positions past
//! position `first`, so with the region its values are at that offset from
//! the region's start: consecutive segments' values are one run of memory.
//! A lookup then finds a value with one subtraction and one comparison
//! instead of the segment table, a loop over the values is one slice for
//! every segment the region holds, and a large column's values lie in huge
//! pages (`Region` advises them).

use core::ptr;

use crate::region::Region;
use crate::storage::FLAT_BYTES;

/// How far past the region's start the values begin (rounded up to `T`'s
/// alignment). The sparse table's flat region and this one both start on a
/// huge-page boundary, so without it, in a pool filled in order, index
/// `i`'s word and position `i`'s value of a `u64` pool sit at the same
/// offset in their pages: the same L1 sets, for every lookup of a loop
/// over the handles in order. A quarter page apart, such a loop ran about a
/// third faster on the 2-core AMD host (docs/perf/0045).
const STAGGER: usize = 1024;

/// The values' region of a column, as decided when the column first
/// allocated a segment past its first: the value cells of positions
/// `first..first + len`, or none (`len` 0).
pub(super) struct FlatValues<T> {
    /// The reserved address space, unmapped when this drops. `None` under
    /// loom (a heap allocation instead), and where there is no region.
    region: Option<Region>,
    /// The value cell of position `first`, the region's start (under loom,
    /// a heap allocation of `len` cells; dangling where there is none).
    base: *mut T,
    /// Positions from `first` on that the region holds: whole segments,
    /// the last one cut at the column's limit; at most `FLAT_BYTES` bytes
    /// of values. (A lookup of a position below `first` subtracts in 64
    /// bits, wrapping past every length.)
    len: u32,
}

impl<T> FlatValues<T> {
    /// No region: every segment's values are a heap allocation of their own.
    pub(super) fn none() -> Self {
        FlatValues {
            region: None,
            base: ptr::NonNull::dangling().as_ptr(),
            len: 0,
        }
    }

    /// The region of a column whose first segment holds `first` positions,
    /// below `limit`, for at most `cap` positions past the first segment:
    /// as many whole segments as fit that, `FLAT_BYTES` and what the
    /// process may reserve now (see `Region::allowance`), or none if not
    /// even the second segment fits, if `T` takes no room, or if the system
    /// refuses.
    pub(super) fn reserve(first: u64, limit: u32, cap: u32) -> Self {
        let size = core::mem::size_of::<T>();
        if size == 0 {
            return Self::none();
        }
        let wanted = (FLAT_BYTES / size).min(cap as usize);
        if cfg!(all(test, handle_pool_loom)) {
            // Under loom the region is a heap allocation of value cells made
            // when it is installed (loom cannot model a mapping): the models
            // reach values through it as every 64-bit Unix pool does, with
            // its installation and its publication but not its `mprotect`.
            let len = Self::fit(first, limit, wanted as u64);
            assert!(
                len <= 64,
                "a loom model's values region should be tiny (Config::flat_slots)"
            );
            if len == 0 {
                return Self::none();
            }
            return FlatValues {
                region: None,
                base: super::column::new_values::<T>(len as usize),
                len,
            };
        }
        let allowed = Region::allowance(wanted * size) / size;
        let len = Self::fit(first, limit, allowed as u64);
        if len == 0 {
            return Self::none();
        }
        // The first page is mapped now, so that a region exists only if the
        // system lets it be used (later commits extend the mapped part of
        // the same mapping: no new mapping to count against the process's
        // limit), and a refusal here just means heap segments.
        let stagger = Self::stagger();
        let region = Region::reserve(stagger + len as usize * size, core::mem::align_of::<T>())
            .filter(|region| region.commit(region.page()));
        match region {
            Some(region) => FlatValues {
                // In bounds: the region holds `stagger` bytes more than the
                // values (and is aligned to a page, `stagger` to `T`).
                base: region.base().wrapping_add(stagger).cast::<T>(),
                region: Some(region),
                len,
            },
            None => Self::none(),
        }
    }

    /// Positions from `first` on in the whole segments (from the second)
    /// that fit `cap` positions, the last one cut at `limit`: 0 if the
    /// second segment does not fit.
    fn fit(first: u64, limit: u32, cap: u64) -> u32 {
        let limit = u64::from(limit);
        if limit <= first {
            return 0;
        }
        // Segments 1..=k end `first * (2^(k + 1) - 2)` positions past
        // `first`: grow k while the next segment fits.
        let mut end = 0u64;
        let mut k = 1u32;
        while k < 33 {
            let next = (first << (k + 1)) - 2 * first;
            if next > cap {
                break;
            }
            end = next;
            if first + end >= limit {
                break;
            }
            k += 1;
        }
        end.min(limit - first) as u32
    }

    /// [`STAGGER`], a multiple of `T`'s alignment.
    fn stagger() -> usize {
        STAGGER.next_multiple_of(core::mem::align_of::<T>())
    }

    /// Positions from `first` on that the region holds (0: none).
    #[inline]
    pub(super) fn len(&self) -> u32 {
        self.len
    }

    /// The value cell of position `first`.
    #[inline]
    pub(super) fn base(&self) -> *mut T {
        self.base
    }

    /// Makes the value cells of the first `end` positions from `first` on
    /// (at most [`len`](Self::len)) usable; `false` if the system refuses
    /// (out of memory under strict overcommit). Idempotent and safe to race,
    /// as `Region::commit` is.
    pub(super) fn commit(&self, end: u32) -> bool {
        debug_assert!(end <= self.len);
        match &self.region {
            Some(region) => {
                let used = Self::stagger() + end as usize * core::mem::size_of::<T>();
                let bytes = region.round_up(used);
                region.commit(bytes.min(region.len()))
            }
            // Under loom the whole allocation is usable from the start.
            None => true,
        }
    }
}

impl<T> Drop for FlatValues<T> {
    fn drop(&mut self) {
        if self.region.is_none() && self.len > 0 {
            // SAFETY: under loom a region with positions is the heap room
            // `new_values(len)` made in `reserve`; the column that owned it
            // is being dropped (or lost the race to install it and never
            // shared it), and the pool dropped every value in it.
            unsafe { super::column::free_values(self.base, self.len as usize) };
        }
        // Elsewhere the region, if any, unmaps itself.
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "../unit_tests/dense_flat.rs"]
mod tests;
