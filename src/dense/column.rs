//! The dense column: positions in segments that never move, each segment
//! a run of words and, apart from it, a run of values (see "Two tables"
//! and "The values' region" in the module docs).
//!
//! The pool's slot storage (`storage`) keeps a value beside its word, which
//! makes a lookup one cache line but can never give `&mut [T]`; here the
//! words and the values are apart. Segment `k` holds `first << k`
//! positions from `first * (2^k - 1)` on, so a position finds its segment
//! with one add and one bit scan. The first segment's values are an
//! allocation of their own; a column that outgrows it reserves its
//! *values' region* ([`FlatValues`]), where the values of the segments
//! from the second on lie one after another: a lookup there finds its
//! value with a subtraction and a comparison, and the values of those
//! segments are one slice. Where no region can be had, each segment's
//! values are an allocation of their own.
//!
//! Every position's value is also reachable through a second table, which
//! keeps each segment's values' pointer *biased* by the segment's first
//! position (the address position 0 would have if the segment reached down
//! to it), indexed by the bit scan itself: one add, one bit scan, one load
//! from the table and one scaled add. Lookups outside the region take it.
//!
//! Each segment also has a word of *marks*, one bit per 64th of the
//! segment: a remove sets its position's bit before it decides, so an
//! iteration under `&self` that finds a part of the segment below the
//! round's first position past the live values unmarked folds its values
//! as a slice without loading their words (see "Iteration under `&self`"
//! in the module docs).

use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use std::alloc::{self, Layout};

use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use super::flat::FlatValues;

/// Entries of the segment tables: with a first segment of `1 << shift`
/// positions, position `p` is in segment `log2(p + first) - shift`, below
/// 33 for every `u32` position whatever the shift. 64, so that the index
/// masked to the table proves itself in range without a bounds check; the
/// entries past the last segment stay null.
const SEGMENTS: usize = 64;

/// The words and values of the positions below a limit.
pub(super) struct Column<T> {
    /// Segment `k`'s words, null until allocated. Allocated after the
    /// segment's values, by every thread (see `allocate`): a segment whose
    /// words are non-null has its values.
    words: [AtomicPtr<AtomicU64>; SEGMENTS],
    /// Segment `k`'s values (uninitialised until an insert writes one),
    /// null until allocated; dangling for a zero-sized `T`.
    pub(super) values: [AtomicPtr<T>; SEGMENTS],
    /// Segment `k`'s values again at entry `k + shift`, biased: minus the
    /// segment's first position, so that position `p`'s value is entry
    /// `log2(p + first)` plus `p`. Stored (the same pointer by every thread
    /// that allocates the segment) before the segment's words, and read
    /// only for a segment whose words were seen.
    biased: [AtomicPtr<T>; SEGMENTS],
    /// Segment `k`'s marks: bit `b` is set once a remove of a position in
    /// the segment's `b`-th 64th (of at least one position) has begun this
    /// round. Cleared under `&mut` only, when the round ends.
    marks: [AtomicU64; SEGMENTS],
    /// The values' region, null until the column first allocates a segment
    /// past its first, then the decision for good (a region, or none:
    /// [`FlatValues::len`] 0). Freed with the column.
    flat: AtomicPtr<FlatValues<T>>,
    /// The decision's [`FlatValues::base`] and [`FlatValues::len`], for
    /// lookups: the region's base while `flat_len` says positions
    /// `first..first + flat_len` are in it; 0 until decided, and where
    /// there is no region. Each is stored (the same value by every thread
    /// that allocates a segment past the first) before a segment past the
    /// first is published, and only ever changes from its initial value to
    /// the decision's.
    flat_base: AtomicPtr<T>,
    flat_len: AtomicU32,
    /// At most this many positions past the first segment go to the
    /// values' region (`Config::flat_slots`).
    flat_cap: u32,
    /// log2 of the first segment's length.
    shift: u32,
    /// The first segment's length, `1 << shift`.
    first: u64,
    /// Positions below this exist; the segment that reaches past it is cut
    /// there.
    limit: u32,
    /// The column owns values (the pool drops them): its auto traits and
    /// drop check follow `T`'s, not those of the atomic pointers.
    _owns: PhantomData<T>,
}

