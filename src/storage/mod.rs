#![doc = include_str!("../../docs/storage.md")]

use core::marker::PhantomData;
use core::ptr;

use crate::slot::Slot;
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

mod flat;
mod slots;
mod view;

use flat::FlatRegion;
pub(crate) use slots::Slots;
pub(crate) use view::{FindSlot, View};

/// The most address space a pool's flat region reserves. Reserving costs no
/// memory, but the address space of a process is finite (2^47 bytes on
/// x86-64 Linux, less under an address-space limit) and shared by all its
/// pools: 1 GiB holds 64 M slots of a `u64` pool. Only pools that outgrow
/// their first chunk ([`FLAT_START`] slots) reserve one, and the process's
/// regions together stay within a budget (see `Region::allowance`).
pub(crate) const FLAT_BYTES: usize = 1 << 30;

/// The index the flat region starts at. A pool's first slots, its *first
/// chunk*, live in buckets: a pool that never holds more reserves no
/// address space and costs the process no memory mapping, which lets a
/// process hold hundreds of thousands of small pools. The region is
/// reserved when the pool first needs a slot from here on.
///
/// A constant, so that a lookup's test of the flat region stays one
/// comparison: `index - FLAT_START` (wrapping, in 32 bits) is below the
/// committed count exactly for the committed slots, and the subtraction
/// takes the place of the move that widened the index (`lea` for `mov`
/// on x86-64: no instruction more, `lookup_icount`, docs/perf/0041). An
/// index below it wraps past every count, and takes the bucket path.
///
/// Under loom 0: the models' flat regions start at their first slot, as
/// they were written for (a region is still installed on first use).
#[cfg(not(all(test, handle_pool_loom)))]
pub(crate) const FLAT_START: u32 = 64;
#[cfg(all(test, handle_pool_loom))]
pub(crate) const FLAT_START: u32 = 0;

/// The bucket table is indexed by `4 * (log2(shifted) - 1) + quarter`,
/// masked to its size: every shifted index (from 4 to below 2^33) has an
/// entry of its own, and the mask proves the index in range without a
/// bounds check. Entries outside the levels in use stay unallocated.
const BUCKETS: usize = 256;

/// Where the table keeps each bucket's own address: entry `KEPT + b` for
/// the bucket of entry `b`, in the upper half, which no lookup reaches
/// (a shifted index below 2^33 has an entry below 128). Entry `b` holds the
/// bucket's address biased by its first shifted index, which points before
/// the allocation; LeakSanitizer finds an allocation only through a pointer
/// into it, so without these it would report the buckets of a pool that is
/// never dropped (a `static` one) as leaked.
const KEPT: usize = BUCKETS / 2;

/// What an unallocated bucket's entry holds. Never a biased pointer: those
/// are multiples of `align_of::<Slot<T>>()` (at least 8, the slot word's
/// alignment), as the bucket's address and every slot size are. Never
/// dereferenced.
#[inline(always)]
fn unallocated<T>() -> *mut Slot<T> {
    ptr::null_mut::<Slot<T>>().wrapping_byte_add(1)
}

/// [`Storage::slot`]'s panic, out of line: the paths that reach a slot
/// through a list keep no formatting code, and no stack frame for it.
#[cold]
#[inline(never)]
fn never_allocated(index: u32) -> ! {
    panic!("handle-pool bug: slot {index} was handed out but never allocated")
}

