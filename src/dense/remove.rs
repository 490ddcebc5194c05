//! Removing under `&self`: the value's position becomes a hole, the value
//! is dropped after its grace period, its index is freed for a later round.

use crate::handle::Handle;
use crate::hint::cold_path;
use crate::lists::SealedBatch;
use crate::reclaim::{DroppingReclaimed, Horizon};
use crate::slot::{discard, drop_catching, SlotWord, State, NIL};
use crate::stripe::StripeIndex;
use crate::sync::Ordering;

use super::index::position_for;
use super::raw::RawDense;

impl<T> RawDense<T> {
    /// Removes the value `handle` refers to; `false` if it was not there.
    ///
    /// The CAS of the sparse word from `OCCUPIED(g, p)` to `REMOVED(g, p)`
    /// decides between racing removers and is the remove's linearization
    /// point (see "A round" in the module docs); the winner then owns the
    /// value, marks the dense word `REMOVED`, hands the value to
    /// reclamation and the index to its stripe's freed list (`FREE` or
    /// `EXHAUSTED`). A remove that finds the sparse word `REMOVED(g, p)`
    /// lost, and helps (see `help_remove`).
    pub(crate) fn remove(&self, handle: Handle) -> bool {
        let Some(sparse) = self.sparse.find(handle.index()) else {
            return false;
        };
        // Acquire pairs with the Release store of the sparse word in
        // `Claim::publish`: the position's segment is allocated.
        let occupied = sparse.word.load(Ordering::Acquire);
        let Some(position) = position_for(occupied, handle) else {
            self.help_remove(occupied, handle);
            return false;
        };
        // Before the decision: an iteration that finds no mark here may
        // read the position's value without its word.
        self.column.mark(position);
        let removing = SlotWord::removed(handle.generation(), position);
        // AcqRel on success: Acquire pairs with the Release store in
        // `Claim::publish` (the winner sees the initialised value it now
        // owns); Release pairs with the Acquire loads of the sparse word in
        // lookups and in a losing remove, so a thread that sees the value
        // gone also sees the mark above. Acquire on failure, for the same
        // reason, from the winner's CAS.
        if let Err(actual) = sparse.word.compare_exchange(
            occupied,
            removing.to_bits(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // Another remove of the same handle won (nothing else writes an
            // OCCUPIED sparse word under `&self`).
            self.help_remove(actual, handle);
            return false;
        }
        let cell = self.column.cell(position);
        let (home, lane) = self.lane();
        let mut sealed = None;
        if core::mem::needs_drop::<T>() {
            let removals = &lane.removals;
            let (link, current) = removals.head();
            let removed = |head| {
                // A swap, not a store: a losing remove's help may CAS the
                // word from `OCCUPIED` meanwhile (see `help_remove`), and
                // this write must come after it. Relaxed: the value is this
                // thread's; readers of the dense word only need "not
                // OCCUPIED" from it, and reclamation and compaction read the
                // link after the batch's own ordering.
                cell.word.swap(
                    SlotWord::removed(handle.generation(), head).to_bits(),
                    Ordering::Relaxed,
                );
            };
            removed(link);
            sealed = removals.push(position, 1, current, self.config.batch, removed);
        } else {
            // A swap, Relaxed: as above.
            cell.word.swap(
                SlotWord::removed(handle.generation(), NIL).to_bits(),
                Ordering::Relaxed,
            );
        }
        // The index is ours since the CAS: it goes onto the freed list
        // (the sparse word `FREE(g, l)`, or `EXHAUSTED(g)`).
        let vacant = SlotWord::vacated(handle.generation(), NIL, self.config.max_generation);
        lane.free(sparse, handle.index(), vacant);
        if let Some(full) = sealed {
            self.reclaimer.seal(home, full);
            // Values are dropped last, the pool consistent.
            self.reclaim(home, &mut Horizon::unread());
        }
        true
    }

    /// What a remove of `handle` that found its sparse word `word`, not
    /// `OCCUPIED(handle, _)`, does before it returns `false`: if `word` is
    /// `REMOVED(g, p)` of the handle's generation, another remove won and
    /// may not have marked the dense word yet, and an iteration of this
    /// thread's after it returns must not yield the value. So CAS the dense
    /// word from `OCCUPIED(handle)` to `REMOVED(g, NIL)`: the winner's own
    /// store (with its batch's link) replaces it, or came first and the CAS
    /// fails. Any other word (vacant, or another generation's) needs
    /// nothing: a `FREE` or `EXHAUSTED` word of this generation is stored,
    /// `Release`, after the winner's dense store (see `Lane::free`), and
    /// the Acquire load or failed CAS that read it orders that store first.
    #[inline]
    fn help_remove(&self, word: u64, handle: Handle) {
        let word = SlotWord::from_bits(word);
        if word.state() != State::Removed || word.generation() != handle.generation() {
            return;
        }
        cold_path();
        let cell = self.column.cell(word.link());
        // Relaxed: only "not OCCUPIED" is published, to this thread's own
        // later loads (coherence); the value stays the winner's.
        let _ = cell.word.compare_exchange(
            SlotWord::occupied(handle).to_bits(),
            SlotWord::removed(handle.generation(), NIL).to_bits(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Reclaims `stripe`'s sealed batches that no reader can still see,
    /// judged against `horizon` (read now if it was not yet): drops their
    /// values, their positions stay holes. Returns whether there were any.
    pub(super) fn reclaim(&self, stripe: StripeIndex, horizon: &mut Horizon) -> bool {
        self.reclaimer
            .reclaim_ready_with(stripe, horizon, |batch| self.reclaim_batch(batch))
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
        // One horizon for every stripe, read after every seal above.
        let mut horizon = Horizon::unread();
        for stripe in self.stripes.all_from(home) {
            self.reclaim(stripe, &mut horizon);
        }
    }
}
