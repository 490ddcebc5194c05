//! Iterators over a dense pool: under `&self` over the positions in use,
//! skipping holes; under `&mut self` over the live values, which
//! compaction has made dense, segment by segment.

use core::iter::FusedIterator;
use core::marker::PhantomData;

use crate::handle::{Handle, PoolHandle};
use crate::slot::{drop_catching, keep_first};
use crate::sync::{AtomicU64, Ordering};

use super::column::{Column, LiveRuns, Run, Runs};
use super::index::{all_hold_values, handle_in, holds_value, holds_value_while_clean};
use super::raw::RawDense;

/// `(handle, &value)` for the positions in use, holes skipped: the cursor
/// under [`Iter`] and [`Values`].
///
/// It holds no guard, only the column and a range of positions: the guard
/// given to `iter` (a `Guard`, so announced) is borrowed for `'g` by whoever
/// made it, and every visit happens after its announcement, so a value
/// seen `OCCUPIED` here is not dropped before `'g` ends (see `get`).
struct Entries<'g, T> {
    column: &'g Column<T>,
    runs: Runs<'g, T>,
    /// The words of the current run not visited yet.
    words: core::slice::Iter<'g, AtomicU64>,
    /// The value cell of the next word in `words`.
    values: *const T,
    /// The round's live count when it began: positions below it held
    /// values then, and only a remove, which marks its position first,
    /// can have made a hole there since.
    clean_end: u32,
}

impl<'g, T> Entries<'g, T> {
    fn new(raw: &'g RawDense<T>) -> Self {
        Entries {
            column: &raw.column,
            runs: raw.column.runs(0, raw.end()),
            words: [].iter(),
            values: core::ptr::null(),
            clean_end: raw.round.len,
        }
    }

    /// Upper bound on the items left: the positions left to visit.
    fn bound(&self) -> usize {
        self.words.len() + self.runs.positions_left()
    }
}

impl<'g, T> Iterator for Entries<'g, T> {
    type Item = (Handle, &'g T);

    #[inline]
    fn next(&mut self) -> Option<(Handle, &'g T)> {
        loop {
            for word in self.words.by_ref() {
                let value = self.values;
                self.values = value.wrapping_add(1);
                // Acquire pairs with the Release store in `Claim::publish`:
                // the value is initialised once the word says OCCUPIED.
                let word = word.load(Ordering::Acquire);
                if holds_value(word) {
                    // SAFETY: OCCUPIED (Acquire), so initialised; protected
                    // for 'g by the guard (see the type's docs), and only
                    // `&mut` moves values.
                    return Some((handle_in(word), unsafe { &*value }));
                }
            }
            let run = self.runs.next()?;
            self.words = run.words.iter();
            self.values = run.values;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.bound()))
    }

    /// A loop per run, for `sum`, `for_each` and the like. In a run's
    /// clean parts (see [`walk_parts`]) a word is `OCCUPIED` or, if a
    /// remove this iteration does not see took its value, `REMOVED`: one
    /// sign test tells them apart, and the word is the handle.
    #[inline]
    fn fold<B, F>(self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        let checked = |words: &'g [AtomicU64], values: *const T, mut acc: B, f: &mut F| {
            for (offset, word) in words.iter().enumerate() {
                // Acquire: as in `next`.
                let word = word.load(Ordering::Acquire);
                if holds_value(word) {
                    // SAFETY: as in `next`; `offset` is within the run.
                    acc = f(acc, (handle_in(word), unsafe { &*values.add(offset) }));
                }
            }
            acc
        };
        let mut acc = checked(self.words.as_slice(), self.values, init, &mut f);
        for run in self.runs {
            acc = walk_parts(&run, self.clean_end, acc, |mut acc, range, clean| {
                let words = &run.words[range.clone()];
                let values = run.values.wrapping_add(range.start);
                if !clean {
                    return checked(words, values, acc, &mut f);
                }
                for (offset, word) in words.iter().enumerate() {
                    // Relaxed: the position's value was initialised before
                    // the round began (under `&mut`), and this load only
                    // tells whether a remove took it since.
                    let word = word.load(Ordering::Relaxed);
                    if holds_value_while_clean(word) {
                        // SAFETY: a clean part's value is initialised and
                        // protected for 'g by the guard (see `walk_parts`),
                        // and `offset` is within the part.
                        acc = f(acc, (handle_in(word), unsafe { &*values.add(offset) }));
                    }
                }
                acc
            });
        }
        acc
    }
}

