//! Inserting: a claim draws a position and an index with one `fetch_add`
//! (see "A round" in the module docs), and the value is published there.

use crate::handle::Handle;
use crate::slot::{Slot, SlotWord, NIL};
use crate::sync::Ordering;

use super::column::Cell;
use super::index::occupied_at;
use super::raw::RawDense;

/// A position and a sparse index claimed for an insert: the inserting
/// thread's alone until it publishes a value or abandons them.
pub(super) struct Claim<'a, T> {
    pool: &'a RawDense<T>,
    position: u32,
    cell: Cell<'a, T>,
    index: u32,
    sparse: &'a Slot<()>,
    /// The generation the new occupant gets.
    generation: u32,
}

impl<T> Claim<'_, T> {
    /// The handle the value will have.
    pub(super) fn handle(&self) -> Handle {
        Handle::new(self.index, self.generation)
    }

    /// Writes the value and makes it visible: the dense word first, then
    /// the sparse word, whose store is the insert's linearization point for
    /// lookups and removes (an iteration may yield the value a moment
    /// before).
    #[inline]
    pub(super) fn publish(self, value: T) -> Handle {
        // SAFETY: the position is this claim's alone (one `fetch_add` drew
        // it, and positions are not reused within a round): its word is
        // `FRESH`, its cell holds no value, and nobody reads the cell until
        // a word below says `OCCUPIED`.
        unsafe { self.cell.value.write(value) };
        let handle = self.handle();
        // The dense word before the sparse word. A remove decides on the
        // sparse word alone, then swaps the dense word to `REMOVED`: had
        // it found the sparse word `OCCUPIED` with the dense word still
        // `FRESH`, it would hand the value to reclamation, and the store
        // below would then bring the dropped value back to iterations and
        // compaction (loom: `dense_remove_between_an_inserts_two_stores`).
        // Release pairs with the Acquire loads of the dense word
        // (iteration, `handle_at`): the value is written before an
        // iteration yields it.
        self.cell
            .word
            .store(SlotWord::occupied(handle).to_bits(), Ordering::Release);
        // Release pairs with the Acquire loads of the sparse word in
        // lookups and with the remove's CAS: the value is written, the
        // dense word says `OCCUPIED` and the position's segment is
        // allocated before a thread that learns the position from this
        // word uses it.
        self.sparse.word.store(
            occupied_at(self.generation, self.position).to_bits(),
            Ordering::Release,
        );
        handle
    }

    /// Gives the claim up after its closure panicked: the position stays a
    /// hole (`FRESH`), and the index goes on the freed list with the
    /// generation it showed burnt (or is retired, at the limit).
    fn abandon(&self) {
        let vacant = SlotWord::vacated(self.generation, NIL, self.pool.config.max_generation);
        let (_, lane) = self.pool.lane();
        lane.free(self.sparse, self.index, vacant);
    }
}

impl<T> RawDense<T> {
    /// Claims the round's next position and index; `None` when the pool
    /// is full: no position left this round, or no index (the position
    /// claimed is then counted as a hole).
    #[inline]
    pub(super) fn claim(&self) -> Option<Claim<'_, T>> {
        // Relaxed: the counter only hands out distinct claims; what a claim's
        // position and index hold is published by the insert's own Release
        // stores, and what the round began with was written under `&mut`.
        let k = self.claims.fetch_add(1, Ordering::Relaxed);
        let limit = u64::from(self.config.max_slots);
        let position = u64::from(self.round.len) + k;
        if position >= limit {
            return None;
        }
        let position = position as u32;
        // Before anything can abandon the position: compaction visits it.
        self.column.ensure(position);
        let queued = self.round.queue.len() as u64;
        let index = if k < queued {
            self.round.queue[k as usize]
        } else {
            let fresh = u64::from(self.round.used) + (k - queued);
            if fresh >= limit {
                let (_, lane) = self.lane();
                lane.note_hole();
                return None;
            }
            let fresh = fresh as u32;
            self.sparse.ensure(fresh, fresh + 1);
            fresh
        };
        let sparse = self.sparse.slot(index);
        // Relaxed: the index is this claim's alone, and its vacant word was
        // written before the round began (a queued index, freed in an
        // earlier round, seen through `&mut`) or is the fresh word of a
        // slot just allocated.
        let vacant = SlotWord::from_bits(sparse.word.load(Ordering::Relaxed));
        Some(Claim {
            pool: self,
            position,
            cell: self.column.cell(position),
            index,
            sparse,
            generation: vacant.generation() + 1,
        })
    }

    /// Inserts `value`, or gives it back when the pool is full.
    #[inline]
    pub(crate) fn insert(&self, value: T) -> Result<Handle, T> {
        match self.claim() {
            Some(claim) => Ok(claim.publish(value)),
            None => Err(value),
        }
    }

    /// Inserts the value `f` makes from its handle; `None`, without calling
    /// `f`, when the pool is full. If `f` unwinds, the claim is abandoned:
    /// the handle it was shown stays stale forever.
    pub(crate) fn insert_with(&self, f: impl FnOnce(Handle) -> T) -> Option<Handle> {
        let claim = self.claim()?;
        /// Abandons the claim if `f` unwinds.
        struct OnUnwind<'c, 'a, T>(&'c Claim<'a, T>);
        impl<T> Drop for OnUnwind<'_, '_, T> {
            fn drop(&mut self) {
                self.0.abandon();
            }
        }
        let on_unwind = OnUnwind(&claim);
        let value = f(claim.handle());
        core::mem::forget(on_unwind);
        Some(claim.publish(value))
    }
}
