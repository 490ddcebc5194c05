//! Exclusive access (`&mut`): compaction, which ends a round (see
//! "Compaction" in the module docs), and the passes that begin with it:
//! taking values out, retaining, sorting. Each leaves positions
//! `0..round.len` live and the rest `FRESH`.

use core::cmp::Ordering as Order;
use core::mem::MaybeUninit;

use crate::handle::Handle;
use crate::slot::{drop_catching, keep_first, Panic, SlotWord, State, NIL};
use crate::sync::Ordering;

use super::index::{handle_in, occupied_at, queue_freed};
use super::raw::RawDense;

impl<T> RawDense<T> {
    /// Ends the round: fills every hole with the last live value (dropping
    /// the removed values still there), updates the index, and queues the
    /// indices freed this round. Every value is dropped even if some `Drop`
    /// panics; returns the first such panic, the pool dense and consistent.
    pub(crate) fn compact(&mut self) -> Option<Panic> {
        // Relaxed: `&mut self`.
        let claims = self.claims.load(Ordering::Relaxed);
        let holes: u64 = self.lanes.iter().map(|lane| u64::from(lane.holes())).sum();
        if claims == 0 && holes == 0 {
            // Nothing was inserted or removed since the last compaction: no
            // batch, no freed index, no hole. A `&mut` pass costs nothing.
            return None;
        }
        let end = self.end();
        let (len, first_panic) = if holes == 0 {
            // No removal this round, so no batch either.
            (end, None)
        } else {
            // Every batch, open or sealed, is discarded: `&mut` proves no
            // reader holds a reference, and the pass below finds their
            // values.
            self.reclaimer.begin_exclusive();
            for lane in self.lanes.iter() {
                let _ = lane.removals.take_all();
            }
            // Only a remove marks a part of the column, and each one that
            // marked counted a hole (it won, or lost to one that did).
            self.column.clear_marks();
            self.fill_holes(end)
        };
        debug_assert_eq!(u64::from(end - len), holes, "holes miscounted");
        // The round's inserts took the queue's first entries, then fresh
        // indices (see `claim`): as many as got a position.
        let limit = u64::from(self.config.max_slots);
        let taken = claims.min(limit - u64::from(self.round.len));
        let queued = self.round.queue.len() as u64;
        self.round.queue.drain(..taken.min(queued) as usize);
        let fresh = taken
            .saturating_sub(queued)
            .min(limit - u64::from(self.round.used));
        self.round.used += fresh as u32;
        // Then the indices freed this round, oldest first.
        let mut scratch = Vec::new();
        for lane in self.lanes.iter() {
            let (_, first) = lane.take();
            queue_freed(&self.sparse, first, &mut scratch, &mut self.round.queue);
        }
        self.round.len = len;
        self.claims.store(0, Ordering::Relaxed);
        first_panic
    }