/// Positions whose words are checked before their values are read.
const BLOCK: usize = 32;

/// Folds the values of `words` (cells from `values` on) whose words hold
/// one, a block of [`BLOCK`] at a time: the block's words are loaded first,
/// and a block whose every word holds a value is folded as one slice of
/// values, a loop the compiler can vectorise. A block with a hole is walked
/// as `next` walks it, its words loaded again: each value yielded was in
/// the pool when its word was last loaded, and each position yields at
/// most once.
#[inline(always)]
fn fold_checked<'g, T: 'g, B>(
    words: &'g [AtomicU64],
    values: *const T,
    mut acc: B,
    f: &mut impl FnMut(B, &'g T) -> B,
) -> B {
    let mut blocks = words.chunks_exact(BLOCK);
    let mut start = 0;
    for block in &mut blocks {
        // Acquire: as in `next`.
        let all = all_hold_values(block.iter().map(|word| word.load(Ordering::Acquire)));
        if all {
            // SAFETY: every position of the block held a value when its
            // word was loaded (Acquire, so initialised), and the guard
            // protects them for 'g (see `Entries`); the block lies within
            // the run.
            let values = unsafe { core::slice::from_raw_parts(values.add(start), BLOCK) };
            acc = values.iter().fold(acc, &mut *f);
        } else {
            for (offset, word) in block.iter().enumerate() {
                // Acquire: as in `next`.
                if holds_value(word.load(Ordering::Acquire)) {
                    // SAFETY: as in `next`, for this position.
                    acc = f(acc, unsafe { &*values.add(start + offset) });
                }
            }
        }
        start += BLOCK;
    }
    for (offset, word) in blocks.remainder().iter().enumerate() {
        // Acquire: as in `next`.
        if holds_value(word.load(Ordering::Acquire)) {
            // SAFETY: as in `next`.
            acc = f(acc, unsafe { &*values.add(start + offset) });
        }
    }
    acc
}

/// Values to be folded as one slice, read without their words: parts of
/// runs that follow one another in one allocation (a segment, or the
/// values' region across segments) join here, so that a compacted pool's
/// values in the region are one loop, not one per segment.
struct Pending<T> {
    values: *const T,
    len: usize,
    /// Whether the cells lie in the values' region.
    in_region: bool,
}

impl<T> Pending<T> {
    fn new() -> Self {
        Pending {
            values: core::ptr::null(),
            len: 0,
            in_region: false,
        }
    }

    /// Adds `len` cells from `values` on, each of them initialised and
    /// protected for 'g (see [`fold_run`]), in one allocation with the
    /// pending ones if `same` says so and they follow them (else the
    /// pending ones are folded first, to keep position order).
    #[inline(always)]
    fn add<'g, B>(
        &mut self,
        values: *const T,
        len: usize,
        same: bool,
        acc: B,
        f: &mut impl FnMut(B, &'g T) -> B,
    ) -> B
    where
        T: 'g,
    {
        if same && self.len > 0 && values == self.values.wrapping_add(self.len) {
            self.len += len;
            return acc;
        }
        let acc = self.flush(acc, f);
        self.values = values;
        self.len = len;
        acc
    }

    /// Folds the pending values.
    #[inline(always)]
    fn flush<'g, B>(&mut self, acc: B, f: &mut impl FnMut(B, &'g T) -> B) -> B
    where
        T: 'g,
    {
        let len = core::mem::take(&mut self.len);
        if len == 0 {
            return acc;
        }
        // SAFETY: `add` joined only cells of one allocation that follow one
        // another, each initialised and protected for 'g (its caller's
        // contract).
        let values = unsafe { core::slice::from_raw_parts(self.values, len) };
        values.iter().fold(acc, f)
    }
}

