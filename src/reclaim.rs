#![doc = include_str!("../docs/reclaim.md")]

use core::ptr;

use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;

use crate::lists::{Chain, SealedBatch};
use crate::slot::{SlotWord, State, NIL};
use crate::storage::Storage;
use crate::stripe::StripeIndex;
use crate::sync::{
    fence, known_thread_id, thread_id, Arc, AtomicPtr, AtomicU64, DroppingReclaimed, Ordering,
};

/// At most this many epoch pushes in [`Reclaimer::settle`]: crossbeam
/// frees what was deferred two epochs back, and a push can fail to advance
/// while another thread is briefly pinned.
const SETTLE_ROUNDS: usize = 8;

/// Epoch pushes in [`Reclaimer::drain_backlog`]: up to 128 bags.
#[cfg(not(all(test, handle_pool_loom)))]
const DRAIN_PUSHES: usize = 16;
#[cfg(all(test, handle_pool_loom))]
const DRAIN_PUSHES: usize = 1;

/// The reclamation state of one pool.
pub(crate) struct Reclaimer {
    /// Padded away from the `Arc`'s counts: every seal clones the `Arc` for
    /// its marker and whichever thread runs the marker drops it, while every
    /// seal, sweep and reclamation reads the stripes pointer here. On one
    /// line, each count change cost the other threads a miss on that read
    /// (two threads churning one pool: 100-105 M pairs/s unpadded, 106-110
    /// padded; BENCHES.md, "The header's line").
    header: Arc<CachePadded<Header>>,
    /// The one-call reads' announcements (see "One-call reads announce
    /// instead of pinning" in the module docs).
    readers: Readers,
    /// Bumped by every exclusive reclamation; recorded in every batch.
    /// Written only through `&mut self`, so a plain number.
    era: u64,
}

/// The one-call reads' announcements, and the pool-wide seal count they
/// announce.
struct Readers {
    /// `1 +` how many batches the pool has sealed (so never `IDLE`); a
    /// sealed batch records its position: the value this had just before
    /// its seal raised it.
    sealed: CachePadded<AtomicU64>,
    /// One word per thread number below the stripe count, written only by
    /// that thread: `IDLE`, or `sealed` as the thread's one-call read in
    /// progress saw it when it began.
    words: Box<[CachePadded<AtomicU64>]>,
}

/// A reader's word while it is in no one-call read of the pool.
const IDLE: u64 = 0;

/// Clears a one-call read's announcement when the read ends, by return or
/// by unwinding (see [`Reclaimer::read`]).
struct Announced<'a>(&'a AtomicU64);

impl Drop for Announced<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release pairs with the Acquire loads in `Readers::horizon`: what
        // this read did with the value happens before a reclamation that
        // sees the word cleared (or announced again) drops it.
        self.0.store(IDLE, Ordering::Release);
    }
}

impl Readers {
    fn new(threads: usize) -> Self {
        Readers {
            sealed: CachePadded::new(AtomicU64::new(1)),
            words: (0..threads)
                .map(|_| CachePadded::new(AtomicU64::new(IDLE)))
                .collect(),
        }
    }

    /// The smallest announcement of a one-call read in progress
    /// (`u64::MAX` if none): a batch at a position at or past it may still
    /// be read, one before it may not.
    fn horizon(&self) -> u64 {
        // SeqCst pairs with the reader's fence in `read_announced`: either
        // this load sees its announcement, or its slot load sees every
        // removal that happened before this fence (see the module docs).
        fence(Ordering::SeqCst);
        self.words
            .iter()
            // Acquire pairs with the reader's Release stores: a read that
            // left (or announced again) is over before what we do next.
            .map(|word| word.load(Ordering::Acquire))
            .filter(|&announced| announced != IDLE)
            .min()
            .unwrap_or(u64::MAX)
    }
}

/// What the deferred closures share with the pool.
struct Header {
    stripes: Box<[CachePadded<StripeBatches>]>,
}

impl Header {
    /// What a grace marker does when it runs: records every batch of
    /// `stripe` numbered up to `number` as past its grace period.
    fn grace(&self, stripe: StripeIndex, number: u64) {
        // Release pairs with the Acquire load in `reclaim_ready`: a
        // reclaimer that sees the number runs after the grace period.
        self.stripes[stripe.get()]
            .graced
            .fetch_max(number, Ordering::Release);
    }
}