pub(crate) struct Storage<T> {
    /// The flat region's first slot, that of index [`FLAT_START`]: slot
    /// `index` is at `flat + (index - FLAT_START)` while that difference is
    /// below `flat_committed`. Dangling (never null) until a region is
    /// installed, then its first slot for good: every committer stores it
    /// (the same value) before it raises `flat_committed`, so a thread that
    /// reads a count above zero (Acquire) reads this after it (see
    /// [`view`](Self::view)). An atomic also so that the storage's auto
    /// traits stay those of its slots.
    flat: AtomicPtr<Slot<T>>,
    /// Slots of the flat region the pool may use, from [`FLAT_START`] on:
    /// mapped readable and writable, and initialised. Only grows; what
    /// `capacity` counts of the region.
    flat_committed: AtomicUsize,
    /// Whether the pool has a flat region, and which: null until the pool
    /// first needs a slot from [`FLAT_START`] on, then the decision, for
    /// good (a region, or none: [`FlatRegion::reserved`] 0). Freed with the
    /// storage, which unmaps the region (after the buckets, which are
    /// separate allocations).
    decision: AtomicPtr<FlatRegion<T>>,
    /// `Config::flat_slots` and `max_slots`, for that decision.
    flat_slots: u32,
    max_slots: u32,
    /// Bucket `b` starting at shifted index `s0` holds `bucket - s0`
    /// (wrapping, in slots): the slot of shifted index `s` is then at
    /// `biased + s`, with no offset to compute on the lookup path.
    /// `unallocated()` until the bucket is allocated. Entries from [`KEPT`]
    /// on keep each bucket's own address, for leak checkers alone.
    buckets: [AtomicPtr<Slot<T>>; BUCKETS],
    /// The first level's size, `1 << first_shift`.
    first: u64,
    /// The storage owns the slots, and through them the `T`s they hold: its
    /// auto traits (and those of everything that borrows it, such as the
    /// iterators) must follow `T`'s, not those of the atomic pointers.
    _owns: PhantomData<T>,
}

/// Where an index lives.
#[derive(Clone, Copy, Debug)]
struct Location {
    /// The bucket table entry.
    bucket: usize,
    /// The slot's place in its bucket.
    offset: usize,
}

impl<T> Storage<T> {
    /// Storage for indices below `max_slots` whose first bucket level holds
    /// `1 << first_shift` slots (at least 4, so that every level cuts into
    /// four buckets), with a flat region for up to `flat_slots` of them from
    /// [`FLAT_START`] on, reserved when the first of those is needed.
    /// Making one reserves nothing and calls nothing of the system's.
    pub(crate) fn new(first_shift: u32, flat_slots: u32, max_slots: u32) -> Self {
        assert!(
            first_shift < 31,
            "the first bucket must be smaller than 2^31 slots"
        );
        let first_shift = first_shift.max(2);
        Storage {
            flat: AtomicPtr::new(ptr::NonNull::dangling().as_ptr()),
            flat_committed: AtomicUsize::new(0),
            decision: AtomicPtr::new(ptr::null_mut()),
            flat_slots,
            max_slots,
            buckets: core::array::from_fn(|_| AtomicPtr::new(unallocated())),
            first: 1u64 << first_shift,
            _owns: PhantomData,
        }
    }

    /// How many slots the flat region should hold, from [`FLAT_START`] on:
    /// all the `max_slots` past it if they fit in `flat_slots` and `bytes`,
    /// else the most that fit and end where a bucket level starts
    /// (`FLAT_START + reserved + first` a power of two), so that the
    /// buckets after it are whole. None if the pool never gets past its
    /// first chunk, or if the chunk does not end where a bucket starts (a
    /// first level other than the default's 16 to 256 slots), so that no
    /// bucket holds slots on both sides of the region's start.
    fn flat_len(first: u64, flat_slots: u32, max_slots: u32, bytes: usize) -> usize {
        let start = u64::from(FLAT_START);
        if u64::from(max_slots) <= start
            || Self::bucket_start(Self::bucket_of(start + first)) != start + first
        {
            return 0;
        }
        let fit = (bytes / core::mem::size_of::<Slot<T>>()).min(flat_slots as usize) as u64;
        if start + fit >= u64::from(max_slots) {
            return (u64::from(max_slots) - start) as usize;
        }
        let level = 1u64 << (start + fit + first).ilog2();
        level.saturating_sub(start + first) as usize
    }

    /// The table entry of a shifted index: `4 * (log2 - 1) + quarter`.
    ///
    /// Read off the index converted to `f64`, which is exact below 2^53
    /// (shifted indices are below 2^33): the exponent field holds
    /// `1023 + log2` and the two mantissa bits below it the quarter, so the
    /// twelve bits from bit 50 are `4 * (1023 + log2) + quarter`, which is
    /// `4 * (log2 - 1) + quarter` modulo 256. One conversion and one shift,
    /// where a bit scan is slow on x86-64 without `lzcnt` (`bsr` on AMD
    /// Zen) and the shift pair after it adds to that (docs/perf/0004).
    #[inline(always)]
    fn bucket_of(shifted: u64) -> usize {
        debug_assert!((4..1 << 33).contains(&shifted));
        let bits = (shifted as i64 as f64).to_bits();
        (bits >> 50) as usize & (BUCKETS - 1)
    }