/// Walks the positions of `run` as parts, in position order:
/// `part(acc, range, true)` for the parts that no remove has marked this
/// round and that lie below `clean_end` (*clean* parts), whose values may
/// be read without their words, `part(acc, range, false)` for the rest.
///
/// Why a clean part holds only values that were in the pool during the
/// iteration, each once, and none dropped before the guard is: every
/// position below `clean_end` held a value when the round began; inserts
/// never write there; a remove marks its position's part before its CAS
/// decides, and before it seals the value's batch. The marks are loaded
/// after the guard's announcement, so either the mark of a remove is seen
/// here (and its part is not clean) or its batch is sealed after the guard
/// announced, and waits for it (see "Grace by announcement" in
/// `reclaim.md`: the fences that order the announcement against the seal
/// order the mark as they order the words). A remove whose mark is not
/// seen is concurrent with the iteration, whose value may be yielded. So a
/// clean part's dense words are `OCCUPIED` (as the round began) or
/// `REMOVED` (by such a remove), never `FREE` (its reclamation waits for
/// the guard) nor `FRESH` (only `&mut` empties a position below
/// `clean_end`).
#[inline(always)]
fn walk_parts<T, B>(
    run: &Run<'_, T>,
    clean_end: u32,
    mut acc: B,
    mut part: impl FnMut(B, core::ops::Range<usize>, bool) -> B,
) -> B {
    let len = run.words.len();
    // Words of the run below `clean_end` (positions are below 2^32).
    let below = (clean_end.saturating_sub(run.start) as usize).min(len);
    // Relaxed: see above; the guard's announcement orders it.
    let marks = run.marks.load(Ordering::Relaxed);
    let (shift, offset) = (run.mark_shift, run.offset as usize);
    let mut i = 0;
    while i < below {
        // The parts from the one holding the run's `i`-th word on: whether
        // that one is marked, and how many parts in a row are as it is.
        let first = (offset + i) >> shift;
        let ahead = marks >> (first & 63);
        let (marked, parts) = if ahead & 1 == 0 {
            (false, ahead.trailing_zeros())
        } else {
            (true, (!ahead).trailing_zeros())
        };
        let end = (((first + parts as usize) << shift) - offset).min(below);
        acc = part(acc, i..end, !marked);
        i = end;
    }
    if below < len {
        acc = part(acc, below..len, false);
    }
    acc
}