/// One stripe's sealed batches, numbered in the order they were sealed.
struct StripeBatches {
    /// Sealed batches not reclaimed yet, with their numbers: visible to
    /// every thread, so no batch is stranded with a thread that goes idle.
    sealed: BatchList,
    /// How many batches of this stripe have been sealed: the number of the
    /// latest.
    count: AtomicU64,
    /// Every batch numbered up to this one is past its grace period.
    graced: AtomicU64,
    /// The highest number an adopter's marker covers. Those markers go to
    /// crossbeam's global queue at once, where any thread's epoch push runs
    /// them, so batches up to here need no other marker (see `adopt`).
    adopted: AtomicU64,
    /// The highest `graced` a reclaimer has taken the sealed list for,
    /// lowered again by every push of a batch numbered at or below it:
    /// `graced > taken` says a batch past its grace period may be waiting
    /// (see `StripeBatches::put` for why no batch is left behind).
    taken: AtomicU64,
    /// Batches past their grace period that a one-call read in progress
    /// holds back: apart from `sealed`, so that the reclamations the read
    /// outlasts do not walk them again and again.
    held: BatchList,
    /// The lowest position among the `held` batches, `NONE_HELD` if none:
    /// a hint, lowered by every push onto `held` (see `StripeBatches::hold`).
    held_from: AtomicU64,
}

/// `held_from` with no batch held back.
const NONE_HELD: u64 = u64::MAX;

impl StripeBatches {
    /// Batches sealed and not yet past their grace period (a hint, from
    /// Relaxed loads).
    fn in_flight(&self) -> u64 {
        let count = self.count.load(Ordering::Relaxed);
        count.saturating_sub(self.graced.load(Ordering::Relaxed))
    }

    /// Puts batches on the sealed list, `lowest` the lowest number among
    /// them, and lowers `taken` below it.
    ///
    /// No batch is left behind: if a reclaimer's `fetch_max` on `taken`
    /// comes after our `fetch_min` in its order, it synchronises with it
    /// (Release here, AcqRel there, one chain of read-modify-writes) and its
    /// take sees our push; if it comes before, `taken` ends below `lowest`,
    /// so once `graced` reaches `lowest` the hint is up until someone takes
    /// the list again.
    fn put(&self, batches: OwnedBatches) {
        let Some(lowest) = batches.lowest() else {
            return;
        };
        self.sealed.push_all(batches);
        // Release: see above.
        self.taken.fetch_min(lowest - 1, Ordering::Release);
    }

    /// Puts batches a one-call read holds back on the `held` list, and
    /// lowers `held_from` to the lowest position among them.
    ///
    /// No batch is left behind: if a reclaimer's swap of `held_from` comes
    /// after our `fetch_min`, it synchronises with it (Release here, AcqRel
    /// there) and its take sees our push; if it comes before, `held_from`
    /// ends at most `lowest`, so the hint stays up until someone takes the
    /// list again.
    fn hold(&self, batches: OwnedBatches) {
        let Some(lowest) = batches.lowest_position() else {
            return;
        };
        self.held.push_all(batches);
        // Release: see above.
        self.held_from.fetch_min(lowest, Ordering::Release);
    }
}

/// What a reclamation of a stripe's batches got.
pub(crate) struct Reclaimed {
    /// Whether any batch was past its grace period.
    pub(crate) found: bool,
    /// The slots that became free, for the caller to push on a free list.
    pub(crate) free: Option<Chain>,
}

impl Reclaimer {
    pub(crate) fn new(stripes: usize) -> Self {
        Reclaimer {
            header: Arc::new(CachePadded::new(Header {
                stripes: (0..stripes)
                    .map(|_| {
                        CachePadded::new(StripeBatches {
                            sealed: BatchList::new(),
                            count: AtomicU64::new(0),
                            graced: AtomicU64::new(0),
                            adopted: AtomicU64::new(0),
                            taken: AtomicU64::new(0),
                            held: BatchList::new(),
                            held_from: AtomicU64::new(NONE_HELD),
                        })
                    })
                    .collect(),
            })),
            readers: Readers::new(stripes),
            era: 0,
        }
    }

