//! Sweeps: sealing batches, revoking magazines and `flush`, so that
//! reclamation goes on whatever the traffic.

use crate::lists::RemovalBatch;
use crate::magazine::{Magazine, Revoked, Section};
use crate::reclaim::Horizon;
use crate::stripe::StripeIndex;

use super::RawPool;

/// A stripe is swept (see [`RawPool::sweep`]) once per this many pops of
/// its free list, and once per this many batches it seals: with the
/// default batch of 128, once per 256 removes.
pub(super) const SWEEP_EVERY_POPS: u32 = 1024;

pub(super) const SWEEP_EVERY_SEALS: u32 = 2;

/// At most this many times `flush` and a full pool give the CPU away while
/// a magazine's owner is inside a section (a pop, or a CAS and a push) or
/// another revoker holds the magazine, before they leave that magazine
/// alone: enough for a thread preempted there to run again. (Two under
/// loom, whose yields always let the other threads run.)
#[cfg(not(all(test, handle_pool_loom)))]
pub(super) const REVOKE_PATIENCE: u32 = 256;

#[cfg(all(test, handle_pool_loom))]
pub(super) const REVOKE_PATIENCE: u32 = 2;

/// What [`RawPool::revoke_magazine`] does with a magazine.
#[derive(Clone, Copy)]
pub(super) enum Magazines {
    /// Seals its partial batch; its free slots stay with its owner.
    Sealed,
    /// Seals its partial batch and moves its free slots onto its stripe's
    /// shared list.
    Emptied,
}

impl<T> RawPool<T> {
    /// The sweep due once per `SWEEP_EVERY_POPS` pops of a stripe. It also
    /// notes every stripe's inserts, for [`Stripe::is_quiet`]: not on the
    /// sweeps due to seals, which come about four times as often under
    /// churn, because each note reads and writes every busy stripe's line
    /// (noting there too cost 2-thread churn a fifth of its rate).
    ///
    /// [`Stripe::is_quiet`]: crate::stripe::Stripe::is_quiet
    #[cold]
    #[inline(never)]
    pub(super) fn sweep_on_pops(&self, stripe: StripeIndex, turn: u32) {
        self.stripes.note_inserts();
        self.sweep(stripe, turn);
    }