/// Folds the values of one run: its clean parts (see [`walk_parts`]) as
/// slices of values, without their words, through `pending`, which joins
/// them with the parts before them in the same allocation; the rest as
/// [`fold_checked`] does.
#[inline(always)]
fn fold_run<'g, T: 'g, B>(
    run: Run<'g, T>,
    clean_end: u32,
    pending: &mut Pending<T>,
    acc: B,
    f: &mut impl FnMut(B, &'g T) -> B,
) -> B {
    // Within the run, and from the run before if both are in the region.
    let mut same = run.in_region && pending.in_region;
    walk_parts(&run, clean_end, acc, |mut acc, range, clean| {
        let values = run.values.wrapping_add(range.start);
        if clean {
            // The part's values are initialised and protected for 'g (see
            // `walk_parts`), and lie within the run.
            acc = pending.add(values, range.len(), same, acc, f);
            pending.in_region = run.in_region;
        } else {
            acc = pending.flush(acc, f);
            acc = fold_checked(&run.words[range], values, acc, f);
        }
        same = true;
        acc
    })
}

impl<'g, T> Entries<'g, T> {
    /// [`fold`](Iterator::fold) over the values alone, a run at a time (see
    /// [`fold_run`]); what `next` left of a run, checked.
    #[inline]
    fn fold_values<B>(self, init: B, mut f: impl FnMut(B, &'g T) -> B) -> B {
        let mut acc = init;
        let mut runs = self.runs;
        if runs.next_position() == 0 && self.column.unmarked_below(self.clean_end) {
            // No remove has marked a position below `clean_end` this round
            // (and `next` has not begun): every one of them is clean (see
            // `fold_run`), and their values are the live runs of a pool
            // compacted at the round's start, two slices where the values'
            // region holds them. The positions from `clean_end` on are
            // checked, as `fold_run` would.
            for (values, len) in self.column.live_runs(self.clean_end) {
                // SAFETY: the cells of positions below `clean_end`, one
                // allocation's, each initialised and protected for 'g by the
                // guard (see `fold_run`).
                let values = unsafe { core::slice::from_raw_parts(values, len) };
                acc = values.iter().fold(acc, &mut f);
            }
            runs = self.column.runs(self.clean_end, runs.end());
        } else {
            acc = fold_checked(self.words.as_slice(), self.values, acc, &mut f);
        }
        let mut pending = Pending::new();
        for run in runs {
            acc = fold_run(run, self.clean_end, &mut pending, acc, &mut f);
        }
        pending.flush(acc, &mut f)
    }
}

/// Iterator over `(handle, &value)`, from [`DensePool::iter`](super::DensePool::iter):
/// the positions in use, in order, holes skipped.
///
/// Each item was in the pool when its position was visited.
///
/// ```
/// let pool: handle_pool::DensePool<u8> = handle_pool::DensePool::new();
/// pool.insert(1);
/// pool.insert(2);
/// let guard = handle_pool::pin();
/// assert_eq!(pool.iter(&guard).map(|(_, v)| *v as u32).sum::<u32>(), 3);
/// ```
pub struct Iter<'g, T, H> {
    entries: Entries<'g, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'g, T, H> Iter<'g, T, H> {
    pub(super) fn new(raw: &'g RawDense<T>) -> Self {
        Iter {
            entries: Entries::new(raw),
            _handle: PhantomData,
        }
    }
}

impl<'g, T, H: PoolHandle> Iterator for Iter<'g, T, H> {
    type Item = (H, &'g T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (handle, value) = self.entries.next()?;
        Some((H::from_handle(handle), value))
    }

    /// `(0, Some(positions left to visit))`.
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }

    #[inline]
    fn fold<B, F: FnMut(B, Self::Item) -> B>(self, init: B, mut f: F) -> B {
        self.entries.fold(init, |acc, (handle, value)| {
            f(acc, (H::from_handle(handle), value))
        })
    }
}

impl<T, H: PoolHandle> FusedIterator for Iter<'_, T, H> {}

/// Iterator over `&value`, from [`DensePool::values`](super::DensePool::values),
/// with the guarantees of [`Iter`].
///
/// ```
/// let pool: handle_pool::DensePool<u32> = (1..=4).collect();
/// let guard = handle_pool::pin();
/// assert_eq!(pool.values(&guard).sum::<u32>(), 10);
/// ```
pub struct Values<'g, T> {
    entries: Entries<'g, T>,
}

impl<'g, T> Values<'g, T> {
    pub(super) fn new(raw: &'g RawDense<T>) -> Self {
        Values {
            entries: Entries::new(raw),
        }
    }
}

impl<'g, T> Iterator for Values<'g, T> {
    type Item = &'g T;

    #[inline]
    fn next(&mut self) -> Option<&'g T> {
        self.entries.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }

    /// The values a block of words at a time (see `Entries::fold_values`).
    #[inline]
    fn fold<B, F: FnMut(B, &'g T) -> B>(self, init: B, f: F) -> B {
        self.entries.fold_values(init, f)
    }
}

impl<T> FusedIterator for Values<'_, T> {}

// SAFETY: `Iter` and `Values` hand out `&T` (and handles) from positions
// the guard protects, read through atomics and a pointer into the column:
// sending or sharing one sends or shares those `&T`, which needs `T: Sync`,
// as for `std::slice::Iter`.
unsafe impl<T: Sync, H> Send for Iter<'_, T, H> {}
// SAFETY: as above; `&Iter` reaches nothing (`next` needs `&mut`).
unsafe impl<T: Sync, H> Sync for Iter<'_, T, H> {}
// SAFETY: as for `Iter`.
unsafe impl<T: Sync> Send for Values<'_, T> {}
// SAFETY: as for `Iter`.
unsafe impl<T: Sync> Sync for Values<'_, T> {}