    /// Runs the one-call read `read` protected: a reference to a value
    /// whose word `read` sees `OCCUPIED` stays valid until `read` returns.
    /// Announces the read in the calling thread's word (see "One-call reads
    /// announce instead of pinning" in the module docs), or pins when the
    /// thread has none.
    #[inline]
    pub(crate) fn read<R>(&self, read: impl FnOnce() -> R) -> R {
        match self.readers.words.get(known_thread_id()) {
            Some(word) => self.read_announced(word, read),
            None => self.read_first_or_pinned(read),
        }
    }

    /// [`Reclaimer::read`] on a thread that has not taken its number yet
    /// (it takes it here), or has no word: pinned for the call then. Out
    /// of line, so the common path carries neither the registry nor a
    /// guard to drop.
    #[cold]
    #[inline(never)]
    fn read_first_or_pinned<R>(&self, read: impl FnOnce() -> R) -> R {
        match thread_id().and_then(|id| self.readers.words.get(id)) {
            Some(word) => self.read_announced(word, read),
            None => {
                let _pinned = self.pin();
                read()
            }
        }
    }

    /// [`Reclaimer::read`] on a thread whose word is `word`.
    #[inline(always)]
    fn read_announced<R>(&self, word: &AtomicU64, read: impl FnOnce() -> R) -> R {
        // Relaxed: only this thread writes its word. Nonzero means a read
        // of ours is in progress further up the stack: its announcement is
        // older, so it covers this read too, and it clears the word itself.
        if word.load(Ordering::Relaxed) != IDLE {
            return read();
        }
        // Acquire pairs with the Release increment in `seal`: a read that
        // announces past a batch's position sees the batch's removals.
        let sealed = self.readers.sealed.load(Ordering::Acquire);
        // Release: see `Announced::drop`.
        word.store(sealed, Ordering::Release);
        let _announced = Announced(word);
        // SeqCst pairs with the reclaimer's fence in `Readers::horizon`.
        fence(Ordering::SeqCst);
        read()
    }

    /// Whether the calling thread holds reclamation back itself, or may:
    /// it is pinned (a guard of its own, or an iteration), inside a one-call
    /// read of this pool, or dropping values a reclamation took (whose
    /// batches nobody else can reclaim meanwhile). A thread whose number is
    /// given back (it is running thread-local destructors) counts too:
    /// crossbeam's own thread-local may be gone already, and with it the
    /// answer to whether the thread holds a guard. Waiting for reclamation
    /// would then wait for itself.
    pub(crate) fn held_back_here(&self) -> bool {
        let number = known_thread_id();
        number == usize::MAX
            || crossbeam_epoch::is_pinned()
            || DroppingReclaimed::here()
            || self
                .readers
                .words
                .get(number)
                // Relaxed: only this thread writes its word.
                .is_some_and(|word| word.load(Ordering::Relaxed) != IDLE)
    }

    /// A guard pinned on the collector batches are deferred on: the default
    /// one, the only one a [`crate::Guard`] can pin.
    #[inline]
    pub(crate) fn pin(&self) -> crate::Guard {
        crate::pin()
    }

    /// Takes a batch of `stripe` just sealed: numbers it, puts it on the
    /// stripe's sealed list, and defers a *grace marker* for its number on
    /// this thread. The marker waits in this thread's local bag until the
    /// thread next pushes the epoch (its next sweep or slow path, within four
    /// seals) or the bag fills; should the thread go idle first, a sweep
    /// elsewhere finds the stripe idle and `adopt`s its batches.
    pub(crate) fn defer(&self, stripe: StripeIndex, batch: SealedBatch) {
        let number = self.seal(stripe, batch);
        self.defer_marker(stripe, number, &self.pin());
    }

    /// Numbers a batch of `stripe` just sealed and puts it on the stripe's
    /// sealed list; returns its number.
    fn seal(&self, stripe: StripeIndex, batch: SealedBatch) -> u64 {
        let batches = &self.header.stripes[stripe.get()];
        // AcqRel: numbers are handed out in one order, and each sealer
        // synchronises with every earlier one, so the slots of every batch
        // numbered below ours were removed before our marker is deferred: a
        // marker covers every batch up to its number (see `adopt`).
        let number = batches.count.fetch_add(1, Ordering::AcqRel) + 1;
        // Release pairs with the Acquire load in `read_announced`: a read
        // that sees this increment sees the batch's removals.
        let position = self.readers.sealed.fetch_add(1, Ordering::Release);
        let mut sealed = OwnedBatches::new();
        sealed.add(Box::new(SealedNode {
            batch,
            number,
            position,
            era: self.era,
            next: AtomicPtr::new(ptr::null_mut()),
        }));
        batches.put(sealed);
        number
    }

