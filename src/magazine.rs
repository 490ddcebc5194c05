#![doc = include_str!("../docs/magazine.md")]

use crate::lists::{Chain, FreeList, RemovalBatch, SealedBatch};
use crate::membarrier::{heavy_fence, light_fence};
use crate::slot::{Slot, SlotWord, NIL};
use crate::storage::Storage;
use crate::sync::{yield_now, AtomicU64, Ordering};

/// `revoking` once the owner retired the magazine for good (see
/// [`Section::retire`]): no section and no revoker takes it again.
const RETIRED: u64 = 2;

/// One thread's free list and removal batch (see the module docs).
pub(crate) struct Magazine {
    /// `1` while the owner is inside a section; written by the owner only.
    active: AtomicU64,
    /// `1` while a revoker holds the magazine.
    revoking: AtomicU64,
    free: FreeList,
    removals: RemovalBatch,
    /// Slots refilled from the stripe's shared list, mod 2^32: each raised
    /// that list's pop count by one without an insert (see
    /// [`Section::refill`]).
    refilled: AtomicU64,
    /// The counts when a sweep last looked ([`Magazine::idle_and_holding`]).
    swept: AtomicU64,
}

/// The owner inside a section: the lists are its own until this drops.
pub(crate) struct Section<'a> {
    magazine: &'a Magazine,
}

/// A revoker holding a magazine: the lists are its own until this drops.
pub(crate) struct Revoked<'a> {
    magazine: &'a Magazine,
}

impl Magazine {
    pub(crate) fn new() -> Self {
        Magazine {
            active: AtomicU64::new(0),
            revoking: AtomicU64::new(0),
            free: FreeList::new(),
            removals: RemovalBatch::new(),
            refilled: AtomicU64::new(0),
            swept: AtomicU64::new(0),
        }
    }

    /// Enters a section. Call only from the owner, the thread whose number
    /// is this magazine's index. `None` while a revoker holds it, or while
    /// the owner is inside a section already (a signal handler that
    /// interrupted it and uses the pool): use the stripe's shared lists
    /// then, which take no section, so the interrupted one finds its lists
    /// as it left them.
    #[inline(always)]
    pub(crate) fn enter(&self) -> Option<Section<'_>> {
        // Relaxed: only this thread writes `active`. A handler that runs
        // between this load and the store below leaves its own section
        // (storing `0`) before this thread goes on.
        if self.active.load(Ordering::Relaxed) != 0 {
            return None;
        }
        self.active.store(1, Ordering::Relaxed);
        // With the revoker's heavy fence, orders the store above before the
        // load below as two SeqCst fences would (see the module docs).
        light_fence();
        // Acquire pairs with a revoker's Release store of `0`: what it took
        // out of the lists is seen gone.
        if self.revoking.load(Ordering::Acquire) != 0 {
            // Release: as on leaving a section (nothing was touched).
            self.active.store(0, Ordering::Release);
            return None;
        }
        Some(Section { magazine: self })
    }

    /// Inserts through the magazine so far, mod 2^32.
    #[inline]
    pub(crate) fn inserts(&self) -> u32 {
        let refilled = self.refilled.load(Ordering::Relaxed) as u32;
        self.free.pops().wrapping_sub(refilled)
    }

    /// Removals into the magazine so far, mod 2^32.
    #[inline]
    pub(crate) fn removal_count(&self) -> u32 {
        self.removals.removal_count()
    }

    /// Notes the counts a sweep (or a full pool's pop) sees; returns whether
    /// the previous look saw the same (the owner did nothing since) and the
    /// magazine holds anything (a hint: Relaxed loads).
    pub(crate) fn idle_and_holding(&self) -> bool {
        let counts = self.counts();
        let unchanged = self.swept.swap(counts, Ordering::Relaxed) == counts;
        unchanged && self.holds_anything()
    }

    /// The pops and removals so far, as a sweep notes them.
    fn counts(&self) -> u64 {
        (u64::from(self.free.pops()) << 32) | u64::from(self.removal_count())
    }

    /// Whether the removal batch looks non-empty (a hint).
    pub(crate) fn has_removals(&self) -> bool {
        !RemovalBatch::is_empty_word(self.removals.word())
    }

    /// Whether the free list looks non-empty (a hint).
    pub(crate) fn has_free(&self) -> bool {
        !self.free.looks_empty()
    }

    /// Whether the lists look non-empty (a hint).
    pub(crate) fn holds_anything(&self) -> bool {
        !self.free.looks_empty() || self.has_removals()
    }

    /// Takes the magazine from its owner, waiting up to `patience` yields in
    /// all for another revoker to let go of it and for a section in progress
    /// to end; `None` if neither did in time, or the heavy fence was refused.
    pub(crate) fn revoke(&self, patience: u32) -> Option<Revoked<'_>> {
        // A revoker that would not wait gives up before the heavy fence if
        // the owner looks inside a section (Relaxed: a hint; a section seen
        // over goes through the full handshake below). An owner preempted
        // inside a section looks idle to every sweep until it runs again,
        // and each sweep paid a heavy fence to find it still there: with 8
        // threads churning on 2 cores, a good part of the run was spent in
        // `membarrier` (docs/perf/0025).
        if patience == 0 && self.active.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let mut waited = 0;
        // Acquire pairs with the previous revoker's Release store of `0`. A
        // revoker holds the magazine for a bounded wait of its own, a heavy
        // fence and its work (a sweep's may walk the free list onto a shared
        // list that is not empty), so one that may wait waits for it too: a
        // full pool racing the owner's `flush` would otherwise give up on a
        // free slot in here.
        while self
            .revoking
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Relaxed: `RETIRED` is final; a retired magazine holds nothing.
            if waited == patience || self.revoking.load(Ordering::Relaxed) == RETIRED {
                return None;
            }
            waited += 1;
            crate::events::count(crate::events::Event::Yield);
            yield_now();
        }
        let revoked = Revoked { magazine: self };
        crate::events::count(crate::events::Event::Revoke);
        if !heavy_fence() {
            return None;
        }
        // Acquire pairs with the owner's Release store of `0` on leaving a
        // section: everything it did to the lists is visible.
        while self.active.load(Ordering::Acquire) != 0 {
            if waited == patience {
                return None; // `revoked` drops: the owner keeps it.
            }
            waited += 1;
            crate::events::count(crate::events::Event::Yield);
            yield_now();
        }
        Some(revoked)
    }

    /// Empties the removal batch without a handshake, for an exclusive
    /// reclamation that finds the removed slots by scanning; the free list
    /// stays (its slots stay free).
    ///
    /// # Safety
    ///
    /// No section and no revoker may run meanwhile: the caller holds the
    /// pool by `&mut`.
    pub(crate) unsafe fn discard_removals(&self) -> Option<SealedBatch> {
        self.removals.take_owned()
    }

    /// Marks the slots on the free list `FREE` (see
    /// [`FreeList::mark_free_owned`]).
    ///
    /// # Safety
    ///
    /// As for [`discard_removals`](Self::discard_removals).
    pub(crate) unsafe fn mark_free<T>(&self, storage: &Storage<T>) {
        self.free.mark_free_owned(storage);
    }
}