/// One position: its word and its value cell.
pub(super) struct Cell<'a, T> {
    pub(super) word: &'a AtomicU64,
    /// Valid for reads and writes of one `T` for as long as the column
    /// lives; initialised as the word says (see the dense word's table).
    pub(super) value: *mut T,
}

/// The allocated positions of one segment within a range, in order:
/// `words[j]` and `values + j` are the range's `j`-th position there.
pub(super) struct Run<'a, T> {
    pub(super) words: &'a [AtomicU64],
    pub(super) values: *mut T,
    /// The run's first position.
    pub(super) start: u32,
    /// The run's first position's offset in its segment.
    pub(super) offset: u32,
    /// log2 of the positions a bit of `marks` covers.
    pub(super) mark_shift: u32,
    /// The segment's marks (see [`Column::mark`]).
    pub(super) marks: &'a AtomicU64,
    /// Whether the run's values lie in the values' region, where they
    /// continue the previous segment's in the same allocation (unless that
    /// is the first segment): what lets two runs be one slice.
    pub(super) in_region: bool,
}

impl<'a, T> Run<'a, T> {
    /// The run's values.
    ///
    /// # Safety
    /// Every value of the run is initialised, and the caller has exclusive
    /// access to them for `'a` (the pool borrowed mutably, each run handed
    /// out once).
    pub(super) unsafe fn values_mut(&self) -> &'a mut [T] {
        // SAFETY: `values` points at `words.len()` value cells of one
        // segment (see `Runs::next`), initialised and exclusively ours as
        // the caller guarantees.
        unsafe { core::slice::from_raw_parts_mut(self.values, self.words.len()) }
    }
}

impl<T> Column<T> {
    /// A column of `limit` positions whose first segment holds
    /// `1 << first_shift` (below 31), with a values' region for at most
    /// `flat_cap` positions past the first segment.
    pub(super) fn new(first_shift: u32, limit: u32, flat_cap: u32) -> Self {
        assert!(first_shift < 31, "a first segment below 2^31 positions");
        Column {
            words: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            values: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            biased: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            marks: core::array::from_fn(|_| AtomicU64::new(0)),
            flat: AtomicPtr::new(ptr::null_mut()),
            flat_base: AtomicPtr::new(ptr::null_mut()),
            flat_len: AtomicU32::new(0),
            flat_cap,
            shift: first_shift,
            first: 1 << first_shift,
            limit,
            _owns: PhantomData,
        }
    }

    /// The segment of `position` and the position's offset in it.
    #[inline(always)]
    fn locate(&self, position: u32) -> (usize, usize) {
        let shifted = position as u64 + self.first;
        let top = 63 - shifted.leading_zeros();
        (
            (top - self.shift) as usize & (SEGMENTS - 1),
            (shifted ^ (1u64 << top)) as usize,
        )
    }

    /// The first position of segment `segment`.
    #[inline(always)]
    pub(super) fn start(&self, segment: usize) -> u64 {
        ((1u64 << segment) - 1) << self.shift
    }

    /// The entry of segment `segment` in the values' table.
    #[inline(always)]
    fn entry(&self, segment: usize) -> usize {
        (segment + self.shift as usize) & (SEGMENTS - 1)
    }

    /// log2 of a segment's 64th, in positions (0 for segments of at most
    /// 64 positions, where a mark is one position).
    #[inline(always)]
    fn mark_shift(&self, segment: usize) -> u32 {
        (segment as u32 + self.shift).saturating_sub(6)
    }