    /// Defers, on this thread, a grace marker for every batch sealed so far
    /// on each of `stripes` that is neither past its grace period yet nor
    /// covered by an earlier adopter's marker, and flushes them to the
    /// global queue: the batches of a stripe whose owner went idle with its
    /// own markers in its local bag. Returns whether it deferred any (and
    /// so flushed). For sweeps and back-pressure rounds.
    ///
    /// A marker already on the global queue is not deferred again: while a
    /// guard holds the epoch back, every back-pressure round adopts, and
    /// each marker deferred again was one more bag on crossbeam's queue,
    /// shared by the whole process, where each epoch push works off at most
    /// eight (a pool churned next on that thread waited at its bound and
    /// grew past it: BENCHES.md, "Adopting once").
    pub(crate) fn adopt(&self, stripes: impl IntoIterator<Item = StripeIndex>) -> bool {
        self.adopt_past(stripes, true)
    }

    /// [`adopt`](Self::adopt), deferring a marker even for batches an
    /// earlier adopter's marker covers: for `flush`, which must not rely on
    /// that marker. Its adopter, pinned and then preempted before queueing
    /// it, may queue it an epoch later than a marker deferred here, and
    /// `settle` pushes the epoch a bounded number of times.
    pub(crate) fn adopt_anew(&self, stripes: impl IntoIterator<Item = StripeIndex>) -> bool {
        self.adopt_past(stripes, false)
    }

    fn adopt_past(
        &self,
        stripes: impl IntoIterator<Item = StripeIndex>,
        skip_covered: bool,
    ) -> bool {
        let mut guard = None;
        let mut deferred = false;
        for stripe in stripes {
            let batches = &self.header.stripes[stripe.get()];
            // Acquire pairs with the sealers' AcqRel increments: the slots of
            // every batch counted were removed before the marker is deferred.
            let count = batches.count.load(Ordering::Acquire);
            if count <= batches.graced.load(Ordering::Relaxed) {
                continue;
            }
            // Pinned before the watermark is raised, so that an adopter that
            // finds it raised and defers nothing cannot push the epoch two
            // steps past our pin until we unpin, by when our marker is on
            // the global queue. AcqRel: our pin happens before the Release
            // half; an adopter whose `fetch_max` reads ours (directly or
            // through later `fetch_max`es, one release sequence) acquires
            // it, so the epoch pushes it makes afterwards see us pinned.
            let guard = guard.get_or_insert_with(|| self.pin());
            let covered = batches.adopted.fetch_max(count, Ordering::AcqRel) >= count;
            if !(skip_covered && covered) {
                self.defer_marker(stripe, count, guard);
                deferred = true;
            }
        }
        match guard {
            Some(guard) if deferred => {
                guard.flush();
                true
            }
            _ => false,
        }
    }

    /// Defers a closure that records batches up to `number` of `stripe` as
    /// past their grace period. crossbeam runs it once every thread pinned
    /// now has unpinned: the only threads that can have read one of those
    /// slots `OCCUPIED` under a guard, since every slot was removed before
    /// this call (see `defer`) and a reader with a guard pins before it
    /// loads. (One-call reads that do not pin are waited for by
    /// `reclaim_ready`.)
    fn defer_marker(&self, stripe: StripeIndex, number: u64, guard: &Guard) {
        let header = Arc::clone(&self.header);
        guard.defer(move || header.grace(stripe, number));
    }

