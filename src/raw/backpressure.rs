//! Back-pressure: what an insert does when nothing reusable is at hand
//! and reclamation is behind, instead of growing the pool.

use core::time::Duration;

use crate::lists::RemovalBatch;
use crate::magazine::Magazine;
use crate::reclaim::Horizon;
use crate::stripe::StripeIndex;
use crate::sync::{yield_now, Ordering};

use super::acquire::Take;
use super::insert::Acquired;
use super::RawPool;

/// At most this many times an insert gives the CPU away and looks again
/// before it grows a pool whose reclamation is behind: enough for a thread
/// preempted while pinned to run again when threads outnumber cores (4
/// rounds let 32 threads on 2 cores reach 200–400 thousand slots for 2,048
/// live; 16, about 100 thousand; 64, 16–25 thousand, and 6 thousand since
/// the rounds take quiet stripes' slots).
pub(super) const BEHIND_ROUNDS: usize = 64;

/// How long, at most, an insert that would take the pool past its bound
/// sleeps waiting for reclamation (see `RawPool::wait_at_bound`): longer
/// than the few milliseconds a busy host typically takes a virtual CPU
/// away for, short against a guard held for a frame or more.
pub(super) const BOUND_PATIENCE: Duration = Duration::from_millis(10);

/// How many fresh slots an insert takes when nothing reusable is found.
pub(super) struct Grow(pub(super) u32);