    /// The compaction pass over positions `0..end`: returns the live count
    /// and the first panic of a removed value's `Drop`.
    fn fill_holes(&mut self, end: u32) -> (u32, Option<Panic>) {
        let mut first_panic = None;
        let (mut low, mut high) = (0u32, end);
        'fill: loop {
            // The next hole from below.
            while low < high && self.is_live(low) {
                low += 1;
            }
            if low == high {
                break;
            }
            self.clear_hole(low, &mut first_panic);
            // The last live value from above; the holes passed are cleared.
            loop {
                high -= 1;
                if high == low {
                    break 'fill;
                }
                if self.is_live(high) {
                    break;
                }
                self.clear_hole(high, &mut first_panic);
            }
            // SAFETY: `&mut self`; `high` is OCCUPIED and `low` a cleared hole.
            unsafe { self.move_value(high, low) };
            low += 1;
        }
        (low, first_panic)
    }

    /// Whether `position` holds a live value (`&mut`).
    fn is_live(&self, position: u32) -> bool {
        let word = self.column.cell(position).word;
        // Relaxed: `&mut self`.
        SlotWord::from_bits(word.load(Ordering::Relaxed)).state() == State::Occupied
    }

    /// Makes the hole at `position` `FRESH`, dropping its value if it still
    /// holds one (`REMOVED` with drop glue).
    fn clear_hole(&mut self, position: u32, first_panic: &mut Option<Panic>) {
        let cell = self.column.cell(position);
        // Relaxed: `&mut self`.
        let word = SlotWord::from_bits(cell.word.load(Ordering::Relaxed));
        cell.word
            .store(SlotWord::FRESH.to_bits(), Ordering::Relaxed);
        if word.state() == State::Removed && core::mem::needs_drop::<T>() {
            // SAFETY: REMOVED with drop glue: the value is initialised and
            // not dropped yet (reclamation marks what it drops `FREE`, and
            // its batches are discarded); `&mut self` proves no reference
            // to it is left; the word says `FRESH` from now on.
            let value = unsafe { cell.value.read() };
            keep_first(first_panic, drop_catching(value));
        }
    }

    /// Moves the value at `from` to `to` with its word, points its index at
    /// `to`, and leaves `from` `FRESH`.
    ///
    /// # Safety
    /// The caller has exclusive access (`&mut`, or a pass that holds it);
    /// `from` is `OCCUPIED` and `to` holds no value.
    unsafe fn move_value(&self, from: u32, to: u32) {
        let (source, target) = (self.column.cell(from), self.column.cell(to));
        // Relaxed: exclusive access.
        let word = source.word.load(Ordering::Relaxed);
        // SAFETY: the caller guarantees `from` holds an initialised value and
        // `to` none, and that no one else reads either; two positions'
        // cells never overlap.
        unsafe { core::ptr::copy_nonoverlapping(source.value, target.value, 1) };
        target.word.store(word, Ordering::Relaxed);
        source
            .word
            .store(SlotWord::FRESH.to_bits(), Ordering::Relaxed);
        self.point_index(handle_in(word), to);
    }

    /// Stores in `handle`'s sparse word that its value is at `position`.
    fn point_index(&self, handle: Handle, position: u32) {
        // Relaxed: exclusive access; the next round's readers get it through
        // whatever handed them the pool.
        self.sparse.slot(handle.index()).word.store(
            occupied_at(handle.generation(), position).to_bits(),
            Ordering::Relaxed,
        );
    }

    /// The handle of the live value at `position` (`&mut`, below `round.len`).
    fn live_handle(&self, position: u32) -> Handle {
        // Relaxed: exclusive access.
        handle_in(self.column.cell(position).word.load(Ordering::Relaxed))
    }

    /// Makes `handle`'s index vacant at once and queues it (`EXHAUSTED` at
    /// the generation limit, never queued). Exclusive, after compaction:
    /// the round has no claims.
    fn free_index(&mut self, handle: Handle) {
        let vacant = SlotWord::vacated(handle.generation(), NIL, self.config.max_generation);
        // Relaxed: exclusive access.
        self.sparse
            .slot(handle.index())
            .word
            .store(vacant.to_bits(), Ordering::Relaxed);
        if vacant.state() == State::Free {
            self.round.queue.push_back(handle.index());
        }
    }

    /// Takes the value at `position` (below `round.len`, after compaction)
    /// out of the pool and moves the last value into its place: the array
    /// stays dense. The handle is stale at once.
    pub(super) fn swap_remove(&mut self, position: u32) -> (Handle, T) {
        debug_assert!(position < self.round.len);
        let handle = self.live_handle(position);
        let cell = self.column.cell(position);
        // SAFETY: positions below `round.len` are live after compaction, and
        // `&mut self` is exclusive: the value is initialised and ours.
        let value = unsafe { cell.value.read() };
        // Relaxed: exclusive access.
        cell.word
            .store(SlotWord::FRESH.to_bits(), Ordering::Relaxed);
        let last = self.round.len - 1;
        if position != last {
            // SAFETY: `&mut self`; `last` is live, `position` now empty.
            unsafe { self.move_value(last, position) };
        }
        self.round.len = last;
        self.free_index(handle);
        (handle, value)
    }

    /// Removes the value `handle` refers to and returns it.
    pub(crate) fn take(&mut self, handle: Handle) -> Option<T> {
        let position = self.position(handle)?;
        Some(self.swap_remove(position).1)
    }

    /// Keeps the values `keep` says to keep, swap-removing the others as it
    /// goes (the last value moves into the gap and is visited next). A
    /// panic in `keep` or in a value's `Drop` leaves the pool dense and
    /// consistent: the values visited are kept or removed as decided, the
    /// rest kept.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Handle, &mut T) -> bool) {
        let mut position = 0;
        while position < self.round.len {
            let handle = self.live_handle(position);
            let value = self.column.cell(position).value;
            // SAFETY: live (below `round.len` after compaction), and `&mut
            // self` is exclusive for the call.
            if keep(handle, unsafe { &mut *value }) {
                position += 1;
            } else {
                // Dropped last: the pool is consistent if its `Drop` panics.
                drop(self.swap_remove(position).1);
            }
        }
    }

    /// Removes every value (after compaction), dropping each even if some
    /// `Drop` panics; returns the first such panic.
    pub(crate) fn clear(&mut self) -> Option<Panic> {
        let mut first_panic = None;
        while self.round.len > 0 {
            let (_, value) = self.swap_remove(self.round.len - 1);
            keep_first(&mut first_panic, drop_catching(value));
        }
        first_panic
    }

    /// Sorts the live values (after compaction) with `compare`, keeping
    /// every handle valid: positions are sorted first (a panic in `compare`
    /// leaves every value where it was), then the values moved.
    pub(crate) fn sort_by(&mut self, mut compare: impl FnMut(&T, &T) -> Order) {
        let values = self.value_pointers();
        let mut order: Vec<u32> = (0..self.round.len).collect();
        order.sort_by(|&a, &b| {
            // SAFETY: live values (after compaction), read only while the
            // sort runs, under `&mut self`.
            let (a, b) = unsafe { (&*values[a as usize], &*values[b as usize]) };
            compare(a, b)
        });
        // SAFETY: `&mut self`, and `order` is a permutation of the live
        // positions.
        unsafe { self.permute(&mut order) };
    }

    /// [`sort_by`](Self::sort_by) on a key.
    pub(crate) fn sort_by_key<K: Ord>(&mut self, mut key: impl FnMut(&T) -> K) {
        let values = self.value_pointers();
        let mut order: Vec<u32> = (0..self.round.len).collect();
        // SAFETY: as in `sort_by`.
        order.sort_by_key(|&p| key(unsafe { &*values[p as usize] }));
        // SAFETY: as in `sort_by`.
        unsafe { self.permute(&mut order) };
    }

    /// The value cell of every live position, in order (after compaction).
    fn value_pointers(&self) -> Vec<*mut T> {
        let mut values = Vec::with_capacity(self.round.len as usize);
        for run in self.column.runs(0, self.round.len) {
            values.extend((0..run.words.len()).map(|offset| run.values.wrapping_add(offset)));
        }
        values
    }

    /// Moves the live values so that position `k` holds what position
    /// `order[k]` held, each moved value's index following it; `order` is
    /// left as the identity.
    ///
    /// # Safety
    /// Exclusive access, after compaction; `order` is a permutation of
    /// `0..round.len`.
    unsafe fn permute(&mut self, order: &mut [u32]) {
        for start in 0..order.len() as u32 {
            if order[start as usize] == start {
                continue;
            }
            // The cycle through `start`: its value is held aside, every
            // position takes its source's value, the last takes the held one.
            let first = self.column.cell(start);
            let mut held = MaybeUninit::<T>::uninit();
            // SAFETY: `start` is live and the cell is not read again before
            // the cycle writes it; `held` is a distinct local.
            unsafe { core::ptr::copy_nonoverlapping(first.value, held.as_mut_ptr(), 1) };
            // Relaxed: exclusive access.
            let held_word = first.word.load(Ordering::Relaxed);
            let mut hole = start;
            loop {
                let source = order[hole as usize];
                order[hole as usize] = hole;
                let target = self.column.cell(hole);
                let word = if source == start {
                    // SAFETY: `hole`'s value has moved on; `held` holds the
                    // cycle's first value, written back exactly once.
                    unsafe { core::ptr::copy_nonoverlapping(held.as_ptr(), target.value, 1) };
                    held_word
                } else {
                    let from = self.column.cell(source);
                    // SAFETY: `hole`'s value has moved on (or is held), and
                    // `source`'s is still there: a permutation's cycle visits
                    // each position once.
                    unsafe { core::ptr::copy_nonoverlapping(from.value, target.value, 1) };
                    from.word.load(Ordering::Relaxed)
                };
                target.word.store(word, Ordering::Relaxed);
                self.point_index(handle_in(word), hole);
                if source == start {
                    break;
                }
                hole = source;
            }
        }
    }
}