    /// For the loom models of the sealed lists: seals without deferring a
    /// marker, and runs, at once, the marker an adopter would defer now.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn seal_without_marker(&self, stripe: StripeIndex, batch: SealedBatch) -> u64 {
        self.seal(stripe, batch)
    }

    /// Whether `reclaim_ready` may find something: a batch past its grace
    /// period waits (`graced > taken`), or a one-call read holds some back.
    /// A hint, for callers choosing among stripes.
    #[inline]
    pub(crate) fn has_ready(&self, stripe: StripeIndex) -> bool {
        let batches = &self.header.stripes[stripe.get()];
        batches.graced.load(Ordering::Relaxed) > batches.taken.load(Ordering::Relaxed)
            || batches.held_from.load(Ordering::Relaxed) != NONE_HELD
    }

    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn grace_as_adopter(&self, stripe: StripeIndex) {
        let count = self.header.stripes[stripe.get()]
            .count
            .load(Ordering::Acquire);
        self.header.grace(stripe, count);
    }

    /// Pushes the epoch until no batch is in flight, or for at most
    /// `SETTLE_ROUNDS` rounds (a guard pinned before a batch was deferred
    /// holds it back for as long as it lives).
    pub(crate) fn settle(&self) {
        for _ in 0..SETTLE_ROUNDS {
            if self.in_flight() == 0 {
                return;
            }
            self.advance_epoch();
        }
    }

    /// Pins, pushes this thread's grace markers to the global queue, and
    /// helps the epoch advance and expired markers run.
    pub(crate) fn advance_epoch(&self) {
        self.pin().flush();
    }

    /// Pushes the epoch `DRAIN_PUSHES` times. Each push runs at most eight
    /// bags of expired deferred functions off crossbeam's global queue,
    /// which every user of the default collector shares, so a backlog that
    /// long pins left anywhere in the process keeps our grace markers
    /// waiting long after their epoch has passed. Cheap when nothing has
    /// expired: a push then stops at the queue's first bag.
    pub(crate) fn drain_backlog(&self) {
        let mut guard = self.pin();
        for _ in 0..DRAIN_PUSHES {
            guard.flush();
            guard.repin();
        }
    }

    /// Pushes the epoch twice (re-pinning between the pushes, which lets the
    /// second one advance it again): enough for the markers this thread
    /// flushes now to run, unless another thread pinned holds it back.
    pub(crate) fn advance_epoch_twice(&self) {
        let mut guard = self.pin();
        guard.flush();
        guard.repin();
        guard.flush();
    }

    /// Batches of `stripe` sealed and not yet past their grace period (a
    /// hint, from Relaxed loads).
    pub(crate) fn in_flight_of(&self, stripe: StripeIndex) -> u64 {
        self.header.stripes[stripe.get()].in_flight()
    }

    /// Batches sealed and not yet past their grace period, pool-wide (a
    /// hint, from Relaxed loads of each stripe's numbers: no counter shared
    /// by every stripe is written per batch).
    pub(crate) fn in_flight(&self) -> u64 {
        self.header
            .stripes
            .iter()
            .map(|batches| batches.in_flight())
            .sum()
    }

    /// Reclaims every batch of `stripe` past its grace period: drops the
    /// values and vacates the slots (or, without drop glue, splices them
    /// unwalked: see `reclaim_batch`), and returns the free ones as one chain
    /// for the caller to push. The others go back on the sealed list, and
    /// those a one-call read holds back on the held list. Costs three loads
    /// when nothing is past its grace period (`graced <= taken`) and nothing
    /// is held, and a fence and a load per stripe while a read holds batches
    /// back, so callers need no check of their own.
    /// Batches of an earlier era are discarded unread. A value's `Drop`
    /// panicking here is discarded.
    pub(crate) fn reclaim_ready<T>(
        &self,
        stripe: StripeIndex,
        storage: &Storage<T>,
        max_generation: u32,
    ) -> Reclaimed {
        let mut reclaimed = Reclaimed {
            found: false,
            free: None,
        };
        let batches = &self.header.stripes[stripe.get()];
        // Acquire pairs with the markers' Release `fetch_max`: every batch
        // numbered up to `graced` is past its grace period, including those
        // whose sealer had not pushed them yet when the marker ran.
        let graced = batches.graced.load(Ordering::Acquire);
        let graced_waiting = graced > batches.taken.load(Ordering::Relaxed);
        let held_from = batches.held_from.load(Ordering::Relaxed);
        // Only a guess (this horizon is read before the take, so it cannot
        // judge what the take finds): whether the read holding the held
        // batches back may be over.
        let held_free = held_from != NONE_HELD && held_from < self.readers.horizon();
        if !graced_waiting && !held_free {
            return reclaimed;
        }
        let held = if held_free {
            // AcqRel: the Acquire half pairs with `hold`'s Release (see there).
            batches.held_from.swap(NONE_HELD, Ordering::AcqRel);
            batches.held.take_all()
        } else {
            TakenBatches::none()
        };
        let sealed = if graced_waiting {
            // AcqRel: the Acquire half pairs with `put`'s Release (see there).
            batches.taken.fetch_max(graced, Ordering::AcqRel);
            batches.sealed.take_all()
        } else {
            TakenBatches::none()
        };
        let (mut waiting, mut still_held) = (OwnedBatches::new(), OwnedBatches::new());
        // Read once, after both takes: every batch it judges was sealed, so
        // its slots removed, before its fence (see the module docs).
        let mut horizon = None;
        // Held batches are past their grace period already.
        let past_grace = held.chain(sealed.filter_map(|node| {
            if node.number > graced {
                waiting.add(node);
                return None;
            }
            Some(node)
        }));
        for node in past_grace {
            if node.era != self.era {
                // Already reclaimed by an exclusive reclamation: discarded.
                reclaimed.found = true;
                continue;
            }
            if node.position >= *horizon.get_or_insert_with(|| self.readers.horizon()) {
                // A one-call read that began before its seal is in progress.
                still_held.add(node);
                continue;
            }
            reclaimed.found = true;
            reclaimed.free = reclaim_batch(storage, node.batch, max_generation, reclaimed.free);
        }
        batches.put(waiting);
        batches.hold(still_held);
        reclaimed
    }

    /// Exclusive reclamation begins: every batch sealed so far belongs to an
    /// earlier era from now on, and is discarded (the caller finds their
    /// slots by scanning). No marker can be needed for them any more.
    pub(crate) fn begin_exclusive(&mut self) {
        self.era += 1;
        for batches in self.header.stripes.iter() {
            batches.sealed.take_all().for_each(drop);
            batches.held.take_all().for_each(drop);
            batches.held_from.store(NONE_HELD, Ordering::Relaxed);
            // `&mut self`: no sealer runs; markers still in the collector
            // find `graced` at the count already and change nothing.
            let count = batches.count.load(Ordering::Relaxed);
            batches.taken.fetch_max(count, Ordering::Relaxed);
            batches.graced.fetch_max(count, Ordering::Relaxed);
        }
    }
}