/// Iterator over `(handle, &mut value)`, from
/// [`DensePool::iter_mut`](super::DensePool::iter_mut): the live values in
/// position order, after compaction.
///
/// ```
/// let mut pool: handle_pool::DensePool<u8> = (1..=3).collect();
/// pool.iter_mut().for_each(|(_, v)| *v *= 2);
/// assert_eq!(pool.values_mut().map(|v| *v as u32).sum::<u32>(), 12);
/// ```
pub struct IterMut<'a, T, H> {
    runs: Runs<'a, T>,
    words: core::slice::Iter<'a, AtomicU64>,
    values: core::slice::IterMut<'a, T>,
    left: usize,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T, H> IterMut<'a, T, H> {
    /// The live values of `raw`, which the caller has just compacted and
    /// borrows mutably for `'a`.
    pub(super) fn new(raw: &'a mut RawDense<T>) -> Self {
        IterMut {
            runs: raw.column.runs(0, raw.round.len),
            words: [].iter(),
            values: [].iter_mut(),
            left: raw.round.len as usize,
            _handle: PhantomData,
        }
    }
}

impl<'a, T, H: PoolHandle> Iterator for IterMut<'a, T, H> {
    type Item = (H, &'a mut T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let (Some(word), Some(value)) = (self.words.next(), self.values.next()) {
                self.left -= 1;
                // Relaxed: the pool is borrowed mutably.
                return Some((
                    H::from_handle(handle_in(word.load(Ordering::Relaxed))),
                    value,
                ));
            }
            let run = self.runs.next()?;
            self.words = run.words.iter();
            // SAFETY: the run's positions are live (below the compacted
            // length) and the pool is borrowed mutably for 'a: their values
            // are initialised, and handed out once each.
            self.values = unsafe { run.values_mut() }.iter_mut();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T, H: PoolHandle> ExactSizeIterator for IterMut<'_, T, H> {}
impl<T, H: PoolHandle> FusedIterator for IterMut<'_, T, H> {}

/// Iterator over `&mut value`, from
/// [`DensePool::values_mut`](super::DensePool::values_mut): the live values
/// in position order, a slice at a time (see [`SlicesMut`]).
///
/// ```
/// let mut pool: handle_pool::DensePool<u32> = (1..=4).collect();
/// for v in pool.values_mut() { *v *= 10; }
/// assert_eq!(pool.values_mut().map(|v| *v).sum::<u32>(), 100);
/// ```
pub struct ValuesMut<'a, T> {
    slices: SlicesMut<'a, T>,
    values: core::slice::IterMut<'a, T>,
    left: usize,
}

impl<'a, T> ValuesMut<'a, T> {
    pub(super) fn new(raw: &'a mut RawDense<T>) -> Self {
        let left = raw.round.len as usize;
        ValuesMut {
            slices: SlicesMut::new(raw),
            values: [].iter_mut(),
            left,
        }
    }
}

impl<'a, T> Iterator for ValuesMut<'a, T> {
    type Item = &'a mut T;

    #[inline]
    fn next(&mut self) -> Option<&'a mut T> {
        loop {
            if let Some(value) = self.values.next() {
                self.left -= 1;
                return Some(value);
            }
            self.values = self.slices.next()?.iter_mut();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }

    /// A loop per slice, which the compiler can vectorise.
    #[inline]
    fn fold<B, F: FnMut(B, &'a mut T) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = self.values.fold(init, &mut f);
        for slice in self.slices {
            acc = slice.iter_mut().fold(acc, &mut f);
        }
        acc
    }
}

impl<T> ExactSizeIterator for ValuesMut<'_, T> {}
impl<T> FusedIterator for ValuesMut<'_, T> {}

/// Iterator over the live values as slices, from
/// [`DensePool::as_mut_slices`](super::DensePool::as_mut_slices): the
/// first segment's values, then those of the values' region as one slice
/// (or one per segment where there is none), in position order, so that
/// the first slice starts at position 0 and each next one where the
/// previous ended.
///
/// ```
/// let mut pool: handle_pool::DensePool<u64> = (0..1000).collect();
/// let mut seen = 0;
/// for slice in pool.as_mut_slices() {
///     for v in slice.iter_mut() { *v += 1; }
///     seen += slice.len();
/// }
/// assert_eq!(seen, 1000);
/// ```
pub struct SlicesMut<'a, T> {
    runs: LiveRuns<'a, T>,
    _values: PhantomData<&'a mut T>,
}