impl<T> RawPool<T> {
    /// A reusable slot from anywhere, in order of cost (see `acquire_slow`);
    /// when growing is the only way left, how many fresh slots to take.
    ///
    /// In order: the home stripe's ready batches; a quiet stripe's slots;
    /// then, only if reclamation is behind (growing would be growth the
    /// live count does not explain), any stripe's free slots or ready
    /// batches, since nothing needs waiting for while some stripe has them;
    /// then, only for a caller that holds no reclamation back, the waits:
    /// a few rounds that give the CPU away, and the wait at the bound. A
    /// caller that holds reclamation back (a guard or a `Reader` of its
    /// own, a one-call read, a reclamation running a value's `Drop`) waits
    /// for nobody: what it would wait for may be what it holds back
    /// itself, and two pinned writers waiting on each other would stall
    /// both. It grows instead, a batch at a time, so its slow path runs
    /// once per batch: that growth is the `R × P` term of the bound (see
    /// `design.md`, "Memory under churn"), memory and not time.
    ///
    /// Each look at the stripes, up to a pause, judges them all against
    /// one horizon of the readers (see `Horizon`): the first look's is
    /// `horizon`, the caller's (read now if it was not yet).
    pub(super) fn find_reusable(
        &self,
        home: StripeIndex,
        horizon: &mut Horizon,
    ) -> Result<Acquired<'_, T>, Grow> {
        if self.reclaim_into(home, home, horizon) {
            if let Some(found) = self.pop_from(home) {
                return Ok(found);
            }
        }
        // A thread that removed nothing it is still waiting for takes a
        // quiet stripe's slots: they are nobody's next inserts. A thread
        // whose own removed slots are on their way keeps to them: taking
        // another stripe's interleaves two threads' slots in memory, and
        // every later operation on either pays for lines the other wrote,
        // for as long as the slots keep cycling (two churning threads ran
        // much slower so: docs/perf/0011). A stripe looks quiet for a moment
        // while its thread flushes or reclaims, so quiet is not enough.
        // Growing a little costs less, until reclamation is behind.
        if let Some(found) = self.take_from_others(home, Take::QuietOnly, horizon) {
            return Ok(found);
        }
        let grow = Grow(self.config.fresh_block);
        if !self.reclamation_is_behind() {
            return Err(grow);
        }
        if let Some(found) = self.take_from_others(home, Take::Any, horizon) {
            return Ok(found);
        }
        if self.reclaimer.held_back_here() {
            return Err(Grow(self.config.batch.max(self.config.fresh_block)));
        }
        // Growing now would be growth the live count does not explain, while
        // removed slots wait for a reader on a thread preempted while it
        // holds a guard, for a whole time slice, or sit in the hands of a
        // thread preempted while it reclaims them (nothing sealed then, and
        // nothing to see). Give the CPU away a few times, so that thread
        // can run, looking again each time. Meanwhile the home stripe is
        // not quiet: what it waits for is its own.
        let _waiting = self.stripes[home].waiting();
        for _ in 0..BEHIND_ROUNDS {
            let pause = || {
                crate::events::count(crate::events::Event::Yield);
                yield_now();
            };
            if let Some(found) = self.round_behind(home, Take::QuietOnly, pause) {
                return Ok(found);
            }
            if !self.reclamation_is_behind() {
                return Err(grow);
            }
        }
        // Still behind: busy stripes' slots too, rather than grow (a new
        // look, after the pauses: a new horizon).
        if let Some(found) = self.take_from_others(home, Take::Any, &mut Horizon::unread()) {
            return Ok(found);
        }
        self.wait_at_bound(home).ok_or(grow)
    }

    /// One round of back-pressure (see `find_reusable`): looks for a
    /// reusable slot, calling `pause` in the middle to give the CPU away.
    pub(super) fn round_behind(
        &self,
        home: StripeIndex,
        take: Take,
        pause: impl FnOnce(),
    ) -> Option<Acquired<'_, T>> {
        crate::events::count(crate::events::Event::BehindRound);
        // Our own batches first, without giving the CPU away: they are
        // reusable unless a reader holds them back. A partial batch is
        // sealed, to wait for. Only a thread with nothing of its own on the
        // way takes another stripe's slots.
        // One horizon before the pause, a new one after it.
        let mut horizon = Horizon::unread();
        if self.reclaimer.has_sealed(home) || self.seal_own(home) {
            if self.reclaim_into(home, home, &mut horizon) {
                if let Some(found) = self.pop_from(home) {
                    return Some(found);
                }
            }
        } else if let Some(found) = self.take_from_others(home, take, &mut horizon) {
            return Some(found);
        }
        // Notes on both sides of the pause: a stripe nobody inserted
        // through while this thread was off the CPU is quiet (its
        // threads are idle or preempted too), and taken from below,
        // without waiting for the next regular note.
        self.stripes.note_inserts();
        pause();
        self.stripes.note_inserts();
        if self.reclaim_into(home, home, &mut Horizon::unread()) {
            if let Some(found) = self.pop_from(home) {
                return Some(found);
            }
        }
        None
    }

    /// The last stand of back-pressure, when growing would take the pool
    /// past its bound (`4 × live + 1024`): sleeps, in naps of 50 µs
    /// doubling up to 1 ms, for at most `BOUND_PATIENCE`, looking for a
    /// reusable slot between naps (another stripe's too, once none of this
    /// one's is on the way). `None` once growing is within the bound, or
    /// the patience ran out.
    ///
    /// The yields before it cost nothing when the CPU has nothing else to
    /// run, so they do not outlast a pinned thread whose virtual CPU the
    /// host took away for a few milliseconds (with a real-time busy loop
    /// taking part of one core, two threads passed the bound in some runs:
    /// docs/perf/0017); a nap does. A calling
    /// thread that holds reclamation back itself does not wait (see
    /// `Reclaimer::held_back_here`; a `par_iter`'s worker counts, since its
    /// caller's guard lasts until the worker is done). Nor can a wait see
    /// another thread that holds a guard until this one finishes (a scoped
    /// thread spawned under a guard): the patience bounds that. A guard held longer than the
    /// patience is the `R × P` of the documented bound, not a stall to ride
    /// out: a wait that runs out lets the pool grow to twice its slots in
    /// use before anyone waits again: waits run out once per doubling (22
    /// from 1,024 slots to 2^32), or once per thread waiting then.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_at_bound(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if !self.growth_would_pass_bound() || self.reclaimer.held_back_here() {
            return None;
        }
        let mut patience = Patience::new(BOUND_PATIENCE);
        let mut napped = true;
        while napped {
            let pause = || napped = patience.nap();
            if let Some(found) = self.round_behind(home, Take::Any, pause) {
                return Some(found);
            }
            if !self.growth_would_pass_bound() {
                return None;
            }
        }
        // Relaxed: a threshold for a heuristic; any value seen is safe.
        self.bound_waived_below
            .fetch_max(2 * self.slots_used(), Ordering::Relaxed);
        None
    }

    /// Whether a fresh block would take the slots in use past the bound
    /// the pool promises, and no wait that ran out waived it for the
    /// pool's present size (see `wait_at_bound`).
    pub(super) fn growth_would_pass_bound(&self) -> bool {
        let used = self.slots_used();
        used + self.config.fresh_block as u64 > self.promised_slots()
            // Relaxed: see `wait_at_bound`.
            && used >= self.bound_waived_below.load(Ordering::Relaxed)
    }

    /// Whether slots removed through `home` will come back to it: sealed
    /// batches in flight, or a partial batch, the calling thread's magazine's
    /// or the shared one (a hint, from Relaxed loads).
    pub(super) fn own_on_the_way(&self, home: StripeIndex) -> bool {
        let (_, magazine) = self.stripes.home_and_magazine();
        self.reclaimer.has_sealed(home)
            || !RemovalBatch::is_empty_word(self.stripes[home].removals.word())
            || magazine.is_some_and(Magazine::has_removals)
    }

    /// Whether growing now would be growth the live count does not explain:
    /// more than three quarters of the bound the pool promises
    /// ([`promised_slots`](Self::promised_slots)) are already in use, so
    /// that what readers hold back is found before the bound is reached.
    /// The quarter left covers the fresh blocks of threads that passed this
    /// test at once, and growth after the back-pressure rounds run out
    /// while a reader holds batches back briefly; growth past the
    /// bound itself waits (`wait_at_bound`), and only a guard held longer
    /// than that wait takes the pool past it (see `design.md`, "Memory
    /// under churn"). At half the bound, eight threads on two cores, each
    /// holding a magazine's open batch of up to 64 slots (the batch then),
    /// were behind almost always (docs/perf/0013).
    pub(super) fn reclamation_is_behind(&self) -> bool {
        self.slots_used() > self.promised_slots() / 4 * 3
    }

    /// The slots in use the pool promises to stay within under churn with
    /// no guard held long: `4 × live + 1024`, plus three batches for each
    /// magazine in use past the second (see `design.md`, "Memory under
    /// churn"). A churning thread holds about three batches in flight by
    /// design: its magazine's open removal batch, its free run, and a
    /// sealed batch on its way back; the 1,024 cover two such threads.
    /// Without the last term, sixteen threads churning a few live values
    /// each were always "behind", and every insert's slow path waited for
    /// what nobody held back.
    pub(super) fn promised_slots(&self) -> u64 {
        // Relaxed: a hint, as the length is.
        let users = self.magazine_users.load(Ordering::Relaxed);
        4 * self.len() as u64 + 1024 + 3 * u64::from(self.config.batch) * users.saturating_sub(2)
    }
}

