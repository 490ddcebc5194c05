//! Removing: a value leaves the pool into a removal batch.

use crate::handle::Handle;
use crate::magazine::{Magazine, Section};
use crate::slot::{Slot, SlotWord, NIL};
use crate::stripe::StripeIndex;
use crate::sync::Ordering;
use crate::Guard;

use super::RawPool;

/// Where a removal may go: the thread's magazine if it owns one here, or
/// straight to its home stripe's shared batch.
#[derive(Clone, Copy)]
pub(super) enum Route {
    Magazine,
    /// The owner's section was refused just now: a revoker holds it.
    Shared,
}

/// Slots `remove_many` has moved to `REMOVED`, linked `head` → … → tail;
/// dropping it pushes them onto the home stripe's batch in one go.
pub(super) struct RemovedChain<'a, T> {
    pool: &'a RawPool<T>,
    head: u32,
    tail: Option<(&'a Slot<T>, u32)>,
    count: u32,
}

impl<T> Drop for RemovedChain<'_, T> {
    fn drop(&mut self) {
        let Some((tail, generation)) = self.tail else {
            return;
        };
        let pool = self.pool;
        let home = pool.stripes.home();
        let removals = &pool.stripes[home].removals;
        let relink = |head| {
            tail.word.store(
                SlotWord::removed(generation, head).to_bits(),
                Ordering::Relaxed,
            )
        };
        let (link, current) = removals.head();
        relink(link);
        if let Some(full) = removals.push(self.head, self.count, current, pool.config.batch, relink)
        {
            pool.sealed(home, full, removals.removal_count() / pool.config.batch);
        }
    }
}

impl<T> RawPool<T> {
    /// Removes the value `handle` refers to; `false` if it was not there.
    /// The value is dropped, and the slot reused, after the grace period.
    #[inline]
    pub(crate) fn remove(&self, handle: Handle) -> bool {
        self.remove_slot(handle).is_some()
    }

    /// [`remove`](Self::remove), returning the slot whose value it removed:
    /// the value stays there, initialised, until its batch is reclaimed,
    /// which waits for every guard pinned, and every one-call read begun,
    /// before the removal (or never happens, for a slot retired at once).
    ///
    /// The inline part is the common case only: a live occupant in the flat
    /// region, removed by the owner of a magazine here. Every other case
    /// (a stale handle, a bucket, a retiring slot, no magazine or a revoked
    /// one) is one cold call that starts over. So the inline part keeps
    /// nothing live across a call, and is small enough for the compiler to
    /// inline where a call site is not one tight loop (docs/perf/0026).
    #[inline]
    pub(crate) fn remove_slot(&self, handle: Handle) -> Option<&Slot<T>> {
        let mut route = Route::Magazine;
        if let Some(slot) = self.storage.flat_slot(handle.index()) {
            // A plain load first: a stale handle costs no write to the line.
            if slot.word.load(Ordering::Relaxed) == SlotWord::occupied(handle).to_bits()
                && !self.retires_on_removal(handle)
            {
                if let Some((home, magazine)) = self.stripes.own_magazine() {
                    match magazine.enter() {
                        Some(section) => return self.remove_into(section, home, slot, handle),
                        None => route = Route::Shared,
                    }
                }
            }
        }
        self.remove_slow(handle, route)
    }

    /// Removes the value `handle` refers to and returns it, borrowed for as
    /// long as `_guard`, which was pinned before the removal.
    #[inline]
    pub(crate) fn remove_get<'g>(&'g self, handle: Handle, _guard: &'g Guard) -> Option<&'g T> {
        let slot = self.remove_slot(handle)?;
        // SAFETY: this call's CAS moved the slot from OCCUPIED(handle) to
        // REMOVED (or EXHAUSTED, retired at once), so the value is
        // initialised (the CAS's Acquire saw its publication) and no other
        // removal can claim it. It is dropped, and the slot reused, only
        // when the batch the removal joined is reclaimed, after its seal,
        // which comes at or after the removal; the guard announced before
        // this call (a `Guard` can only be made by announcing), so that
        // reclamation waits for the guard to drop (`reclaim.md`), and a
        // retired slot is never reused at all. Exclusive removals need
        // `&mut` of the pool, which the borrow `'g` rules out: the value
        // stays valid for `'g`.
        Some(unsafe { slot.value_ref() })
    }

    /// Removes the value `handle` refers to and calls `f` with it,
    /// protected for the call by a one-call read (see `Reclaimer::read`).
    #[inline]
    pub(crate) fn remove_with<R>(&self, handle: Handle, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.reclaimer.read(|| {
            let slot = self.remove_slot(handle)?;
            // SAFETY: as in `remove_get`: this call's CAS removed the value,
            // which stays initialised until the batch the removal joined is
            // reclaimed; the read's protection began before the removal and
            // lasts until `f` returns, so that reclamation waits for it (as
            // `Reclaimer::read` promises); exclusive removals need `&mut`,
            // which `&self` rules out.
            Some(f(unsafe { slot.value_ref() }))
        })
    }