impl<'a, T> SlicesMut<'a, T> {
    pub(super) fn new(raw: &'a mut RawDense<T>) -> Self {
        SlicesMut {
            runs: raw.column.live_runs(raw.round.len),
            _values: PhantomData,
        }
    }
}

impl<'a, T> Iterator for SlicesMut<'a, T> {
    type Item = &'a mut [T];

    #[inline]
    fn next(&mut self) -> Option<&'a mut [T]> {
        let (values, len) = self.runs.next()?;
        // SAFETY: the run's positions are live (below the compacted length)
        // and the pool is borrowed mutably for 'a: the values are
        // initialised, and each run is handed out once; its cells are one
        // allocation's (a segment's, or the values' region's).
        Some(unsafe { core::slice::from_raw_parts_mut(values, len) })
    }
}

impl<T> FusedIterator for SlicesMut<'_, T> {}

// SAFETY: these hand out `&mut T` (and handles), one per live position,
// from a pool borrowed mutably: sending one sends those `&mut T`, which
// needs `T: Send`, as for `std::slice::IterMut`; their own state is a
// cursor and a shared borrow of the column's segment pointers, only loaded.
unsafe impl<T: Send, H> Send for IterMut<'_, T, H> {}
// SAFETY: `&IterMut` reaches nothing (`next` needs `&mut`); `Sync` follows
// `T: Sync`, as for `std::slice::IterMut`.
unsafe impl<T: Sync, H> Sync for IterMut<'_, T, H> {}
// SAFETY: as for `IterMut`.
unsafe impl<T: Send> Send for ValuesMut<'_, T> {}
// SAFETY: as for `IterMut`.
unsafe impl<T: Sync> Sync for ValuesMut<'_, T> {}
// SAFETY: as for `IterMut`.
unsafe impl<T: Send> Send for SlicesMut<'_, T> {}
// SAFETY: as for `IterMut`.
unsafe impl<T: Sync> Sync for SlicesMut<'_, T> {}

/// Draining iterator over `(handle, value)`, from
/// [`DensePool::drain`](super::DensePool::drain): takes the values from the
/// last position down, so the pool stays dense at every step.
///
/// Dropping it early removes (and drops) the values not yet yielded.
///
/// ```
/// let mut pool: handle_pool::DensePool<u8> = (1..=3).collect();
/// let last = pool.drain().next();
/// assert_eq!(last.map(|(_, v)| v), Some(3));
/// assert!(pool.is_empty());
/// ```
pub struct Drain<'a, T, H> {
    raw: &'a mut RawDense<T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T, H> Drain<'a, T, H> {
    pub(super) fn new(raw: &'a mut RawDense<T>) -> Self {
        Drain {
            raw,
            _handle: PhantomData,
        }
    }
}

impl<T, H: PoolHandle> Iterator for Drain<'_, T, H> {
    type Item = (H, T);

    fn next(&mut self) -> Option<(H, T)> {
        let last = self.raw.round.len.checked_sub(1)?;
        let (handle, value) = self.raw.swap_remove(last);
        Some((H::from_handle(handle), value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.raw.round.len as usize;
        (left, Some(left))
    }
}

impl<T, H: PoolHandle> ExactSizeIterator for Drain<'_, T, H> {}
impl<T, H: PoolHandle> FusedIterator for Drain<'_, T, H> {}

impl<T, H> Drop for Drain<'_, T, H> {
    /// Drops the values not taken, every one even if some `Drop` panics,
    /// then re-raises the first such panic.
    fn drop(&mut self) {
        let mut first_panic = None;
        while let Some(last) = self.raw.round.len.checked_sub(1) {
            let (_, value) = self.raw.swap_remove(last);
            keep_first(&mut first_panic, drop_catching(value));
        }
        if let Some(panic) = first_panic {
            std::panic::resume_unwind(panic);
        }
    }
}