    #[inline(always)]
    fn locate(&self, index: u32) -> Location {
        let shifted = index as u64 + self.first;
        let bucket = Self::bucket_of(shifted);
        Location {
            bucket,
            offset: (shifted - Self::bucket_start(bucket)) as usize,
        }
    }

    /// `log2` of the shifted indices in `bucket`.
    #[inline(always)]
    fn bucket_log2(bucket: usize) -> u32 {
        (bucket >> 2) as u32 + 1
    }

    /// The shifted index of the first slot of `bucket`.
    #[inline(always)]
    fn bucket_start(bucket: usize) -> u64 {
        ((4 + (bucket & 3)) as u64) << (Self::bucket_log2(bucket) - 2)
    }

    #[inline(always)]
    fn bucket_len(bucket: usize) -> usize {
        1usize << (Self::bucket_log2(bucket) - 2)
    }

    /// Slots allocated for `bucket`: its whole length, except in the bucket
    /// where the index space ends, which holds only the slots of indices up
    /// to `u32::MAX`. With the default first level of 64 that bucket would
    /// otherwise hold 2^30 slots for 64 indices (16 GiB of a `u64` pool's
    /// address space). Every index a handle can carry, forged or not, stays
    /// inside its bucket's allocation, so lookups need no further check.
    fn allocated_len(&self, bucket: usize) -> usize {
        let end = u32::MAX as u64 + 1 + self.first;
        let start = Self::bucket_start(bucket);
        debug_assert!(start < end, "bucket {bucket} holds no index");
        (Self::bucket_len(bucket) as u64).min(end - start) as usize
    }

    /// The slot at `index`, or `None` if its bucket was never allocated.
    ///
    /// Through [`find_or`](Self::find_or), which calls its `found` on each
    /// path, the flat region's and the buckets', so a lookup neither merges
    /// the two first nor tests the bucket path's address for `None`'s null
    /// niche (see `lookup_icount`).
    #[inline(always)]
    pub(crate) fn find(&self, index: u32) -> Option<&Slot<T>> {
        self.find_or(index, Some, None)
    }

    /// `found` of the slot at `index`, or `missing` if its bucket was never
    /// allocated: [`find`](Self::find) for an answer that has a value of
    /// its own for "no slot", such as a slot word (`contains` compares the
    /// fresh word then, and its paths meet before one comparison).
    #[inline(always)]
    pub(crate) fn find_or<'a, R>(
        &'a self,
        index: u32,
        found: impl FnOnce(&'a Slot<T>) -> R,
        missing: R,
    ) -> R {
        // Through a view made just now: an index past its count is in a
        // bucket. (A view here, not `flat_slot`: its order of loads keeps
        // `get`, `contains` and `with` no longer than before views existed,
        // docs/perf/0036.)
        match self.view().flat_slot(index) {
            Some(slot) => found(slot),
            None => self.find_in_buckets(index, found, missing),
        }
    }

