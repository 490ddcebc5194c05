#![doc = include_str!("../docs/reclaim.md")]

use core::ptr;

use crossbeam_utils::CachePadded;

use crate::announce::{self, IDLE};
use crate::lists::{Chain, SealedBatch};
use crate::slot::{discard, SlotWord, State, NIL};
use crate::storage::Storage;
use crate::stripe::StripeIndex;
use crate::sync::{fence, AtomicPtr, AtomicU64, Ordering};
use crate::thread_id::{known_thread_id, thread_id, NO_NUMBER};

/// The reclamation state of one pool.
pub(crate) struct Reclaimer {
    /// Each stripe's sealed batches.
    stripes: Box<[CachePadded<StripeBatches>]>,
    /// The one-call reads' announcements (see "One-call reads announce in
    /// the pool" in the module docs).
    readers: Readers,
}

/// The one-call reads' announcements of one pool.
struct Readers {
    /// One word per thread number below the stripe count, written only by
    /// that thread: `IDLE`, or the seal count (`announce::sealed_so_far`)
    /// as the thread's one-call read in progress saw it when it began.
    words: Box<[CachePadded<AtomicU64>]>,
}

/// Clears a one-call read's announcement when the read ends, by return or
/// by unwinding (see [`Reclaimer::read`]).
struct Announced<'a>(&'a AtomicU64);

impl Drop for Announced<'_> {
    #[inline]
    fn drop(&mut self) {
        announce::clear(self.0);
    }
}

impl Readers {
    fn new(threads: usize) -> Self {
        Readers {
            words: (0..threads)
                .map(|_| CachePadded::new(AtomicU64::new(IDLE)))
                .collect(),
        }
    }

    /// The oldest announcement of a one-call read in progress (`u64::MAX`
    /// if none). The caller has issued its `SeqCst` fence.
    fn oldest(&self) -> u64 {
        announce::oldest(self.words.iter().map(|word| &**word))
    }
}

/// One stripe's sealed batches.
struct StripeBatches {
    /// Sealed batches not reclaimed yet: visible to every thread, so no
    /// batch is stranded with a thread that goes idle.
    sealed: BatchList,
    /// The lowest position among the `sealed` batches, `NONE_SEALED` if
    /// none: a hint, lowered by every push (see `StripeBatches::put`), so
    /// that a reclaimer can tell without taking the list whether a batch
    /// on it may be past every announcement.
    lowest: AtomicU64,
}

/// `lowest` with no batch sealed.
const NONE_SEALED: u64 = u64::MAX;

impl StripeBatches {
    /// Puts batches on the sealed list and lowers `lowest` to the lowest
    /// position among them.
    ///
    /// No batch is left behind: if a reclaimer's swap of `lowest` comes
    /// after our `fetch_min` in its order, it synchronises with it
    /// (Release here, AcqRel there, one chain of read-modify-writes) and its
    /// take sees our push; if it comes before, `lowest` ends at most our
    /// lowest position, so the hint stays up until someone takes the list
    /// again.
    fn put(&self, batches: OwnedBatches) {
        let Some(lowest) = batches.lowest_position() else {
            return;
        };
        self.sealed.push_all(batches);
        // Release: see above.
        self.lowest.fetch_min(lowest, Ordering::Release);
    }
}

/// The readers' horizon for one look at several stripes' sealed batches:
/// read (a `SeqCst` fence and a load of every announcement) the first time
/// a stripe with sealed batches is judged, then reused for the others.
///
/// A horizon read earlier is still a horizon (module docs, "One horizon
/// per look"): each of its reasons is about the moment it was read, so a
/// batch below it stays clear of every reader. Reused, it only holds back
/// batches sealed or readers gone since, until the next look reads a new
/// one. So a slow path that judges every stripe pays one fence and one
/// scan of the announcements, not one per stripe.
pub(crate) struct Horizon(Option<u64>);

impl Horizon {
    /// Not read yet: the first stripe with sealed batches reads it.
    pub(crate) const fn unread() -> Self {
        Horizon(None)
    }
}

