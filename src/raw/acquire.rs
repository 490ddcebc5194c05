//! Acquiring a slot for an insert: the order of sources, cheapest first.

use crate::lists::Chain;
use crate::magazine::Magazine;
use crate::reclaim::Horizon;
use crate::slot::{Slot, SlotWord, State};
use crate::stripe::StripeIndex;
use crate::sync::Ordering;

use super::insert::Acquired;
use super::sweep::{REVOKE_PATIENCE, SWEEP_EVERY_POPS};
use super::RawPool;

/// Which other stripes an insert may take reusable slots from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Take {
    /// Only quiet ones (see [`Stripe::is_quiet`](crate::stripe::Stripe::is_quiet)),
    /// and only if none of the home stripe's removed slots are on their way
    /// back to it (see `find_reusable`).
    QuietOnly,
    /// Any, busy ones included.
    Any,
}

/// Walks a refill tries before it leaves the shared list to the others
/// (see `pop_from_magazine`).
const REFILL_TRIES: u32 = 4;

impl<T> RawPool<T> {
    /// Takes a `FREE` slot for an insert: from the calling thread's
    /// magazine, else its home stripe, else another stripe or fresh (see
    /// `acquire_slow`); `None` when the pool is full.
    #[inline]
    pub(super) fn acquire(
        &self,
        home: StripeIndex,
        magazine: Option<&Magazine>,
    ) -> Option<Acquired<'_, T>> {
        if let Some(found) = magazine.and_then(|magazine| self.pop_from_magazine(home, magazine)) {
            return Some(found);
        }
        if let Some(found) = self.pop_from(home) {
            return Some(found);
        }
        self.acquire_slow(home)
    }

    /// Pops a slot off the calling thread's own magazine, refilling it
    /// first, if empty, with a run of at most a batch off the home stripe's
    /// shared list; `None` if both are empty or a revoker holds the magazine.
    #[inline(always)]
    pub(super) fn pop_from_magazine(
        &self,
        home: StripeIndex,
        magazine: &Magazine,
    ) -> Option<Acquired<'_, T>> {
        let (index, slot, word, pops) = {
            let section = magazine.enter()?;
            match section.free_list().pop_owned(&self.storage) {
                Some(found) => found,
                None if crate::membarrier::fences_failed() => {
                    self.retire_own_magazine(home, section);
                    return None;
                }
                None => {
                    // At most a batch, with one CAS: the rest of the shared
                    // list stays where other threads look, so a slow owner
                    // never holds its stripe's free slots from them, and a
                    // magazine holds at most a batch free whatever its
                    // owner does next. The walk visits the slots this
                    // thread pops next anyway. A few tries at most: the
                    // walk is inside the section, which a revoker waits
                    // for; past them the insert pops off the shared list.
                    let (run, count) = self.stripes[home].free.pop_run_within(
                        &self.storage,
                        self.config.batch,
                        REFILL_TRIES,
                    )?;
                    if section.refill(&self.storage, run, count) {
                        // Relaxed: a hint for back-pressure.
                        self.magazine_users.fetch_add(1, Ordering::Relaxed);
                    }
                    crate::events::count(crate::events::Event::Refill);
                    section.free_list().pop_owned(&self.storage)?
                }
            }
        };
        Some(self.popped(home, index, slot, word, pops))
    }

    /// A slot just popped off one of `stripe`'s lists, whose pop count is
    /// now `pops`, as an acquired slot; runs the sweep due every
    /// `SWEEP_EVERY_POPS` pops.
    #[inline(always)]
    pub(super) fn popped<'a>(
        &'a self,
        stripe: StripeIndex,
        index: u32,
        slot: &'a Slot<T>,
        word: SlotWord,
        pops: u32,
    ) -> Acquired<'a, T> {
        if pops % SWEEP_EVERY_POPS == 0 {
            self.sweep_on_pops(stripe, pops / SWEEP_EVERY_POPS);
        }
        Acquired::reusing(index, slot, word)
    }

    /// Reusable slots first, in order of cost; fresh slots only when
    /// nothing reusable is ready.
    ///
    /// The home stripe comes first: its sealed batches no reader holds
    /// back. That touches no other stripe's cache line, so under churn
    /// every thread recycles its own slots without pulling the others'
    /// lines away from them. Only then the other stripes, quiet ones first
    /// (see the `stripe` module docs).
    #[cold]
    pub(super) fn acquire_slow(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        crate::events::count(crate::events::Event::AcquireSlow);
        let grow = match self.find_reusable(home, &mut Horizon::unread()) {
            Ok(found) => return Some(found),
            Err(grow) => grow,
        };
        if let Some(found) = self.acquire_fresh(home, grow.0) {
            return Some(found);
        }
        self.last_resort(home)
    }

    /// Moves reusable slots of another stripe to `home` and pops one there:
    /// a run off its free list, else its ready batches.
    ///
    /// With [`Take::QuietOnly`], a busy stripe's shared free list is taken
    /// too when its magazine's owner holds free slots of its own: the
    /// owner's next inserts come from its magazine, and its next refill
    /// takes a batch at most, so what waits on the shared list beyond is
    /// nobody's next insert (a slow owner's stripe, say, that once freed a
    /// million). Its sealed batches are left to it.
    ///
    /// Every stripe is judged against one `horizon`, read at the first
    /// stripe with sealed batches if the caller has not read it yet.
    pub(super) fn take_from_others(
        &self,
        home: StripeIndex,
        take: Take,
        horizon: &mut Horizon,
    ) -> Option<Acquired<'_, T>> {
        // Looked up at the first quiet stripe with something to take.
        let mut own_on_the_way = None;
        for other in self.stripes.others(home) {
            let stripe = &self.stripes[other];
            let has_free = !stripe.free.looks_empty();
            if !has_free && !self.reclaimer.has_sealed(other) {
                continue;
            }
            let quiet = take == Take::Any || stripe.is_quiet();
            let spare = has_free && stripe.magazine.has_free();
            if take == Take::QuietOnly
                && (!(quiet || spare)
                    || *own_on_the_way.get_or_insert_with(|| self.own_on_the_way(home)))
            {
                continue;
            }
            let moved = has_free
                && self
                    .stripes
                    .move_run(&self.storage, other, home, self.config.batch);
            if moved || (quiet && self.reclaim_into(other, home, horizon)) {
                crate::events::count(crate::events::Event::TakeFromOther);
                if let Some(found) = self.pop_from(home) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// The pool is full: before failing, take a free slot out of a
    /// magazine, make every removed slot reusable that can be, look at
    /// every stripe once more, and at the magazines once more (an owner's
    /// refill may have taken what the reclamation put on its stripe).
    #[cold]
    pub(super) fn last_resort(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if let Some(found) = self.pop_from_magazines(home) {
            return Some(found);
        }
        self.seal_and_reclaim_all(home);
        self.stripes
            .all_from(home)
            .find_map(|stripe| self.pop_from(stripe))
            .or_else(|| self.pop_from_magazines(home))
    }

    /// A free slot popped out of some magazine, each revoked in turn (see
    /// `magazine`), waiting for its owner as `flush` does. The slot is
    /// popped while the magazine is held: put on the shared list for a pop
    /// after the hold, it could go back into the magazine whenever its
    /// owner refilled first, and a full pool's insert failed with a slot
    /// free (loom:
    /// `a_full_pool_takes_a_slot_its_owner_would_refill`).
    pub(super) fn pop_from_magazines(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if !self.stripes.have_magazines() {
            return None;
        }
        self.stripes.all_from(home).find_map(|stripe| {
            let magazine = &self.stripes[stripe].magazine;
            if !magazine.has_free() {
                return None;
            }
            let revoked = magazine.revoke(REVOKE_PATIENCE)?;
            let (index, slot, word, pops) = revoked.pop_free(&self.storage)?;
            // The rest go to the shared list if the owner did nothing since
            // the last look, a sweep's or a full pool's (this one notes the
            // counts too): left in an idle or exited owner's magazine, each
            // later insert revoked it again for one slot, a heavy fence
            // each, far more than the insert itself. A busy owner's stay:
            // moved, they would be in this thread's hands until pushed, where
            // neither the owner nor another full pool's insert finds them
            // (loom: `a_full_pool_takes_a_slot_its_owner_would_refill`).
            if magazine.idle_and_holding() {
                self.move_free_to_shared(stripe, &revoked);
            }
            // Let go before `popped`, whose sweep may revoke it again.
            drop(revoked);
            Some(self.popped(stripe, index, slot, word, pops))
        })
    }

    /// Reclaims `from`'s ready batches onto `into`'s free list, judged
    /// against `horizon` (read now if it was not yet); returns whether
    /// there were any.
    pub(super) fn reclaim_into(
        &self,
        from: StripeIndex,
        into: StripeIndex,
        horizon: &mut Horizon,
    ) -> bool {
        let reclaimed =
            self.reclaimer
                .reclaim_ready(from, &self.storage, self.config.max_generation, horizon);
        if let Some(chain) = reclaimed.free {
            self.stripes[into].free.push(&self.storage, chain);
        }
        reclaimed.found
    }

    #[inline(always)]
    pub(super) fn pop_from(&self, stripe: StripeIndex) -> Option<Acquired<'_, T>> {
        let (index, slot, word, pops) = self.stripes[stripe].free.pop(&self.storage)?;
        Some(self.popped(stripe, index, slot, word, pops))
    }

    /// Reserves up to `count` never-used slots with one atomic step, puts
    /// them on the home stripe's free list and pops one (every insert is a
    /// pop: that is what counts it). If other threads took them all first,
    /// they made progress, and we start over.
    pub(super) fn acquire_fresh(&self, home: StripeIndex, count: u32) -> Option<Acquired<'_, T>> {
        let (start, end) = self.reserve_fresh(count)?;
        self.free_fresh(home, start, end);
        match self.pop_from(home) {
            Some(found) => Some(found),
            None => self.acquire_slow(home),
        }
    }

    /// Reserves a block of at most `count` consecutive never-used slots,
    /// allocated and owned by the caller: `start..end`, never empty.
    pub(super) fn reserve_fresh(&self, count: u32) -> Option<(u32, u32)> {
        let max = self.config.max_slots as u64;
        // Relaxed: the counter only hands out disjoint ranges; the slots are
        // published through the bucket pointers.
        crate::events::count(crate::events::Event::Fresh);
        let start = self.fresh.fetch_add(count as u64, Ordering::Relaxed);
        if start >= max {
            return None;
        }
        let end = (start + count as u64).min(max);
        let (start, end) = (start as u32, end as u32);
        self.storage.ensure(start, end);
        Some((start, end))
    }

    /// Puts never-used slots `start..end` (owned by the caller, possibly
    /// none) on `stripe`'s free list, linked in index order.
    pub(super) fn free_fresh(&self, stripe: StripeIndex, start: u32, end: u32) {
        if start < end {
            for index in start..end - 1 {
                // Relaxed: the chain is published by the push's Release CAS.
                self.storage
                    .slot(index)
                    .word
                    .store(SlotWord::free(0, index + 1).to_bits(), Ordering::Relaxed);
            }
            let chain = Chain {
                first: start,
                last: end - 1,
            };
            self.stripes[stripe].free.push(&self.storage, chain);
        }
    }

    /// Puts a slot the caller owns back on `stripe`'s free list, with
    /// `word` (`FREE`, or `EXHAUSTED`, which goes on no list): an exclusive
    /// removal or an insert given back, either way one value fewer than the
    /// pops count.
    pub(super) fn give_back(&self, stripe: StripeIndex, index: u32, word: SlotWord) {
        self.stripes[stripe].adjust_len(-1);
        let slot = self.storage.slot(index);
        slot.word.store(word.to_bits(), Ordering::Relaxed);
        if word.state() == State::Free {
            let chain = Chain {
                first: index,
                last: index,
            };
            self.stripes[stripe].free.push(&self.storage, chain);
        }
    }
}
