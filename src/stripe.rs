#![doc = include_str!("../docs/stripe.md")]

use crossbeam_utils::CachePadded;

use crate::lists::{FreeList, RemovalBatch};
use crate::magazine::Magazine;
use crate::storage::Storage;
use crate::sync::{AtomicIsize, AtomicU32, AtomicU64, Ordering};
use crate::thread_id::{known_thread_id, thread_id};

/// One stripe (see the module docs).
pub(crate) struct Stripe {
    pub(crate) free: FreeList,
    pub(crate) removals: RemovalBatch,
    corrections: AtomicIsize,
    /// Slots other threads moved off the free list ([`Stripes::move_run`]),
    /// mod 2^32: the pops minus these are the stripe's inserts.
    moved_out: AtomicU64,
    /// Threads of this stripe in back-pressure rounds (see `raw`): they are
    /// waiting for their own batches, so the stripe is not quiet.
    waiting: AtomicU32,
    /// The removal batch's word when a sweep last looked (see `raw`'s
    /// `sweep`): a batch unchanged between two looks is sealed.
    swept: AtomicU64,
    /// The inserts at the last note ([`Stripes::note_inserts`]).
    noted_inserts: AtomicU64,
    /// The inserts, if the last note found none since the note before;
    /// else `NOT_QUIET`: see [`Stripe::is_quiet`].
    quiet_at: AtomicU64,
    /// The private lists of the thread numbered as this stripe (see
    /// `magazine`), on a line of their own: other threads may share the
    /// lists above.
    pub(crate) magazine: CachePadded<Magazine>,
}

/// `quiet_at` when the last note saw inserts (no `u32` count equals it).
const NOT_QUIET: u64 = u64::MAX;

impl Stripe {
    fn new() -> Self {
        Stripe {
            free: FreeList::new(),
            removals: RemovalBatch::new(),
            corrections: AtomicIsize::new(0),
            moved_out: AtomicU64::new(0),
            waiting: AtomicU32::new(0),
            swept: AtomicU64::new(0),
            noted_inserts: AtomicU64::new(0),
            quiet_at: AtomicU64::new(NOT_QUIET),
            magazine: CachePadded::new(Magazine::new()),
        }
    }

    /// Inserts through this stripe so far, mod 2^32: every insert pops
    /// once, from the shared list or the magazine; a move to another stripe
    /// pops without inserting, and so does the step that moves the shared
    /// list into the magazine (counted by the magazine).
    #[inline]
    fn inserts(&self) -> u32 {
        let moved_out = self.moved_out.load(Ordering::Relaxed) as u32;
        self.free
            .pops()
            .wrapping_sub(moved_out)
            .wrapping_add(self.magazine.inserts())
    }

    /// Removals through this stripe so far, mod 2^32: its shared batch's
    /// and its magazine's.
    #[inline]
    pub(crate) fn removal_count(&self) -> u32 {
        self.removals
            .removal_count()
            .wrapping_add(self.magazine.removal_count())
    }

    /// Notes that a sweep sees the removal batch's word `word`; returns
    /// whether the previous sweep saw the same (nobody removed since).
    #[inline]
    pub(crate) fn unchanged_since_last_sweep(&self, word: u64) -> bool {
        self.swept.swap(word, Ordering::Relaxed) == word
    }

    /// Notes the inserts so far: quiet, until the next insert, if there
    /// were none since the previous note. A sweep notes the stripe it
    /// visits, so a stripe is found quiet by removals alone too.
    pub(crate) fn note_inserts(&self) {
        let inserts = u64::from(self.inserts());
        let idle = self.noted_inserts.swap(inserts, Ordering::Relaxed) == inserts;
        let quiet_at = if idle { inserts } else { NOT_QUIET };
        self.quiet_at.store(quiet_at, Ordering::Relaxed);
    }

    /// Whether nobody has inserted through this stripe between the last
    /// two notes ([`Stripes::note_inserts`]) nor since: its threads are
    /// idle, preempted or only remove, so its free slots and ready batches
    /// are nobody's next inserts, and another thread may take them without
    /// pulling away lines a running owner is about to use. Slots moved off
    /// are not inserts. A hint (Relaxed loads): it may change at once.
    #[inline]
    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet_at.load(Ordering::Relaxed) == u64::from(self.inserts())
            && self.waiting.load(Ordering::Relaxed) == 0
    }

    /// This stripe's share of the length, mod 2^32 (see the module docs).
    #[inline]
    pub(crate) fn len_share(&self) -> u32 {
        let corrections = self.corrections.load(Ordering::Relaxed) as u32;
        self.inserts()
            .wrapping_sub(self.removal_count())
            .wrapping_add(corrections)
    }

    /// Marks a thread of this stripe as in back-pressure rounds until the
    /// returned value drops: the stripe is not quiet meanwhile.
    pub(crate) fn waiting(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(&self.waiting)
    }

    /// Records a length change that bypassed the pops and batches.
    #[inline]
    pub(crate) fn adjust_len(&self, delta: isize) {
        self.corrections.fetch_add(delta, Ordering::Relaxed);
    }
}

/// A thread in back-pressure rounds (see [`Stripe::waiting`]).
pub(crate) struct Waiting<'a>(&'a AtomicU32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Which stripe: an index below the pool's stripe count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StripeIndex(usize);

impl StripeIndex {
    /// The index as a plain number (for the reclaimer's per-stripe lists).
    #[inline]
    pub(crate) fn get(self) -> usize {
        self.0
    }
}

