//! Removing under `&self`: the value's position becomes a hole, the value
//! is dropped after its grace period, its index is freed for a later round.

use crate::handle::Handle;
use crate::lists::SealedBatch;
use crate::reclaim::DroppingReclaimed;
use crate::slot::{discard, drop_catching, SlotWord, State, NIL};
use crate::stripe::StripeIndex;
use crate::sync::{AtomicU64, Ordering};

use super::index::position_for;
use super::raw::RawDense;

/// `remove`'s CAS on the dense word: `OCCUPIED(handle)` to `REMOVED(g, link)`.
/// The one thread that succeeds owns the value from then on.
#[inline]
fn try_remove(word: &AtomicU64, handle: Handle, link: u32) -> bool {
    // Acquire pairs with the Release store in `Claim::publish`: the winner
    // sees the initialised value it now owns and hands on to reclamation
    // (or, without drop glue, leaves to compaction).
    word.compare_exchange(
        SlotWord::occupied(handle).to_bits(),
        SlotWord::removed(handle.generation(), link).to_bits(),
        Ordering::Acquire,
        Ordering::Relaxed,
    )
    .is_ok()
}

impl<T> RawDense<T> {
    /// Removes the value `handle` refers to; `false` if it was not there.
    pub(crate) fn remove(&self, handle: Handle) -> bool {
        let Some(sparse) = self.sparse.find(handle.index()) else {
            return false;
        };
        // Acquire pairs with the Release store of the sparse word in
        // `Claim::publish`: the position's segment is allocated.
        let Some(position) = position_for(sparse.word.load(Ordering::Acquire), handle) else {
            return false;
        };
        let cell = self.column.cell(position);
        // A plain load first: a handle already removed costs no write.
        if cell.word.load(Ordering::Relaxed) != SlotWord::occupied(handle).to_bits() {
            return false;
        }
        let (home, lane) = self.lane();
        let mut sealed = None;
        if core::mem::needs_drop::<T>() {
            let removals = &lane.removals;
            let (link, current) = removals.head();
            if !try_remove(cell.word, handle, link) {
                return false;
            }
            let relink = |head| {
                cell.word.store(
                    SlotWord::removed(handle.generation(), head).to_bits(),
                    Ordering::Relaxed,
                )
            };
            sealed = removals.push(position, 1, current, self.config.batch, relink);
        } else if !try_remove(cell.word, handle, NIL) {
            return false;
        }
        // The index is ours since the CAS: stale lookups already fail on the
        // dense word; the sparse word goes vacant and onto the freed list.
        let vacant = SlotWord::vacated(handle.generation(), NIL, self.config.max_generation);
        lane.free(sparse, handle.index(), vacant);
        if let Some(full) = sealed {
            self.reclaimer.seal(home, full);
            // Values are dropped last, the pool consistent.
            self.reclaim(home);
        }
        true
    }

    /// Reclaims `stripe`'s sealed batches that no reader can still see:
    /// drops their values, their positions stay holes. Returns whether
    /// there were any.
    pub(super) fn reclaim(&self, stripe: StripeIndex) -> bool {
        self.reclaimer
            .reclaim_ready_with(stripe, |batch| self.reclaim_batch(batch))
    }

    /// Drops the values of a batch no reader can still see and marks their
    /// words `FREE`. A `Drop` that panics here is not the caller's business
    /// (it merely removed, or flushed): the panic is discarded, as the
    /// pool's reclamation does.
    fn reclaim_batch(&self, batch: SealedBatch) {
        // Values are dropped below, and a `Drop` may use a pool.
        let _dropping = DroppingReclaimed::enter();
        let mut position = batch.head;
        for _ in 0..batch.count {
            let cell = self.column.cell(position);
            // Relaxed: the batch's words were made visible to its sealer by
            // the removal batch's pushes and seal, and to us by the sealed
            // list's push and take (as in `reclaim::reclaim_batch`).
            let word = SlotWord::from_bits(cell.word.load(Ordering::Relaxed));
            debug_assert_eq!(word.state(), State::Removed, "batch position {position}");
            // SAFETY: the position is REMOVED, in a batch whose position in
            // the order of seals is below the reclaimer's horizon: no
            // reference to its value is left (see "Grace by announcement"
            // in `reclaim.md`), and no one else takes it (each sealed batch
            // is taken once, and compaction discards them all under `&mut`,
            // when none is taken). The value is initialised: only this walk
            // and compaction drop a REMOVED value.
            let value = unsafe { cell.value.read() };
            // Relaxed: only `&mut` passes read a hole's word for more than
            // "not OCCUPIED", after everything here.
            cell.word.store(
                SlotWord::free(word.generation(), word.link()).to_bits(),
                Ordering::Relaxed,
            );
            if let Some(panic) = drop_catching(value) {
                discard(panic);
            }
            position = word.link();
        }
    }

    /// Seals every stripe's partial removal batch and drops every removed
    /// value no reader can still see.
    pub(crate) fn flush(&self) {
        let home = self.stripes.home();
        for stripe in self.stripes.all_from(home) {
            if let Some(batch) = self.lanes[stripe.get()].removals.take_all() {
                self.reclaimer.seal(stripe, batch);
            }
        }
        for stripe in self.stripes.all_from(home) {
            self.reclaim(stripe);
        }
    }
}