    /// [`remove`](Self::remove) in every case but the common one: a stale
    /// handle, a bucket, a retiring slot, a thread without a magazine here
    /// (or without a number yet: it takes one here, and may then own one),
    /// or a magazine a revoker holds. With [`Route::Shared`] the caller's
    /// section was just refused, and the removal goes to the shared batch
    /// without a second try: each try sets the owner's `active` flag, which
    /// a revoker waits to see clear, with bounded patience (a loom model,
    /// `flush_revokes_an_owners_partial_batch`, catches a flush giving up).
    #[cold]
    #[inline(never)]
    pub(super) fn remove_slow(&self, handle: Handle, route: Route) -> Option<&Slot<T>> {
        crate::events::count(crate::events::Event::RemoveSlow);
        let slot = self.storage.find(handle.index())?;
        // A plain load first: a stale handle costs no write to the line.
        if slot.word.load(Ordering::Relaxed) != SlotWord::occupied(handle).to_bits() {
            return None;
        }
        if self.retires_on_removal(handle) {
            return self.remove_and_retire(slot, handle);
        }
        let (home, magazine) = self.stripes.home_and_magazine();
        let section = match route {
            Route::Magazine => magazine.and_then(Magazine::enter),
            Route::Shared => None,
        };
        match section {
            Some(section) => self.remove_into(section, home, slot, handle),
            None => self.remove_shared(home, slot, handle),
        }
    }

    /// [`remove_slow`](Self::remove_slow)'s removal through the magazine
    /// `section` holds, `home`'s.
    #[inline(always)]
    pub(super) fn remove_into<'a>(
        &self,
        section: Section<'_>,
        home: StripeIndex,
        slot: &'a Slot<T>,
        handle: Handle,
    ) -> Option<&'a Slot<T>> {
        let removals = section.removal_batch();
        if !slot.try_remove(handle, removals.head_owned()) {
            return None;
        }
        if removals.push_owned(handle.index(), self.config.batch) {
            self.seal_owned(section, home);
        }
        Some(slot)
    }

    /// Seals the full removal batch of the magazine `section` holds.
    #[cold]
    #[inline(never)]
    pub(super) fn seal_owned(&self, section: Section<'_>, home: StripeIndex) {
        if crate::membarrier::fences_failed() {
            self.retire_own_magazine(home, section);
            return;
        }
        let removals = section.removal_batch();
        let full = removals
            .take_owned()
            .expect("handle-pool bug: a full removal batch is empty");
        // Counted before the section ends: a revoker may take the batch then.
        let seals = removals.removal_count() / self.config.batch;
        drop(section);
        self.sealed(home, full, seals);
    }

    /// [`remove`](Self::remove) through `home`'s shared removal batch, for a
    /// thread without a magazine here or whose magazine a revoker holds.
    #[inline(never)]
    pub(super) fn remove_shared<'a>(
        &self,
        home: StripeIndex,
        slot: &'a Slot<T>,
        handle: Handle,
    ) -> Option<&'a Slot<T>> {
        let removals = &self.stripes[home].removals;
        let (link, current) = removals.head();
        if !slot.try_remove(handle, link) {
            return None;
        }
        let relink = |head| {
            slot.word.store(
                SlotWord::removed(handle.generation(), head).to_bits(),
                Ordering::Relaxed,
            )
        };
        if let Some(full) = removals.push(handle.index(), 1, current, self.config.batch, relink) {
            self.sealed(home, full, removals.removal_count() / self.config.batch);
        }
        Some(slot)
    }

    /// Whether removing `handle` retires its slot at once: a value without
    /// drop glue at the generation limit (see `Slot::try_remove_and_retire`).
    #[inline(always)]
    pub(super) fn retires_on_removal(&self, handle: Handle) -> bool {
        !core::mem::needs_drop::<T>() && handle.generation() >= self.config.max_generation
    }

    /// Removes a value that [`retires_on_removal`](Self::retires_on_removal);
    /// `None` if it was not there.
    #[cold]
    pub(super) fn remove_and_retire<'a>(
        &self,
        slot: &'a Slot<T>,
        handle: Handle,
    ) -> Option<&'a Slot<T>> {
        if !slot.try_remove_and_retire(handle) {
            return None;
        }
        // The insert was counted by its pop; no batch counts this removal.
        self.stripes[self.stripes.home()].adjust_len(-1);
        Some(slot)
    }

    /// Removes the values of `handles` (skipping stale and repeated ones)
    /// with one push onto the home stripe's batch; returns how many.
    pub(crate) fn remove_many(&self, handles: impl IntoIterator<Item = Handle>) -> usize {
        // Joins the stripe's batch when dropped, also if the iterator (user
        // code) panics part-way: no removed slot is left outside a batch.
        let mut chain = RemovedChain {
            pool: self,
            head: NIL,
            tail: None,
            count: 0,
        };
        let mut retired = 0;
        for handle in handles {
            let Some(slot) = self.storage.find(handle.index()) else {
                continue;
            };
            let generation = handle.generation();
            if slot.word.load(Ordering::Relaxed) != SlotWord::occupied(handle).to_bits() {
                continue;
            }
            if self.retires_on_removal(handle) {
                retired += usize::from(self.remove_and_retire(slot, handle).is_some());
                continue;
            }
            if slot.try_remove(handle, chain.head) {
                chain.head = handle.index();
                chain.tail.get_or_insert((slot, generation));
                chain.count += 1;
            }
        }
        chain.count as usize + retired
    }
}