    /// Marks `position`'s part of its segment as holding a hole made this
    /// round. Costs a write only for the first mark of a part.
    #[inline]
    pub(super) fn mark(&self, position: u32) {
        let (segment, offset) = self.locate(position);
        let bit = 1u64 << ((offset >> self.mark_shift(segment)) & 63);
        let marks = &self.marks[segment];
        // Relaxed: a mark is read by iterations after their guard's
        // announcement (a SeqCst fence, or the reclaimer's heavy barrier),
        // and set before the remove's CAS on the sparse word, before its
        // seal: the fences order it as they order the words (see "Iteration
        // under `&self`" in the module docs). A thread that learns of the
        // removal through the sparse word's Release CAS sees it too.
        if marks.load(Ordering::Relaxed) & bit == 0 {
            marks.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Clears every mark: the round ends (`&mut`).
    pub(super) fn clear_marks(&mut self) {
        for marks in &self.marks {
            // Relaxed: `&mut self`.
            marks.store(0, Ordering::Relaxed);
        }
    }

    /// Positions in segment `segment`: `first << segment`, cut at the limit.
    fn len(&self, segment: usize) -> usize {
        let start = self.start(segment);
        debug_assert!(
            start < self.limit as u64,
            "segment {segment} past the limit"
        );
        (1u64 << (segment as u32 + self.shift)).min(self.limit as u64 - start) as usize
    }

    /// Makes sure the segment of `position` (below the limit) is allocated.
    #[inline]
    pub(super) fn ensure(&self, position: u32) {
        let (segment, _) = self.locate(position);
        // Acquire pairs with the Release CASes in `allocate`: the words are
        // zero (`FRESH`) before this thread, or whoever it hands the
        // position to, uses them, and the values (stored before the words
        // by every thread that stores words) are allocated.
        if self.words[segment].load(Ordering::Acquire).is_null() {
            self.allocate(segment);
        }
    }

    /// Allocates what segment `segment` lacks: its values, then its words,
    /// each by a CAS whose loser frees its own copy. Every thread that
    /// stores the words has seen the values stored first.
    #[cold]
    #[inline(never)]
    fn allocate(&self, segment: usize) {
        let len = self.len(segment);
        // Acquire pairs with the Release CAS below, for the winner's pointer.
        let mut values = self.values[segment].load(Ordering::Acquire);
        if values.is_null() {
            let (ours, shared) = match self.in_region(segment) {
                Some(values) => (values, true),
                None => (new_values::<T>(len), false),
            };
            // Release pairs with the Acquire loads of this pointer (only the
            // pointer is published: the values are uninitialised); Acquire
            // on failure, for the winner's pointer.
            values = match self.values[segment].compare_exchange(
                ptr::null_mut(),
                ours,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => ours,
                Err(winners) => {
                    if shared {
                        // Every thread computes the same cells in the region.
                        debug_assert_eq!(winners, ours);
                    } else {
                        // SAFETY: `ours` came from `new_values(len)` just
                        // above and was never shared: we lost the race.
                        unsafe { free_values(ours, len) };
                    }
                    winners
                }
            };
        }
        // Relaxed: every thread that allocates stores this same pointer
        // before the words' Release CAS below, whose Acquire loads (in
        // `ensure`, `find`, `runs`, and through the sparse word in
        // `value_at`) order it before their reads.
        self.biased[self.entry(segment)].store(
            values.wrapping_sub(self.start(segment) as usize),
            Ordering::Relaxed,
        );
        if self.words[segment].load(Ordering::Acquire).is_null() {
            let words = Box::into_raw(new_words(len)).cast::<AtomicU64>();
            // Release pairs with the Acquire loads in `ensure`, `find` and
            // `runs`: the words are initialised (zero) before they are used,
            // and the values' pointer, stored or seen above, is visible.
            if self.words[segment]
                .compare_exchange(ptr::null_mut(), words, Ordering::Release, Ordering::Acquire)
                .is_err()
            {
                // SAFETY: `words` came from `Box::into_raw` of `len` words
                // just above and was never shared: we lost the race.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(words, len)) });
            }
        }
    }

    /// The column's values' region, decided now if it was not yet: the
    /// first thread to allocate a segment past the first reserves it, and
    /// a thread that loses the race to install its own drops it.
    #[cold]
    pub(super) fn flat(&self) -> &FlatValues<T> {
        // Acquire pairs with the Release CAS below: the decision's fields
        // are initialised.
        let mut flat = self.flat.load(Ordering::Acquire);
        if flat.is_null() {
            let ours = Box::into_raw(Box::new(FlatValues::<T>::reserve(
                self.first,
                self.limit,
                self.flat_cap,
            )));
            // Release pairs with the Acquire loads of the decision (here);
            // Acquire on failure, for the winner's.
            flat = match self.flat.compare_exchange(
                ptr::null_mut(),
                ours,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => ours,
                Err(winners) => {
                    // SAFETY: `ours` came from `Box::into_raw` just above
                    // and was never shared: we lost the race.
                    drop(unsafe { Box::from_raw(ours) });
                    winners
                }
            };
        }
        // SAFETY: a decision, once installed, lives as long as the column.
        unsafe { &*flat }
    }

    /// Segment `segment`'s values in the values' region, made usable, if
    /// the region holds the segment (whole); `None` for the first segment,
    /// and for those the region does not hold.
    fn in_region(&self, segment: usize) -> Option<*mut T> {
        if segment == 0 {
            return None;
        }
        let flat = self.flat();
        // Relaxed: these are ordered before the segment's publication by
        // the Release CAS of its values' pointer and of its words, which
        // follow (see `flat_base`): every thread stores the same values.
        self.flat_base.store(flat.base(), Ordering::Relaxed);
        self.flat_len.store(flat.len(), Ordering::Relaxed);
        if !self.held_by(segment, flat.len()) {
            return None;
        }
        let end = (self.start(segment) + self.len(segment) as u64 - self.first) as u32;
        if !flat.commit(end) {
            alloc::handle_alloc_error(values_layout::<T>(self.len(segment)));
        }
        let offset = (self.start(segment) - self.first) as usize;
        // In bounds of the region: `offset + len(segment)` is `end`, at most
        // its length (for a zero-sized `T` there is no region).
        Some(flat.base().wrapping_add(offset))
    }

    /// Whether a values' region of `flat_len` positions holds segment
    /// `segment` (whole): the one test of where a segment's values are.
    fn held_by(&self, segment: usize, flat_len: u32) -> bool {
        segment > 0
            && self.start(segment) + self.len(segment) as u64 - self.first <= u64::from(flat_len)
    }

    /// Whether segment `segment`'s values lie in the values' region (under
    /// `&mut`, or for a segment whose words were seen).
    pub(super) fn is_in_region(&self, segment: usize) -> bool {
        // Acquire: as in `flat`.
        let flat = self.flat.load(Ordering::Acquire);
        // SAFETY: a decision, once installed, lives as long as the column.
        !flat.is_null() && self.held_by(segment, unsafe { &*flat }.len())
    }

    /// Makes sure every position below `end` (at most the limit) is allocated.
    pub(super) fn ensure_below(&self, end: u32) {
        let mut position = 0u64;
        while position < end as u64 {
            let (segment, _) = self.locate(position as u32);
            self.ensure(position as u32);
            position = self.start(segment + 1);
        }
    }

    /// The cell at `position`, or `None` if it is at or past the limit or
    /// its segment is not allocated.
    #[inline(always)]
    pub(super) fn find(&self, position: u32) -> Option<Cell<'_, T>> {
        if position >= self.limit {
            return None;
        }
        let (segment, offset) = self.locate(position);
        // Acquire pairs with the Release CASes in `allocate`: non-null
        // words mean the values' pointer is stored and visible.
        let words = self.words[segment].load(Ordering::Acquire);
        if words.is_null() {
            return None;
        }
        // Relaxed: ordered by the Acquire load of the words above (every
        // thread that stores the words has stored or seen the values).
        let values = self.values[segment].load(Ordering::Relaxed);
        Some(Cell {
            // SAFETY: `words` holds `len(segment)` initialised words, and
            // `offset` is below that: `position` is below the limit and in
            // this segment. The segment lives as long as the column.
            word: unsafe { &*words.add(offset) },
            // In bounds of the segment's values, as above (for a
            // zero-sized `T`, a dangling pointer, which is enough).
            value: values.wrapping_add(offset),
        })
    }

    /// The value cell at `position`, for a position a lookup read from a
    /// sparse word: no limit or allocation test, no word; in the values'
    /// region its distance from `first`, elsewhere the segment found by one
    /// bit scan (see the module docs).
    ///
    /// # Safety
    /// `position` was read from an `OCCUPIED` sparse word with an Acquire
    /// load (or under `&mut`): the insert that stored it allocated the
    /// position's segment first (see `Claim::publish`), so the segment's
    /// values' pointer is non-null and visible here, and the position is
    /// below the limit.
    #[inline(always)]
    pub(super) unsafe fn value_at(&self, position: u32) -> NonNull<T> {
        debug_assert!(position < self.limit);
        // Past the first segment, in the values' region: its base plus the
        // distance from `first` (below the first segment the distance
        // wraps past every length).
        let past_first = u64::from(position).wrapping_sub(self.first);
        // Relaxed: the caller's Acquire load of the sparse word orders the
        // allocation of the position's segment, after which both were
        // stored (see `flat_base`), before these loads: for a position in
        // the region both are the decision's. A length still 0, or one the
        // position is past, sends it to the table, which is right for every
        // position.
        let value = if past_first < u64::from(self.flat_len.load(Ordering::Relaxed)) {
            self.flat_base
                .load(Ordering::Relaxed)
                .wrapping_add(past_first as usize)
        } else {
            // `| 1` changes nothing for a sum of at least `first >= 1`, and
            // tells the compiler the logarithm is of a non-zero number.
            let entry = (((position as u64 + self.first) | 1).ilog2() as usize) & (SEGMENTS - 1);
            // Relaxed: the caller's Acquire load of the sparse word orders
            // the insert's allocation (its Acquire load or Release CAS of
            // this pointer) before this load.
            let biased = self.biased[entry].load(Ordering::Relaxed);
            debug_assert!(!biased.is_null());
            // In bounds of the segment's values once unbiased.
            biased.wrapping_add(position as usize)
        };
        // SAFETY: either way a cell of an allocation the column holds (the
        // region's, or the segment's), which is not at address 0 (for a
        // zero-sized `T`, the dangling pointer plus nothing): the region's
        // base is a non-null mapping or allocation, and the segment's
        // values come from the allocator or are dangling.
        unsafe { NonNull::new_unchecked(value) }
    }

    /// The cell at `position`, which an insert or the index says was
    /// handed out.
    ///
    /// # Panics
    /// If its segment was never allocated: that would be a bug.
    #[inline]
    pub(super) fn cell(&self, position: u32) -> Cell<'_, T> {
        match self.find(position) {
            Some(cell) => cell,
            None => never_allocated(position),
        }
    }