/// What a reclamation of a stripe's batches got.
pub(crate) struct Reclaimed {
    /// Whether any batch was reclaimed.
    pub(crate) found: bool,
    /// The slots that became free, for the caller to push on a free list.
    pub(crate) free: Option<Chain>,
}

impl Reclaimer {
    pub(crate) fn new(stripes: usize) -> Self {
        Reclaimer {
            stripes: (0..stripes)
                .map(|_| {
                    CachePadded::new(StripeBatches {
                        sealed: BatchList::new(),
                        lowest: AtomicU64::new(NONE_SEALED),
                    })
                })
                .collect(),
            readers: Readers::new(stripes),
        }
    }

    /// Runs the one-call read `read` protected: a reference to a value
    /// whose word `read` sees `OCCUPIED` stays valid until `read` returns.
    /// Announces the read in the calling thread's word in this pool (see
    /// "One-call reads announce in the pool" in the module docs), or, when
    /// the thread has none, in its guards' word.
    #[inline]
    pub(crate) fn read<R>(&self, read: impl FnOnce() -> R) -> R {
        match self.readers.words.get(known_thread_id()) {
            Some(word) => Self::read_announced(word, read),
            None => self.read_first_or_elsewhere(read),
        }
    }

    /// [`Reclaimer::read`] on a thread that has not taken its number yet
    /// (it takes it here), or has no word in this pool (numbered past the
    /// stripe count, or without a number): announced in the thread's
    /// guards' word for the call then, as a guard would be, without
    /// crossbeam's pin. Out of line, so the common path carries neither the
    /// registry nor a section to drop.
    #[cold]
    #[inline(never)]
    fn read_first_or_elsewhere<R>(&self, read: impl FnOnce() -> R) -> R {
        match thread_id().and_then(|id| self.readers.words.get(id)) {
            Some(word) => Self::read_announced(word, read),
            None => {
                let _section = announce::Announcement::begin();
                read()
            }
        }
    }

    /// [`Reclaimer::read`] on a thread whose word is `word`.
    #[inline(always)]
    fn read_announced<R>(word: &AtomicU64, read: impl FnOnce() -> R) -> R {
        // Relaxed: only this thread writes its word. Nonzero means a read
        // of ours is in progress further up the stack: its announcement is
        // older, so it covers this read too, and it clears the word itself.
        if word.load(Ordering::Relaxed) != IDLE {
            return read();
        }
        announce::announce(word);
        let _announced = Announced(word);
        read()
    }

    /// Whether the calling thread holds reclamation back itself, or may:
    /// it holds a guard (its own, or an iteration's), is inside a one-call
    /// read of this pool, or is dropping values a reclamation took (whose
    /// batches nobody else can reclaim meanwhile). A thread whose number is
    /// given back (it is running thread-local destructors) counts too: it
    /// may be inside a guard kept in a thread-local, or a destructor that
    /// pinned. Waiting for reclamation would then wait for itself.
    pub(crate) fn held_back_here(&self) -> bool {
        let number = known_thread_id();
        number == NO_NUMBER
            || announce::guarded_here()
            || DroppingReclaimed::here()
            || self
                .readers
                .words
                .get(number)
                // Relaxed: only this thread writes its word.
                .is_some_and(|word| word.load(Ordering::Relaxed) != IDLE)
    }

    /// Takes a batch of `stripe` just sealed: gives it its position (see
    /// "Grace by announcement" in the module docs) and puts it on the
    /// stripe's sealed list, where any thread's reclamation finds it.
    pub(crate) fn seal(&self, stripe: StripeIndex, batch: SealedBatch) {
        crate::events::count(crate::events::Event::Seal);
        let position = announce::seal_position();
        let mut sealed = OwnedBatches::new();
        sealed.add(Box::new(SealedNode {
            batch,
            position,
            next: AtomicPtr::new(ptr::null_mut()),
        }));
        self.stripes[stripe.get()].put(sealed);
    }