    /// The storage as it is now, for any number of lookups: the flat
    /// region's first slot and committed count, read once.
    ///
    /// A loop of lookups through one view keeps the two in registers. Through
    /// the storage itself each lookup loads both again, since the count is
    /// an atomic that only grows and the compiler may not hoist an atomic
    /// load out of a loop (docs/perf/0036).
    #[inline(always)]
    pub(crate) fn view(&self) -> View<'_, T> {
        // Count first. Acquire pairs with the Release `fetch_max` in
        // `commit_flat`: the slots below the count are mapped and
        // initialised, and `flat` was stored before it, so with a count
        // above zero the load below reads the region's first slot.
        let committed = self.flat_committed.load(Ordering::Acquire);
        // Relaxed: ordered by the Acquire load above; with a count of zero
        // the pointer is never used.
        let flat = self.flat.load(Ordering::Relaxed);
        if flat.is_null() {
            // SAFETY: `flat` is a dangling pointer until a committer stores
            // the region's first slot (never null: `Region::reserve` refuses
            // a mapping at address 0; under loom a `Box`'s): never null.
            // Telling the compiler so here, where the pointer is loaded, lets
            // a lookup test `index` alone, not the slot's address for
            // `None`'s null niche as well (every lookup was longer with
            // this hint in `View::flat_slot` instead: docs/perf/0036).
            unsafe { core::hint::unreachable_unchecked() }
        }
        View {
            storage: self,
            flat,
            committed,
        }
    }

    /// Where `index` would be in the flat region: its distance from
    /// [`FLAT_START`], in 32 bits, so that an index below wraps past every
    /// count (see there).
    ///
    /// On x86-64 one `lea` into a 32-bit register, which subtracts and
    /// widens at once: as many instructions as the widening alone took
    /// before there was a first chunk. Written in Rust, the widened
    /// subtraction becomes an add of the 64-bit constant `2^32 - 64`,
    /// which LLVM hoists into a register in a function with two inlined
    /// lookups (`with`, `get_cloned`): a `mov` and an `add` per lookup, one
    /// instruction more (docs/perf/0041).
    #[inline(always)]
    fn flat_offset(index: u32) -> usize {
        #[cfg(all(target_arch = "x86_64", not(miri), not(all(test, handle_pool_loom))))]
        {
            const _: () = assert!(FLAT_START == 64, "the `lea` below subtracts 64");
            let offset: usize;
            // SAFETY: arithmetic on registers alone: no memory, no stack,
            // no flags. The low 32 bits of `index`'s register minus 64,
            // written to a 32-bit register, which clears its upper half:
            // `index.wrapping_sub(64) as usize`, whatever the upper half
            // of `index`'s register held.
            unsafe {
                core::arch::asm!(
                    "lea {offset:e}, [{index:r} - 64]",
                    index = in(reg) index,
                    offset = lateout(reg) offset,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            offset
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri), not(all(test, handle_pool_loom)))))]
        {
            index.wrapping_sub(FLAT_START) as usize
        }
    }

    /// The slot at `index` if the flat region holds it (committed), for
    /// `remove`'s inline path and the cursors.
    ///
    /// The count is tested before `flat` is loaded, so an index past it (a
    /// bucket, or a forged one) pays no load of `flat`: through a view,
    /// which loads both first, a stale `remove` and one through buckets
    /// ran more instructions (a review's callgrind counts; docs/perf/0036).
    #[inline(always)]
    pub(crate) fn flat_slot(&self, index: u32) -> Option<&Slot<T>> {
        let offset = Self::flat_offset(index);
        // Acquire pairs with the Release `fetch_max` in `commit_flat`: the
        // slots below the count are mapped and initialised, and `flat` was
        // stored before it (as in `view`).
        if offset >= self.flat_committed.load(Ordering::Acquire) {
            return None;
        }
        // Relaxed: ordered by the Acquire load above (as in `view`).
        let flat = self.flat.load(Ordering::Relaxed);
        if flat.is_null() {
            // SAFETY: `flat` is never null, as in `view`.
            unsafe { core::hint::unreachable_unchecked() }
        }
        // SAFETY: `offset` is below the committed count just read, so
        // `flat + offset` is a committed, initialised slot of the region,
        // which lives until `self` is dropped (as in `View::flat_slot`).
        Some(unsafe { &*flat.add(offset) })
    }

    /// `find_or` for an index the flat region does not hold (yet).
    #[inline(always)]
    pub(crate) fn find_in_buckets<'a, R>(
        &'a self,
        index: u32,
        found: impl FnOnce(&'a Slot<T>) -> R,
        missing: R,
    ) -> R {
        let shifted = index as u64 + self.first;
        // Acquire pairs with the Release CAS in `allocate_bucket`: the slots
        // are initialised before we read through the pointer.
        let biased = self.buckets[Self::bucket_of(shifted)].load(Ordering::Acquire);
        if biased == unallocated() {
            return missing;
        }
        // SAFETY: an allocated entry holds `bucket - start` for a bucket of
        // `allocated_len` initialised slots whose shifted indices start at
        // `start`, and `bucket_of` put `shifted` in that range (which
        // `allocated_len` cuts only past every `u32` index): the sum
        // points into the bucket (wrapping arithmetic keeps the bucket's
        // provenance), which lives until `self` is dropped.
        found(unsafe { &*biased.wrapping_add(shifted as usize) })
    }

    /// The slot at `index`, which some list or handle says was handed out.
    ///
    /// # Panics
    /// If its bucket was never allocated: that would be a bug in the pool.
    #[inline]
    pub(crate) fn slot(&self, index: u32) -> &Slot<T> {
        match self.find(index) {
            Some(slot) => slot,
            None => never_allocated(index),
        }
    }

    /// Makes sure every slot in `start..end` is allocated: those of the
    /// first chunk and past the flat region in buckets, those in it
    /// committed (the region reserved first, if this is the first slot
    /// the pool needs from [`FLAT_START`] on).
    pub(crate) fn ensure(&self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        if end <= FLAT_START {
            return self.allocate_buckets(start, end);
        }
        let region = self.flat_region();
        // At most `max_slots`, below 2^32, so a `u32`.
        let flat_end = FLAT_START + region.reserved as u32;
        let (from, to) = (start.max(FLAT_START), end.min(flat_end));
        if from < to {
            self.commit_flat(region, Self::flat_offset(from), Self::flat_offset(to));
        }
        self.allocate_buckets(start, end.min(FLAT_START));
        self.allocate_buckets(start.max(flat_end), end);
    }

    /// The pool's flat region: decided the first time it is asked for,
    /// by reserving one (`FlatRegion::reserve`), for good. Lock-free:
    /// threads that race here each reserve, one installs its region with a
    /// CAS, and the others free theirs and take the winner's.
    fn flat_region(&self) -> &FlatRegion<T> {
        // Acquire pairs with the Release CAS below, in whichever thread
        // installed the decision: its fields are initialised.
        let decided = self.decision.load(Ordering::Acquire);
        if !decided.is_null() {
            // SAFETY: an installed decision lives until the storage drops,
            // which `&self` borrows, and is never written after the CAS that
            // published it (the load above read that CAS).
            return unsafe { &*decided };
        }
        self.decide()
    }

    /// [`flat_region`](Self::flat_region)'s first call.
    #[cold]
    #[inline(never)]
    fn decide(&self) -> &FlatRegion<T> {
        let fresh = Box::into_raw(Box::new(FlatRegion::<T>::reserve(
            self.first,
            self.flat_slots,
            self.max_slots,
        )));
        // Release publishes the fresh decision's fields; Acquire on failure
        // pairs with the winner's Release.
        match self.decision.compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            // SAFETY: installed just now; it lives until the storage drops.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` above and was
                // never shared: the CAS that would have installed it failed.
                // Dropping it unmaps its region, which nothing used.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as in `flat_region`: installed by the winner's
                // Release CAS, which the failed CAS read; lives until the
                // storage drops.
                unsafe { &*winner }
            }
        }
    }

    /// Allocates the buckets of the slots in `start..end`.
    fn allocate_buckets(&self, start: u32, end: u32) {
        let mut index = start as u64;
        while index < end as u64 {
            let at = self.locate(index as u32);
            // Relaxed: a biased pointer is only used after the Acquire load in `get`.
            if self.buckets[at.bucket].load(Ordering::Relaxed) == unallocated() {
                self.allocate_bucket(at.bucket);
            }
            // On to the next bucket.
            index += (Self::bucket_len(at.bucket) - at.offset) as u64;
        }
    }

    /// Commits the flat region's slots `from..end`, counted from
    /// [`FLAT_START`] (`end` at most the region's `reserved`); those below
    /// `from` are committed already, or being committed by a racing call.
    /// The pages behind them are mapped an eighth ahead of what is mapped
    /// already (in whole huge pages past the first 2 MiB, see
    /// `Region::round_up`), so that a growing pool makes a logarithmic
    /// number of system calls; the slots committed (its capacity) are exactly
    /// those asked for, as with an allocation. Mapped pages take memory only
    /// when first written.
    #[cold]
    fn commit_flat(&self, region: &FlatRegion<T>, from: usize, end: usize) {
        debug_assert!(from < end && end <= region.reserved);
        // Relaxed: a shortcut only; the count is published below.
        if end <= self.flat_committed.load(Ordering::Relaxed) {
            return;
        }
        // Under loom the slots were constructed with the region: nothing
        // to map.
        if !cfg!(all(test, handle_pool_loom)) {
            Self::map_flat(region, end);
        }
        // Every committer stores the region's first slot (the same value)
        // before it raises the count, so no lookup waits for the thread
        // that installed the region. Relaxed: published by the Release
        // below.
        self.flat.store(region.slots, Ordering::Relaxed);
        // Release pairs with the Acquire loads in `view` and `flat_slot`:
        // `flat` is stored and the slots' pages are readable and writable
        // (and zero where fresh: `FREE(0, 0)`) before any thread that sees
        // the count reads them. `fetch_max`: a racing committer may have
        // published more.
        self.flat_committed.fetch_max(end, Ordering::Release);
    }

    /// Maps the pages of `region` behind its slots below `end`.
    fn map_flat(region: &FlatRegion<T>, end: usize) {
        let Some(mapping) = &region.region else {
            unreachable!("flat slots without a region")
        };
        let bytes = end * core::mem::size_of::<Slot<T>>();
        // Acquire pairs with the Release `fetch_max` below, made by the
        // thread that mapped those bytes: its `mprotect` returned before.
        let mapped = region.mapped.load(Ordering::Acquire);
        if bytes > mapped {
            let target = mapping
                .round_up(bytes.max(mapped + mapped / 8))
                .min(mapping.len());
            if !mapping.commit(target) {
                std::alloc::handle_alloc_error(
                    std::alloc::Layout::from_size_align(target, core::mem::align_of::<Slot<T>>())
                        .expect("a reserved region's size is a valid layout"),
                );
            }
            // Release pairs with the Acquire load above, in other committers.
            region.mapped.fetch_max(target, Ordering::Release);
        }
    }

    #[cold]
    fn allocate_bucket(&self, bucket: usize) {
        let len = self.allocated_len(bucket);
        let fresh = Box::into_raw(new_slots::<T>(len)) as *mut Slot<T>;
        let biased = fresh.wrapping_sub(Self::bucket_start(bucket) as usize);
        // Release publishes the initialised slots to `get`'s Acquire load;
        // Acquire on failure is not needed: the loser only frees its own copy.
        if self.buckets[bucket]
            .compare_exchange(unallocated(), biased, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: `fresh` came from `Box::into_raw` of a slice of `len`
            // slots just above and was never shared: we lost the race.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
            return;
        }
        debug_assert!(
            bucket < KEPT,
            "bucket {bucket} is past the lookups' entries"
        );
        // Relaxed: never read to reach a slot (see `KEPT`). Not under loom,
        // where no leak checker runs: the models keep their atomics.
        if !cfg!(all(test, handle_pool_loom)) {
            self.buckets[KEPT + bucket].store(fresh, Ordering::Relaxed);
        }
    }

    /// The allocated buckets: table entry and the bucket's first slot.
    fn allocated(&self) -> impl Iterator<Item = (usize, *mut Slot<T>)> + '_ {
        // The entries lookups use; those from `KEPT` on only keep addresses.
        (0..KEPT).filter_map(|bucket| {
            // Relaxed: only counted or freed (under `&mut`), never read through here.
            let biased = self.buckets[bucket].load(Ordering::Relaxed);
            (biased != unallocated()).then(|| {
                (
                    bucket,
                    biased.wrapping_add(Self::bucket_start(bucket) as usize),
                )
            })
        })
    }

    /// Number of slots committed in the flat region and in allocated buckets.
    pub(crate) fn capacity(&self) -> usize {
        // Relaxed: a count for reporting, not used to reach slots.
        self.flat_committed.load(Ordering::Relaxed)
            + self
                .allocated()
                .map(|(bucket, _)| self.allocated_len(bucket))
                .sum::<usize>()
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

impl<T> Drop for Storage<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread uses the storage now.
        let decided = self.decision.load(Ordering::Relaxed);
        if !decided.is_null() {
            // SAFETY: the decision came from `Box::into_raw` in `decide`,
            // installed once, and `&mut self` means no reference into its
            // region is left. Dropping it unmaps the region.
            drop(unsafe { Box::from_raw(decided) });
        }
        for (bucket, start) in self.allocated() {
            let len = self.allocated_len(bucket);
            // SAFETY: `start` is the pointer `allocate_bucket` got from
            // `Box::into_raw` of `len` slots, and `&mut self` means no one
            // else uses it. Slots never drop their value cells: the pool
            // drops values.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(start, len)) });
        }
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "../unit_tests/storage.rs"]
mod tests;