    /// The allocated runs of positions in `start..end`, in order (a
    /// segment not allocated yet is skipped whole).
    pub(super) fn runs(&self, start: u32, end: u32) -> Runs<'_, T> {
        Runs {
            column: self,
            next: start,
            end: end.min(self.limit),
        }
    }

    /// The values of positions `0..end` as runs of memory (see
    /// [`LiveRuns`]). Every position below `end` is allocated: `end` is at
    /// most the live count at the start of the caller's round, set under
    /// `&mut` after every position below it was allocated, which orders
    /// the region's base and length (stored before) before this call.
    pub(super) fn live_runs(&self, end: u32) -> LiveRuns<'_, T> {
        // Relaxed: ordered by the round's start (see above).
        let flat_len = u64::from(self.flat_len.load(Ordering::Relaxed));
        let past_first = u64::from(end).saturating_sub(self.first);
        if past_first == 0 || past_first > flat_len {
            return LiveRuns {
                pair: [None, None],
                runs: Some(self.runs(0, end)),
            };
        }
        // Relaxed: as above, and the first segment is allocated.
        let first = self.values[0].load(Ordering::Relaxed);
        let flat = self.flat_base.load(Ordering::Relaxed);
        LiveRuns {
            pair: [
                Some((first, self.first as usize)),
                Some((flat, past_first as usize)),
            ],
            runs: None,
        }
    }

    /// Whether no remove has marked a position below `end` this round (the
    /// marks of the segments reaching below it are all clear).
    pub(super) fn unmarked_below(&self, end: u32) -> bool {
        if end == 0 {
            return true;
        }
        let (last, _) = self.locate(end - 1);
        // Relaxed: as in `Run::marks`'s readers, ordered by the guard's
        // announcement (see "Iteration under `&self`" in the module docs).
        self.marks[..=last]
            .iter()
            .all(|marks| marks.load(Ordering::Relaxed) == 0)
    }

    /// Where `start..end` should be cut in two for parallel work: the
    /// segment boundary nearest the middle if it is within a quarter of the
    /// range from it, else the middle. `None` if fewer than two positions.
    #[cfg(feature = "rayon")]
    pub(super) fn split_point(&self, start: u32, end: u32) -> Option<u32> {
        let len = end.checked_sub(start).filter(|&len| len >= 2)?;
        let middle = start + len / 2;
        let (segment, offset) = self.locate(middle);
        let below = middle - offset as u32;
        let above = self.start(segment + 1);
        let slack = len / 4;
        Some(if below > start && middle - below <= slack {
            below
        } else if above < end as u64 && above - middle as u64 <= slack as u64 {
            above as u32
        } else {
            middle
        })
    }

    /// Positions allocated.
    pub(super) fn capacity(&self) -> usize {
        (0..SEGMENTS)
            .take_while(|&segment| self.start(segment) < self.limit as u64)
            // Relaxed: a count for reporting.
            .filter(|&segment| !self.words[segment].load(Ordering::Relaxed).is_null())
            .map(|segment| self.len(segment))
            .sum()
    }
}