/// The pool's stripes.
pub(crate) struct Stripes {
    stripes: Box<[CachePadded<Stripe>]>,
    /// Threads numbered below this own their stripe's magazine: the stripe
    /// count where magazines are in use (only where the asymmetric fence
    /// is, see `magazine`), else `0`.
    owners: usize,
}

impl Stripes {
    /// `count` stripes, a power of two; their magazines in use if
    /// `magazines`.
    pub(crate) fn new(count: usize, magazines: bool) -> Self {
        assert!(
            count.is_power_of_two(),
            "the stripe count is a power of two"
        );
        Stripes {
            stripes: (0..count)
                .map(|_| CachePadded::new(Stripe::new()))
                .collect(),
            owners: if magazines { count } else { 0 },
        }
    }

    /// Notes every stripe's inserts so far, for [`Stripe::is_quiet`]: done
    /// once per `SWEEP_EVERY_POPS` pops of any stripe, and on both sides of
    /// each back-pressure yield (see `raw`), so an idle stripe is found
    /// quiet within about two of those intervals.
    pub(crate) fn note_inserts(&self) {
        crate::events::count(crate::events::Event::NoteInserts);
        for stripe in self.stripes.iter() {
            stripe.note_inserts();
        }
    }

    /// Moves up to `max` slots from `from`'s free list to `into`'s, for a
    /// thread whose own stripe ran dry; returns whether it moved any. A
    /// move is not an insert: `from` counts the run as moved out, so no
    /// share of the length changes, and a quiet stripe stays quiet.
    pub(crate) fn move_run<T>(
        &self,
        storage: &Storage<T>,
        from: StripeIndex,
        into: StripeIndex,
        max: u32,
    ) -> bool {
        let Some((run, count)) = self[from].free.pop_run(storage, max) else {
            return false;
        };
        self[from]
            .moved_out
            .fetch_add(u64::from(count), Ordering::Relaxed);
        self[into].free.push(storage, run);
        true
    }

    /// The calling thread's stripe.
    #[inline]
    pub(crate) fn home(&self) -> StripeIndex {
        self.home_of(thread_id())
    }

    /// The home stripe of the thread numbered `id` (stripe 0 for a thread
    /// past its thread-locals).
    #[inline]
    fn home_of(&self, id: Option<usize>) -> StripeIndex {
        StripeIndex(id.unwrap_or(0) & (self.stripes.len() - 1))
    }

    /// The calling thread's home stripe and, if it owns one here, its
    /// magazine (the thread numbered as the stripe, see `magazine`).
    ///
    /// A magazine's owner, the thread churn runs on, pays one load of its
    /// number and one comparison; every other thread takes the call out of
    /// line (callgrind, one-thread churn: docs/perf/0021).
    #[inline]
    pub(crate) fn home_and_magazine(&self) -> (StripeIndex, Option<&Magazine>) {
        match self.own_magazine() {
            Some((home, magazine)) => (home, Some(magazine)),
            None => self.home_and_magazine_slow(),
        }
    }

    /// The calling thread's stripe and magazine if it owns one here (it
    /// has a number, below `owners`); `None` otherwise. One load of the
    /// thread's number and one comparison.
    #[inline(always)]
    pub(crate) fn own_magazine(&self) -> Option<(StripeIndex, &Magazine)> {
        // A thread without a number (not taken yet, or given back while its
        // thread-locals are destroyed) reads `NO_NUMBER`, past every stripe.
        let id = known_thread_id();
        if id < self.owners {
            // SAFETY: `owners` is `0` or the stripe count, so `id` is a
            // stripe's index.
            let stripe = unsafe { self.stripes.get_unchecked(id) };
            return Some((StripeIndex(id), &*stripe.magazine));
        }
        None
    }

    /// [`home_and_magazine`](Self::home_and_magazine) for a thread that owns
    /// no magazine here, or has not taken its number yet (it takes it here).
    #[inline(never)]
    fn home_and_magazine_slow(&self) -> (StripeIndex, Option<&Magazine>) {
        let id = thread_id();
        let home = self.home_of(id);
        let owned = id.is_some_and(|id| id < self.owners);
        (home, owned.then(|| &*self.stripes[home.0].magazine))
    }

    /// Whether the stripes' magazines are in use.
    pub(crate) fn have_magazines(&self) -> bool {
        self.owners != 0
    }

    /// Every stripe but `home`, starting after it.
    pub(crate) fn others(&self, home: StripeIndex) -> impl Iterator<Item = StripeIndex> {
        let mask = self.stripes.len() - 1;
        (1..self.stripes.len()).map(move |step| StripeIndex((home.0 + step) & mask))
    }

    /// The stripe a sweep visits on its `turn`-th round from `home`: every
    /// stripe, in turn.
    #[inline]
    pub(crate) fn sweep_target(&self, home: StripeIndex, turn: u32) -> StripeIndex {
        StripeIndex((home.0 + turn as usize) & (self.stripes.len() - 1))
    }

    /// Every stripe, starting at `home`.
    pub(crate) fn all_from(&self, home: StripeIndex) -> impl Iterator<Item = StripeIndex> {
        core::iter::once(home).chain(self.others(home))
    }

    /// The pool's length: the shares' sum, mod 2^32 (see the module docs).
    pub(crate) fn len_sum(&self) -> u32 {
        self.stripes
            .iter()
            .map(|stripe| stripe.len_share())
            .fold(0u32, u32::wrapping_add)
    }
}

impl core::ops::Index<StripeIndex> for Stripes {
    type Output = Stripe;

    #[inline]
    fn index(&self, index: StripeIndex) -> &Stripe {
        &self.stripes[index.0]
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/stripe.rs"]
mod tests;