/// Reclaims a batch whose grace period is over and that no one-call read
/// holds back (see `Reclaimer::reclaim_ready`): drops the values, vacates
/// the slots, and returns `free` with the slots that became `FREE` in front.
///
/// A batch of values without drop glue whose last slot is known is not
/// walked: it goes in front of `free` as it is, its words still `REMOVED`,
/// which every pop treats as `FREE` (same generation, link in the same
/// bits). There is nothing to drop, and no slot to retire: a removal at
/// the generation limit retired its slot at once and joined no batch
/// (`Slot::try_remove_and_retire`). Under one-thread churn this took 13%
/// of the instructions per insert and remove pair away (BENCHES.md).
fn reclaim_batch<T>(
    storage: &Storage<T>,
    batch: SealedBatch,
    max_generation: u32,
    mut free: Option<Chain>,
) -> Option<Chain> {
    if !core::mem::needs_drop::<T>() && batch.last != NIL {
        if let Some(free) = free {
            let last = &storage.slot(batch.last).word;
            // Relaxed: as for the walk below; the batch is ours.
            let word = SlotWord::from_bits(last.load(Ordering::Relaxed));
            last.store(word.with_link(free.first).to_bits(), Ordering::Relaxed);
        }
        return Some(Chain {
            first: batch.head,
            last: free.map_or(batch.last, |free| free.last),
        });
    }
    // Values are dropped below, and a `Drop` may insert into this pool.
    let _dropping = DroppingReclaimed::enter();
    let mut index = batch.head;
    for _ in 0..batch.count {
        let slot = storage.slot(index);
        // Relaxed: the batch's words were made visible to its sealer by the
        // removal batch's pushes and seal, and to us by the sealed list's
        // push and take.
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        debug_assert_eq!(word.state(), State::Removed, "batch slot {index}");
        // SAFETY: the slot is REMOVED and in a batch whose grace period is
        // over, which no one-call read in progress began before (its position
        // is below the horizon read after its take), and whose era is
        // current: no reference to its value is left,
        // and no one else reclaims it (each sealed batch is taken once, and an
        // exclusive reclamation would have changed the era).
        let (vacant, panic) =
            unsafe { slot.reclaim(word.generation(), Chain::link_to(free), max_generation) };
        // Not the inserting caller's business: see the module docs.
        drop(panic);
        if vacant.state() == State::Free {
            free = Some(Chain::prepend(free, index));
        }
        index = word.link();
    }
    free
}