/// The allocated runs of a range of positions, from [`Column::runs`].
pub(super) struct Runs<'a, T> {
    column: &'a Column<T>,
    next: u32,
    end: u32,
}

impl<T> Runs<'_, T> {
    /// Positions left in the range (allocated or not).
    pub(super) fn positions_left(&self) -> usize {
        self.end.saturating_sub(self.next) as usize
    }

    /// The first position not yet visited.
    pub(super) fn next_position(&self) -> u32 {
        self.next
    }

    /// The end of the range.
    pub(super) fn end(&self) -> u32 {
        self.end
    }
}

impl<'a, T> Iterator for Runs<'a, T> {
    type Item = Run<'a, T>;

    #[inline]
    fn next(&mut self) -> Option<Run<'a, T>> {
        while self.next < self.end {
            let column = self.column;
            let (segment, offset) = column.locate(self.next);
            let segment_end = column.start(segment + 1).min(self.end as u64) as u32;
            let start = self.next;
            self.next = segment_end;
            // Acquire pairs with the Release CASes in `allocate`.
            let words = column.words[segment].load(Ordering::Acquire);
            if words.is_null() {
                // Claimed by an insert that has not allocated it yet: no
                // position in it holds a value.
                continue;
            }
            // Relaxed: ordered by the Acquire load of the words above.
            let values = column.values[segment].load(Ordering::Relaxed);
            let len = (segment_end - start) as usize;
            // Relaxed: ordered by the Acquire load of the words above (their
            // allocator stored it first, see `flat_base`); the length only
            // ever changes from 0 to the decision's, so one seen covering
            // the segment is the decision's.
            let in_region = column.held_by(segment, column.flat_len.load(Ordering::Relaxed));
            return Some(Run {
                // SAFETY: the segment holds `len(segment)` initialised words
                // from `offset` on at least `len` (the range ends within the
                // segment and below the limit); it lives as long as the column.
                words: unsafe { core::slice::from_raw_parts(words.add(offset), len) },
                values: values.wrapping_add(offset),
                start,
                mark_shift: column.mark_shift(segment),
                offset: offset as u32,
                marks: &column.marks[segment],
                in_region,
            });
        }
        None
    }
}