    /// Whether `stripe` has sealed batches not reclaimed yet (a hint, from
    /// a Relaxed load), for callers choosing among stripes.
    #[inline]
    pub(crate) fn has_sealed(&self, stripe: StripeIndex) -> bool {
        self.stripes[stripe.get()].lowest.load(Ordering::Relaxed) != NONE_SEALED
    }

    /// The position below which a batch may be reclaimed now: below the
    /// seal count read first (so its slots were removed before the fence
    /// below), and below every announcement of a guard or of a one-call
    /// read of this pool in progress.
    fn horizon(&self) -> u64 {
        crate::events::count(crate::events::Event::Horizon);
        let sealed = announce::sealed_so_far();
        // SeqCst pairs with the fence of `announce::announce`: either a load
        // below sees a reader's announcement, or the reader's slot loads
        // see every removal that happened before this fence.
        fence(Ordering::SeqCst);
        sealed
            .min(announce::oldest_guard())
            .min(self.readers.oldest())
    }

    /// Reclaims every batch of `stripe` that no reader can still see:
    /// drops the values and vacates the slots (or, without drop glue,
    /// splices them unwalked: see `reclaim_batch`), and returns the free
    /// ones as one chain for the caller to push. The others go back on the
    /// sealed list. Costs one load when nothing is sealed, and a fence and
    /// a load per announcement otherwise, so callers need no check of their
    /// own. A value's `Drop` panicking here is discarded.
    ///
    /// The horizon is `horizon`'s, read now if it was not yet.
    pub(crate) fn reclaim_ready<T>(
        &self,
        stripe: StripeIndex,
        storage: &Storage<T>,
        max_generation: u32,
        horizon: &mut Horizon,
    ) -> Reclaimed {
        let mut free = None;
        let found = self.reclaim_ready_with(stripe, horizon, |batch| {
            free = reclaim_batch(storage, batch, max_generation, free.take());
        });
        Reclaimed { found, free }
    }

    /// Hands every batch of `stripe` that no reader can still see to
    /// `reclaim`, which reclaims its slots, and puts the others back on the
    /// sealed list; returns whether it handed any. What
    /// [`reclaim_ready`](Self::reclaim_ready) does with a pool's storage,
    /// for slots that live elsewhere (a dense pool's positions, see
    /// `dense`). Costs one load when nothing is sealed, and a fence and a
    /// load per announcement otherwise.
    ///
    /// The horizon is `horizon`'s, read now if it was not yet.
    pub(crate) fn reclaim_ready_with(
        &self,
        stripe: StripeIndex,
        horizon: &mut Horizon,
        mut reclaim: impl FnMut(SealedBatch),
    ) -> bool {
        let batches = &self.stripes[stripe.get()];
        if batches.lowest.load(Ordering::Relaxed) == NONE_SEALED {
            return false;
        }
        crate::events::count(crate::events::Event::ReclaimScan);
        let horizon = *horizon.0.get_or_insert_with(|| self.horizon());
        // Relaxed: a hint; the take below judges every batch it finds.
        if batches.lowest.load(Ordering::Relaxed) >= horizon {
            return false;
        }
        // AcqRel: the Acquire half pairs with `put`'s Release (see there).
        batches.lowest.swap(NONE_SEALED, Ordering::AcqRel);
        let (mut held, mut ready) = (OwnedBatches::new(), OwnedBatches::new());
        for node in batches.sealed.take_all() {
            if node.position >= horizon {
                // A reader that began before its seal may be in progress,
                // or the batch was sealed after the horizon was read.
                held.add(node);
            } else {
                ready.add(node);
            }
        }
        // Back on the list before any value's `Drop` runs: a `Drop` that
        // blocks must not hide them from other threads meanwhile.
        batches.put(held);
        let mut found = false;
        for node in TakenBatches::from(ready) {
            found = true;
            reclaim(node.batch);
        }
        found
    }