impl Section<'_> {
    /// The owned free list.
    #[inline(always)]
    pub(crate) fn free_list(&self) -> &FreeList {
        &self.magazine.free
    }

    /// The owned removal batch.
    #[inline(always)]
    pub(crate) fn removal_batch(&self) -> &RemovalBatch {
        &self.magazine.removals
    }

    /// Fills the owned free list, which must be empty, with `run`: `count`
    /// slots the caller popped off the stripe's shared list with
    /// [`FreeList::pop_run`]. The run's last slot still links to the next
    /// slot of the shared list: the link is cut here. Those pops raised the
    /// shared list's pop count without an insert: counted here as refilled.
    /// Returns whether this was the magazine's first refill.
    pub(crate) fn refill<T>(&self, storage: &Storage<T>, run: Chain, count: u32) -> bool {
        let last = storage.slot(run.last);
        // Relaxed: the run is this thread's since the pop's CAS, whose
        // Acquire made its words visible; the magazine's list is read by
        // its owner, or by a revoker after the handshake.
        let word = SlotWord::from_bits(last.word.load(Ordering::Relaxed));
        last.word
            .store(word.with_link(NIL).to_bits(), Ordering::Relaxed);
        let refilled = &self.magazine.refilled;
        let before = refilled.load(Ordering::Relaxed);
        refilled.store(before.wrapping_add(u64::from(count)), Ordering::Relaxed);
        self.magazine.free.fill_owned(run.first);
        before == 0
    }
}

impl Section<'_> {
    /// Retires the magazine for good, after the owner emptied its lists:
    /// every later `enter` and `revoke` is refused, and the owner uses the
    /// stripe's shared lists. For when the heavy fence has failed (see
    /// `membarrier`). Leaves it as it is if a revoker holds it meanwhile.
    pub(crate) fn retire(self) {
        // Relaxed: a retired magazine is empty, so nobody reads anything
        // through this word; a revoker that holds it now lets go with a
        // Release store of `0`, and the owner retires it later.
        let _ = self.magazine.revoking.compare_exchange(
            0,
            RETIRED,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

impl Drop for Section<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Release pairs with a revoker's Acquire load of `active`.
        self.magazine.active.store(0, Ordering::Release);
    }
}

impl Revoked<'_> {
    /// Pops a free slot, as the owner would: counted as an insert through
    /// this magazine. Not as the owner's activity, though: if the last
    /// sweep saw the counts as they were, it now sees them as they are, so
    /// the next sweep still finds an idle owner idle and empties its
    /// magazine. (Otherwise a full pool revoked an exited owner's magazine,
    /// a heavy fence, for every insert: far more than the insert itself.)
    pub(crate) fn pop_free<'a, T>(
        &self,
        storage: &'a Storage<T>,
    ) -> Option<(u32, &'a Slot<T>, SlotWord, u32)> {
        let magazine = self.magazine;
        let before = magazine.counts();
        let popped = magazine.free.pop_owned(storage)?;
        // Relaxed: a hint, as in `idle_and_holding`.
        let _ = magazine.swept.compare_exchange(
            before,
            magazine.counts(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        Some(popped)
    }

    /// Takes the free list, at once: its first slot (the rest follow its
    /// links to `NIL`).
    pub(crate) fn take_free(&self) -> Option<u32> {
        self.magazine.free.take_owned()
    }

    /// Takes the removal batch, at once.
    pub(crate) fn take_removals(&self) -> Option<SealedBatch> {
        self.magazine.removals.take_owned()
    }
}

impl Drop for Revoked<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire load in the owner's next section
        // (and in the next revoker's CAS): the lists are seen as left here.
        self.magazine.revoking.store(0, Ordering::Release);
    }
}