/// The values of a column's positions below a round's live count, as runs
/// of memory, from [`Column::live_runs`]: the first segment's, then the
/// values' region's as one run where it holds the rest, else a run per
/// segment.
pub(super) struct LiveRuns<'a, T> {
    /// The first segment's run and the region's, taken in turn.
    pair: [Option<(*mut T, usize)>; 2],
    /// Where the region does not hold every position past the first
    /// segment: the segments' runs.
    runs: Option<Runs<'a, T>>,
}

impl<T> Iterator for LiveRuns<'_, T> {
    /// The first value cell and the count of cells.
    type Item = (*mut T, usize);

    #[inline]
    fn next(&mut self) -> Option<(*mut T, usize)> {
        match &mut self.runs {
            Some(runs) => runs.next().map(|run| (run.values, run.words.len())),
            None => self.pair.iter_mut().find_map(Option::take),
        }
    }
}

impl<T> Drop for Column<T> {
    fn drop(&mut self) {
        for segment in 0..SEGMENTS {
            if self.start(segment) >= self.limit as u64 {
                break;
            }
            let len = self.len(segment);
            // Relaxed: `&mut self`, nobody else uses the column.
            let words = self.words[segment].load(Ordering::Relaxed);
            if !words.is_null() {
                // SAFETY: `words` came from `Box::into_raw` of `len` words in
                // `allocate`, and `&mut self` means no one else uses them.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(words, len)) });
            }
            let values = self.values[segment].load(Ordering::Relaxed);
            if !values.is_null() && !self.is_in_region(segment) {
                // SAFETY: `values` came from `new_values(len)` in `allocate`;
                // the pool has dropped every value in it (a column never
                // drops values), and no one else uses it.
                unsafe { free_values(values, len) };
            }
        }
        // Relaxed: `&mut self`.
        let flat = self.flat.load(Ordering::Relaxed);
        if !flat.is_null() {
            // SAFETY: the decision came from `Box::into_raw` in `flat`, and
            // `&mut self` means no one else uses it or the values in it
            // (the pool has dropped every one).
            drop(unsafe { Box::from_raw(flat) });
        }
    }
}