    /// Exclusive reclamation begins: every batch sealed so far is discarded
    /// (the caller finds their slots by scanning). `&mut self`: no sealer
    /// or reclaimer runs, so none is pushed back later.
    pub(crate) fn begin_exclusive(&mut self) {
        for batches in self.stripes.iter() {
            batches.sealed.take_all().for_each(drop);
            batches.lowest.store(NONE_SEALED, Ordering::Relaxed);
        }
    }
}

/// Reclaims a batch no reader can still see (see
/// `Reclaimer::reclaim_ready`): drops the values, vacates
/// the slots, and returns `free` with the slots that became `FREE` in front.
///
/// A batch of values without drop glue whose last slot is known is not
/// walked: it goes in front of `free` as it is, its words still `REMOVED`,
/// which every pop treats as `FREE` (same generation, link in the same
/// bits). There is nothing to drop, and no slot to retire: a removal at
/// the generation limit retired its slot at once and joined no batch
/// (`Slot::try_remove_and_retire`). Under one-thread churn this took a
/// good share of the work per insert and remove pair away (docs/perf/0012).
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
        // SAFETY: the slot is REMOVED, in a batch whose position is below
        // the horizon `reclaim_ready` read (below the seal count it loaded,
        // and below every announcement of a guard and of a one-call read of
        // this pool): no reference to its value is left (see "Grace by
        // announcement" in the module docs), and no one else reclaims it
        // (each sealed batch is taken once, and an exclusive reclamation
        // discards every sealed batch under `&mut`, when none is taken).
        let (vacant, panic) =
            unsafe { slot.reclaim(word.generation(), Chain::link_to(free), max_generation) };
        // Not the inserting caller's business: see the module docs.
        if let Some(panic) = panic {
            discard(panic);
        }
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
    /// Its place in the order every pool's batches were sealed, for the
    /// announcements (see `announce::seal_position`).
    position: u64,
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
    lowest_position: u64,
}

impl OwnedBatches {
    fn new() -> Self {
        OwnedBatches {
            first: ptr::null_mut(),
            last: ptr::null_mut(),
            lowest_position: u64::MAX,
        }
    }

    fn add(&mut self, node: Box<SealedNode>) {
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

    /// The lowest position (see `SealedNode::position`) held, if any.
    fn lowest_position(&self) -> Option<u64> {
        (!self.first.is_null()).then_some(self.lowest_position)
    }
}

impl From<OwnedBatches> for TakenBatches {
    /// The chain, to walk: built like a taken list.
    fn from(mut batches: OwnedBatches) -> Self {
        // `batches` then drops empty.
        TakenBatches(core::mem::replace(&mut batches.first, ptr::null_mut()))
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

impl Drop for StripeBatches {
    fn drop(&mut self) {
        // Batches sealed and never reclaimed: the pool's drop had already
        // dropped every value.
        self.sealed.take_all().for_each(drop);
    }
}

/// Marks the calling thread as dropping values a reclamation took off a
/// pool's sealed lists, for as long as it lives (see `reclaim_batch`): a
/// value's `Drop` that inserts into the same pool must not wait for
/// reclamation, which is waiting for that `Drop` to return.
pub(crate) struct DroppingReclaimed(());

#[cfg(not(all(test, handle_pool_loom)))]
std::thread_local! {
    static DROPPING_RECLAIMED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
#[cfg(all(test, handle_pool_loom))]
loom::thread_local! {
    static DROPPING_RECLAIMED: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

impl DroppingReclaimed {
    pub(crate) fn enter() -> Self {
        // A thread whose locals are being destroyed is not marked; it does
        // not wait either (see `Reclaimer::held_back_here`).
        let _ = DROPPING_RECLAIMED.try_with(|depth| depth.set(depth.get() + 1));
        DroppingReclaimed(())
    }

    /// Whether the calling thread is inside a [`DroppingReclaimed`].
    pub(crate) fn here() -> bool {
        DROPPING_RECLAIMED
            .try_with(|depth| depth.get() > 0)
            .unwrap_or(false)
    }
}

impl Drop for DroppingReclaimed {
    fn drop(&mut self) {
        let _ = DROPPING_RECLAIMED.try_with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/reclaim.rs"]
mod tests;