/// Sleeps of growing length, up to a total: for a thread that waits for
/// others to make progress it cannot make for them (see
/// `RawPool::wait_at_bound`). Under loom a nap is a yield, and the
/// patience lasts one nap: the models explore what happens between the
/// looks, not how long they take.
pub(super) struct Patience {
    /// `None` where there is no clock.
    #[cfg(not(all(test, handle_pool_loom)))]
    until: Option<std::time::Instant>,
    #[cfg(not(all(test, handle_pool_loom)))]
    nap: std::time::Duration,
    #[cfg(all(test, handle_pool_loom))]
    spent: bool,
}

impl Patience {
    /// The first nap; each next one is twice as long, up to `LONGEST_NAP`.
    #[cfg(not(all(test, handle_pool_loom)))]
    const FIRST_NAP: std::time::Duration = std::time::Duration::from_micros(50);
    #[cfg(not(all(test, handle_pool_loom)))]
    const LONGEST_NAP: std::time::Duration = std::time::Duration::from_millis(1);

    /// Patience for naps adding up to about `total` (measured in wall
    /// time, so oversleeping on a loaded machine counts). None at all
    /// where there is no clock to measure it (`wasm32-unknown-unknown`,
    /// whose `Instant::now` panics).
    pub(super) fn new(total: std::time::Duration) -> Self {
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            let clock = !cfg!(all(target_family = "wasm", target_os = "unknown"));
            Patience {
                until: clock.then(|| std::time::Instant::now() + total),
                nap: Self::FIRST_NAP,
            }
        }
        #[cfg(all(test, handle_pool_loom))]
        {
            let _ = total;
            Patience { spent: false }
        }
    }

    /// Sleeps the next nap and returns `true`, or returns `false` at once
    /// if the patience is spent.
    pub(super) fn nap(&mut self) -> bool {
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            let Some(until) = self.until else {
                return false;
            };
            let now = std::time::Instant::now();
            if now >= until {
                return false;
            }
            crate::events::count(crate::events::Event::Nap);
            std::thread::sleep(self.nap.min(until - now));
            self.nap = (self.nap * 2).min(Self::LONGEST_NAP);
            true
        }
        #[cfg(all(test, handle_pool_loom))]
        {
            if core::mem::replace(&mut self.spent, true) {
                return false;
            }
            loom::thread::yield_now();
            true
        }
    }
}