/// A sealed batch, on its stripe's sealed list.
struct SealedNode {
    batch: SealedBatch,
    /// Its place in the order the stripe's batches were sealed.
    number: u64,
    /// Its place in the order the pool's batches were sealed, for the
    /// one-call reads' announcements.
    position: u64,
    /// The reclaimer's era when the batch was sealed.
    era: u64,
    next: AtomicPtr<SealedNode>,
}

/// A stack of sealed batches: push a chain, take all (so no ABA).
struct BatchList {
    head: AtomicPtr<SealedNode>,
}

impl BatchList {
    fn new() -> Self {
        BatchList {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[inline]
    fn looks_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    /// Pushes every batch of `batches` with one CAS.
    fn push_all(&self, mut batches: OwnedBatches) {
        let (first, last) = (batches.first, batches.last);
        if first.is_null() {
            return;
        }
        // The chain is the list's from the CAS on: `batches` must not free it.
        batches.first = ptr::null_mut();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `last` is a node of the chain `batches` owned, which
            // nobody else sees until the CAS below succeeds.
            unsafe { (*last).next.store(head, Ordering::Relaxed) };
            // Release pairs with the Acquire swap in `take_all`: the nodes'
            // fields and links are written before the taker reads them.
            match self
                .head
                .compare_exchange_weak(head, first, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Takes every node; they are freed as the iterator goes (or drops).
    fn take_all(&self) -> TakenBatches {
        if self.looks_empty() {
            return TakenBatches::none();
        }
        // Acquire pairs with the Release CAS in `push`.
        TakenBatches(self.head.swap(ptr::null_mut(), Ordering::Acquire))
    }
}

/// Sealed batches one thread owns, linked through `next`, on their way
/// onto a sealed list (one CAS for all of them); freed if dropped instead.
struct OwnedBatches {
    first: *mut SealedNode,
    last: *mut SealedNode,
    lowest: u64,
    lowest_position: u64,
}

impl OwnedBatches {
    fn new() -> Self {
        OwnedBatches {
            first: ptr::null_mut(),
            last: ptr::null_mut(),
            lowest: u64::MAX,
            lowest_position: u64::MAX,
        }
    }

    fn add(&mut self, node: Box<SealedNode>) {
        self.lowest = self.lowest.min(node.number);
        self.lowest_position = self.lowest_position.min(node.position);
        let node = Box::into_raw(node);
        // SAFETY: `node` came from `Box::into_raw` just above; the chain is
        // ours alone.
        unsafe { (*node).next.store(self.first, Ordering::Relaxed) };
        if self.last.is_null() {
            self.last = node;
        }
        self.first = node;
    }

    /// The lowest batch number held, if any.
    fn lowest(&self) -> Option<u64> {
        (!self.first.is_null()).then_some(self.lowest)
    }

    /// The lowest position (see `SealedNode::position`) held, if any.
    fn lowest_position(&self) -> Option<u64> {
        (!self.first.is_null()).then_some(self.lowest_position)
    }
}

impl Drop for OwnedBatches {
    fn drop(&mut self) {
        // The chain is built like a taken list: the same walk frees it.
        drop(TakenBatches(self.first));
    }
}

/// A chain of nodes owned whole (a sealed list swapped out, or an
/// `OwnedBatches` chain), yielded one by one; freed if dropped.
struct TakenBatches(*mut SealedNode);

impl TakenBatches {
    /// An empty list: what a reclaimer that takes nothing walks.
    fn none() -> Self {
        TakenBatches(ptr::null_mut())
    }
}

impl Iterator for TakenBatches {
    type Item = Box<SealedNode>;

    fn next(&mut self) -> Option<Box<SealedNode>> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: the chain is ours alone (swapped out of a sealed list
        // whole, or never pushed); each node came from `Box::into_raw` in
        // `OwnedBatches::add`, and we advance past it before handing it out,
        // so it is owned once.
        let node = unsafe { Box::from_raw(self.0) };
        self.0 = node.next.load(Ordering::Relaxed);
        Some(node)
    }
}

impl Drop for TakenBatches {
    fn drop(&mut self) {
        self.for_each(drop);
    }
}

impl Drop for Header {
    fn drop(&mut self) {
        // Batches sealed and never reclaimed: the pool's drop had already
        // dropped every value.
        for batches in self.stripes.iter() {
            batches.sealed.take_all().for_each(drop);
            batches.held.take_all().for_each(drop);
        }
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/reclaim.rs"]
mod tests;