    /// Keeps reclamation going whatever the pool's traffic: visits one
    /// stripe (every stripe in turn, round-robin from `from`). If nobody
    /// removed from it since the last visit, seals its partial removal
    /// batch. Then, if the stripe is `from` itself or quiet, reclaims the
    /// batches no reader holds back onto its own free list (slots stay with
    /// their stripe: see `find_reusable`); a busy stripe's batches are left
    /// to its own threads, since walking them would pull their slots' lines
    /// away from the threads about to reuse them. Run once per `SWEEP_EVERY_POPS` inserts and `SWEEP_EVERY_SEALS` sealed
    /// batches on each stripe, so a removed value is dropped after a bounded
    /// number of later operations: its own stripe's sweeps reach it, and
    /// once that stripe is quiet (the thread that removed it never touches
    /// the pool again) any thread's sweep does.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep(&self, from: StripeIndex, turn: u32) {
        crate::events::count(crate::events::Event::Sweep);
        let target = self.stripes.sweep_target(from, turn);
        let stripe = &self.stripes[target];
        let word = stripe.removals.word();
        // An idle owner's magazine (or an exited one's) is emptied onto the
        // shared lists, its partial batch sealed.
        let emptied = self.stripes.have_magazines()
            && stripe.magazine.idle_and_holding()
            && self.revoke_magazine(target, 0, Magazines::Emptied);
        if (stripe.unchanged_since_last_sweep(word) || emptied)
            && !RemovalBatch::is_empty_word(word)
        {
            if let Some(batch) = stripe.removals.seal_if_still(word) {
                self.reclaimer.seal(target, batch);
            }
        }
        // Judged before the note below: a note just taken (a sweep due to
        // pops notes every stripe first) would make any stripe look quiet.
        let quiet = stripe.is_quiet();
        // Noted here too, not only by inserts' sweeps: with no insert
        // anywhere, an idle thread's sealed batch would otherwise never
        // be found quiet, and never reclaimed by removals elsewhere.
        stripe.note_inserts();
        if target == from || quiet {
            self.reclaim_into(target, target, &mut Horizon::unread());
        }
    }

    /// Seals every stripe's partial batch, its magazine's too, and reclaims
    /// every batch no reader holds back (a guard or a one-call read that
    /// began before its seal) onto `home`'s free list. The magazines' free
    /// slots (a batch at most each) stay with their owners: moving them
    /// onto a shared list that is not empty means walking them, a step per
    /// slot. The caller's own magazine is sealed through its section, with
    /// no fence.
    pub(super) fn seal_and_reclaim_all(&self, home: StripeIndex) {
        // The caller's own magazine through its section, which needs no
        // heavy fence: so a flush seals its own thread's removals even
        // where the fence is refused, or its owner is preempted.
        self.seal_own(home);
        for stripe in self.stripes.all_from(home) {
            if self.stripes.have_magazines() && self.stripes[stripe].magazine.has_removals() {
                self.revoke_magazine(stripe, REVOKE_PATIENCE, Magazines::Sealed);
            }
            self.seal_shared(stripe);
        }
        // One horizon for every stripe, read after every seal above.
        let mut horizon = Horizon::unread();
        for stripe in self.stripes.all_from(home) {
            self.reclaim_into(stripe, home, &mut horizon);
        }
    }

    /// Takes `stripe`'s magazine from its owner (see `magazine`), waiting
    /// up to `patience` yields for it to leave a section (and for another
    /// revoker to let go of it), and seals its partial batch; with
    /// [`Magazines::Emptied`] its free slots go onto the stripe's shared
    /// list too. Returns whether it got the magazine.
    pub(super) fn revoke_magazine(
        &self,
        stripe: StripeIndex,
        patience: u32,
        magazines: Magazines,
    ) -> bool {
        let Some(revoked) = self.stripes[stripe].magazine.revoke(patience) else {
            return false;
        };
        // Both go where others find them before the magazine is let go, so
        // a revoker that waited for this one finds them there.
        if let Magazines::Emptied = magazines {
            self.move_free_to_shared(stripe, &revoked);
        }
        if let Some(batch) = revoked.take_removals() {
            self.reclaimer.seal(stripe, batch);
        }
        drop(revoked);
        true
    }

    /// Moves the free slots of `stripe`'s magazine, which `revoked` holds,
    /// onto the stripe's shared list: unwalked onto an empty list, else
    /// walked (a batch at most, what a refill takes).
    pub(super) fn move_free_to_shared(&self, stripe: StripeIndex, revoked: &Revoked<'_>) {
        if let Some(first) = revoked.take_free() {
            self.stripes[stripe].free.push_to_nil(&self.storage, first);
        }
    }

    /// Drops every removed value no guard protects and makes its slot
    /// reusable: see [`HandlePool::flush`](crate::HandlePool::flush).
    pub(crate) fn flush(&self) {
        // Only the removals: a flush is for drops, and its cost must not
        // grow with the free slots the magazines hold.
        self.seal_and_reclaim_all(self.stripes.home());
    }

    /// Seals the partial removal batches on `home`, the calling thread's
    /// magazine's and the shared one, and defers them; returns whether
    /// there were any.
    pub(super) fn seal_own(&self, home: StripeIndex) -> bool {
        let mut sealed = false;
        let (_, magazine) = self.stripes.home_and_magazine();
        if let Some(section) = magazine.and_then(Magazine::enter) {
            if crate::membarrier::fences_failed() {
                return self.retire_own_magazine(home, section) | self.seal_shared(home);
            }
            let batch = section.removal_batch().take_owned();
            drop(section);
            if let Some(batch) = batch {
                self.reclaimer.seal(home, batch);
                sealed = true;
            }
        }
        self.seal_shared(home) || sealed
    }

    /// Retires the calling thread's magazine, `home`'s, whose section it
    /// holds, once the heavy fence has failed: no revoker can take a
    /// magazine over any more, so its owner puts its free slots on the
    /// shared list and seals its partial batch itself, and uses the shared
    /// lists from then on. Returns whether it sealed a batch. If a revoker
    /// holds the magazine meanwhile (its fence was about to fail), the
    /// slots still move, and the owner retires it at a later slow path.
    pub(super) fn retire_own_magazine(&self, home: StripeIndex, section: Section<'_>) -> bool {
        if let Some(first) = section.free_list().take_owned() {
            self.stripes[home].free.push_to_nil(&self.storage, first);
        }
        let batch = section.removal_batch().take_owned();
        section.retire();
        match batch {
            Some(batch) => {
                self.reclaimer.seal(home, batch);
                true
            }
            None => false,
        }
    }

    /// Seals `stripe`'s shared partial batch, if any, and defers it;
    /// returns whether there was one.
    pub(super) fn seal_shared(&self, stripe: StripeIndex) -> bool {
        let Some(batch) = self.stripes[stripe].removals.take_all() else {
            return false;
        };
        self.reclaimer.seal(stripe, batch);
        true
    }

    /// Hands a batch this thread just sealed to reclamation, and sweeps once
    /// per `SWEEP_EVERY_SEALS` batches.
    #[cold]
    #[inline(never)]
    pub(super) fn sealed(&self, home: StripeIndex, batch: crate::lists::SealedBatch, seals: u32) {
        self.reclaimer.seal(home, batch);
        if seals % SWEEP_EVERY_SEALS == 0 {
            self.sweep(home, seals / SWEEP_EVERY_SEALS);
        }
    }

    // ---- For the loom models ----------------------------------------

    /// For the loom models, which cannot run the 1,024 pops between two
    /// notes: takes two notes now, so every stripe is quiet until its next
    /// insert (see [`Stripe::is_quiet`]).
    ///
    /// [`Stripe::is_quiet`]: crate::stripe::Stripe::is_quiet
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn quiet_stripes(&self) {
        self.stripes.note_inserts();
        self.stripes.note_inserts();
    }

    /// For the loom models, which cannot run the pops and seals between
    /// sweeps: empties every other stripe's magazine as a sweep does one it
    /// finds idle and holding slots. Returns whether it took any.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn empty_other_magazines(&self) -> bool {
        let home = self.stripes.home();
        self.stripes.others(home).fold(false, |took, stripe| {
            self.revoke_magazine(stripe, 0, Magazines::Emptied) | took
        })
    }

    /// For the loom models, which cannot reach the back-pressure rounds:
    /// seals the calling thread's partial batches as those rounds do.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn seal_own_partial_batches(&self) -> bool {
        self.seal_own(self.stripes.home())
    }
}