/// [`Column::cell`]'s panic, out of line.
#[cold]
#[inline(never)]
fn never_allocated(position: u32) -> ! {
    panic!("handle-pool bug: dense position {position} was handed out but never allocated")
}

/// `len` words, each `FRESH` (zero). With std atomics a zeroed allocation
/// is that (large segments then come from the OS as untouched zero pages);
/// loom's atomics must be constructed.
#[cfg(not(all(test, handle_pool_loom)))]
fn new_words(len: usize) -> Box<[AtomicU64]> {
    let layout = Layout::array::<AtomicU64>(len).expect("a segment fits the address space");
    if layout.size() == 0 {
        return Box::new([]);
    }
    // SAFETY: the layout has a non-zero size (checked above).
    let words = unsafe { alloc::alloc_zeroed(layout) }.cast::<AtomicU64>();
    if words.is_null() {
        alloc::handle_alloc_error(layout);
    }
    // SAFETY: a fresh allocation with the layout of `[AtomicU64; len]`, as
    // `Box<[AtomicU64]>` expects, and all-zero bytes are a valid `AtomicU64`.
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(words, len)) }
}

#[cfg(all(test, handle_pool_loom))]
fn new_words(len: usize) -> Box<[AtomicU64]> {
    (0..len).map(|_| AtomicU64::new(0)).collect()
}

/// The layout of a segment's `len` values: an array, starting on a cache
/// line, so that vector loads over a slice split no line for being placed
/// badly (a `u64` slice 8 bytes past a 16-byte boundary made loops over it
/// run measurably slower than the same loop over a `Vec`).
fn values_layout<T>(len: usize) -> Layout {
    Layout::array::<T>(len)
        .and_then(|layout| layout.align_to(64))
        .expect("a segment fits the address space")
}

/// Room for `len` values, uninitialised (dangling when it takes no bytes).
pub(super) fn new_values<T>(len: usize) -> *mut T {
    let layout = values_layout::<T>(len);
    if layout.size() == 0 {
        return NonNull::dangling().as_ptr();
    }
    // SAFETY: the layout has a non-zero size (checked above).
    let values = unsafe { alloc::alloc(layout) }.cast::<T>();
    if values.is_null() {
        alloc::handle_alloc_error(layout);
    }
    values
}

/// Frees room that [`new_values`] made.
///
/// # Safety
/// `values` came from `new_values::<T>(len)`, holds no value that still
/// needs dropping, and is not used afterwards.
pub(super) unsafe fn free_values<T>(values: *mut T, len: usize) {
    let layout = values_layout::<T>(len);
    if layout.size() != 0 {
        // SAFETY: the caller guarantees `values` came from `alloc` with this
        // layout and is not used again.
        unsafe { alloc::dealloc(values.cast::<u8>(), layout) };
    }
}
