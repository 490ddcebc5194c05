//! Exclusive access (`&mut`): taking values out, retaining, reclaiming now.

use crate::handle::Handle;
use crate::lists::Chain;
use crate::slot::{keep_first, Panic, SlotWord, State, NIL};
use crate::sync::Ordering;

use super::cursor::Occupied;
use super::RawPool;

impl<T> RawPool<T> {
    /// Moves the value out of slot `index` and gives the slot back.
    ///
    /// # Safety
    /// Slot `index` is `OCCUPIED` and the caller has exclusive access.
    pub(super) unsafe fn take_exclusive(&self, index: u32) -> T {
        let slot = self.storage.slot(index);
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        // SAFETY: the caller guarantees OCCUPIED (initialised) and exclusivity.
        let value = unsafe { slot.take_value() };
        let vacant = SlotWord::vacated(word.generation(), NIL, self.config.max_generation);
        self.give_back(self.stripes.home(), index, vacant);
        value
    }

    pub(crate) fn take(&mut self, handle: Handle) -> Option<T> {
        self.occupied_slot(handle)?;
        // SAFETY: the slot was just seen OCCUPIED and `&mut self` keeps it so.
        Some(unsafe { self.take_exclusive(handle.index()) })
    }

    /// Keeps the values `keep` says to keep; a panic in `keep` (or in a
    /// value's `Drop`) leaves the pool consistent.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Handle, &mut T) -> bool) {
        for (handle, slot) in Occupied::new(&self.storage, self.slots_used(), Ordering::Relaxed) {
            // SAFETY: OCCUPIED means initialised; `&mut self` is exclusive.
            if !keep(handle, unsafe { slot.value_mut() }) {
                // SAFETY: the slot is OCCUPIED and we hold `&mut self`.
                drop(unsafe { self.take_exclusive(handle.index()) });
            }
        }
    }

    /// Drops, now, every value whose removal is still pending and makes its
    /// slot reusable at once; with `live`, the values still in the pool too
    /// (`clear` and the pool's drop), in the same pass. Every value is
    /// dropped, even if some `Drop` panics; returns the first such panic.
    pub(crate) fn reclaim_all(&mut self, live: bool) -> Option<Panic> {
        // Batches sealed before this point are discarded: their slots are
        // found by the scan below.
        self.reclaimer.begin_exclusive();
        for stripe in self.stripes.all_from(self.stripes.home()) {
            // Their slots are found by the scan below.
            let _ = self.stripes[stripe].removals.take_all();
            // SAFETY: `&mut self`: no section or revoker runs.
            let _ = unsafe { self.stripes[stripe].magazine.discard_removals() };
            if !core::mem::needs_drop::<T>() {
                // Batches reused unwalked left `REMOVED` words on the free
                // lists (see `reclaim::reclaim_batch`): made `FREE` here, so
                // that the scan below finds only removals still pending.
                self.stripes[stripe].free.mark_free_owned(&self.storage);
                // SAFETY: as above.
                unsafe { self.stripes[stripe].magazine.mark_free(&self.storage) };
            }
        }
        let max_generation = self.config.max_generation;
        let mut free = None;
        let mut first_panic = None;
        let mut cleared = 0isize;
        for (index, slot) in self.storage.slots(self.slots_used()) {
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            match word.state() {
                State::Removed => {}
                State::Occupied if live => cleared += 1,
                _ => continue,
            }
            // SAFETY: the value is initialised (REMOVED or OCCUPIED), and
            // `&mut self` proves no reference to it is left; a REMOVED slot's
            // batch, wherever it was (being filled, or sealed), was discarded
            // above and will not be reclaimed again.
            let (vacant, panic) =
                unsafe { slot.reclaim(word.generation(), Chain::link_to(free), max_generation) };
            if vacant.state() == State::Free {
                free = Some(Chain::prepend(free, index));
            }
            keep_first(&mut first_panic, panic);
        }
        let home = self.stripes.home();
        if let Some(chain) = free {
            self.stripes[home].free.push(&self.storage, chain);
        }
        // The live values went without a removal to count them.
        self.stripes[home].adjust_len(-cleared);
        first_panic
    }
}
