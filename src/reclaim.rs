#![doc = include_str!("../docs/reclaim.md")]

use core::ptr;

use crossbeam_epoch::{Collector, Guard};
use crossbeam_utils::CachePadded;

use crate::lists::{Chain, SealedBatch};
use crate::slot::{SlotWord, State};
use crate::storage::Storage;
use crate::stripe::StripeIndex;
use crate::sync::{Arc, AtomicIsize, AtomicPtr, Ordering};

/// At most this many epoch pushes in [`Reclaimer::settle`]: crossbeam
/// frees what was deferred two epochs back, and a push can fail to advance
/// while another thread is briefly pinned.
const SETTLE_ROUNDS: usize = 8;

/// The reclamation state of one pool.
pub(crate) struct Reclaimer {
    header: Arc<Header>,
    /// Bumped by every exclusive reclamation; recorded in every batch.
    /// Written only through `&mut self`, so a plain number.
    era: u64,
    /// The collector batches are deferred on (the default one), kept here so
    /// that checking a guard is a pointer comparison.
    collector: Collector,
}

/// What the deferred closures share with the pool.
struct Header {
    /// Per stripe: batches whose grace period is over.
    ready: Box<[CachePadded<ReadyList>]>,
    /// Batches deferred and not yet on a ready list, pool-wide: one load
    /// tells an insert whether pushing the epoch can free anything.
    in_flight: CachePadded<AtomicIsize>,
}

/// What an insert got from a stripe's ready list.
pub(crate) struct Reclaimed {
    /// Whether any batch was ready.
    pub(crate) found: bool,
    /// The slots that became free, for the caller to push on a free list.
    pub(crate) free: Option<Chain>,
}

impl Reclaimer {
    pub(crate) fn new(stripes: usize) -> Self {
        Reclaimer {
            header: Arc::new(Header {
                ready: (0..stripes)
                    .map(|_| CachePadded::new(ReadyList::new()))
                    .collect(),
                in_flight: CachePadded::new(AtomicIsize::new(0)),
            }),
            era: 0,
            collector: crossbeam_epoch::default_collector().clone(),
        }
    }

    /// A guard pinned on the collector batches are deferred on, which
    /// therefore needs no `check_guard`.
    #[inline]
    pub(crate) fn pin(&self) -> Guard {
        crossbeam_epoch::pin()
    }

    /// Panics unless `guard` pins the collector batches are deferred on: an
    /// unprotected guard or one of another collector would not hold off
    /// reclamation.
    #[inline]
    pub(crate) fn check_guard(&self, guard: &Guard) {
        match guard.collector() {
            Some(collector) if *collector == self.collector => {}
            Some(_) => panic!(
                "HandlePool: the guard belongs to another epoch collector; pin with handle_pool::pin()"
            ),
            None => panic!(
                "HandlePool: an unprotected guard cannot protect a reference; pin with handle_pool::pin()"
            ),
        }
    }

    /// Hands a sealed batch of `stripe` to the epoch collector, straight
    /// to the global queue: left in this thread's local bag, it would wait
    /// for this thread to pin again, which a thread that goes idle may never
    /// do.
    pub(crate) fn defer(&self, stripe: StripeIndex, batch: SealedBatch) {
        // Allocated before pinning: the pinned window should be short.
        let node = Box::new(ReadyBatch {
            batch,
            era: self.era,
            next: AtomicPtr::new(ptr::null_mut()),
        });
        let header = Arc::clone(&self.header);
        // Relaxed: a hint for inserts deciding whether to push the epoch.
        self.header.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = crossbeam_epoch::pin();
        guard.defer(move || {
            header.ready[stripe.get()].push(node);
            header.in_flight.fetch_sub(1, Ordering::Relaxed);
        });
        guard.flush();
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

    /// Pins, pushes this thread's deferred batches to the global queue, and
    /// helps the epoch advance and expired batches reach their ready lists.
    pub(crate) fn advance_epoch(&self) {
        crossbeam_epoch::pin().flush();
    }

    /// Batches deferred and not yet ready, pool-wide (a hint).
    #[inline]
    pub(crate) fn in_flight(&self) -> isize {
        self.header.in_flight.load(Ordering::Relaxed)
    }

    /// Whether `stripe`'s ready list looks non-empty (a hint).
    #[inline]
    pub(crate) fn has_ready(&self, stripe: StripeIndex) -> bool {
        !self.header.ready[stripe.get()].looks_empty()
    }

    /// Reclaims every batch on `stripe`'s ready list: drops the values and
    /// vacates the slots, and returns the free ones as one chain for the
    /// caller to push. Batches of an earlier era are discarded unread. A
    /// value's `Drop` panicking here is discarded.
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
        for node in self.header.ready[stripe.get()].take_all() {
            reclaimed.found = true;
            if node.era == self.era {
                reclaimed.free = reclaim_batch(storage, node.batch, max_generation, reclaimed.free);
            }
        }
        reclaimed
    }

    /// Exclusive reclamation begins: every batch sealed so far belongs to an
    /// earlier era from now on, and the ready ones are discarded (the caller
    /// finds their slots by scanning).
    pub(crate) fn begin_exclusive(&mut self) {
        self.era += 1;
        for ready in self.header.ready.iter() {
            ready.take_all().for_each(drop);
        }
    }
}

/// Reclaims a batch whose grace period is over: drops the values, vacates
/// the slots, and returns `free` with the slots that became `FREE` in front.
fn reclaim_batch<T>(
    storage: &Storage<T>,
    batch: SealedBatch,
    max_generation: u32,
    mut free: Option<Chain>,
) -> Option<Chain> {
    let mut index = batch.head;
    for _ in 0..batch.count {
        let slot = storage.slot(index);
        // Relaxed: the batch's words were made visible by the epoch collector
        // (deferring and running a closure synchronise, and so do the ready
        // list's push and take).
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        debug_assert_eq!(word.state(), State::Removed, "batch slot {index}");
        // SAFETY: the slot is REMOVED and in a batch whose grace period is
        // over and whose era is current: no reference to its value is left,
        // and no one else reclaims it (each ready batch is taken once, and an
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

/// A batch whose grace period is over, on a ready list.
struct ReadyBatch {
    batch: SealedBatch,
    /// The reclaimer's era when the batch was sealed.
    era: u64,
    next: AtomicPtr<ReadyBatch>,
}

/// A stack of ready batches: push one, take all (so no ABA).
struct ReadyList {
    head: AtomicPtr<ReadyBatch>,
}

impl ReadyList {
    fn new() -> Self {
        ReadyList {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[inline]
    fn looks_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    fn push(&self, node: Box<ReadyBatch>) {
        let node = Box::into_raw(node);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` came from `Box::into_raw` just above and is not
            // shared until the CAS below succeeds.
            unsafe { (*node).next.store(head, Ordering::Relaxed) };
            // Release pairs with the Acquire swap in `take_all`: the node's
            // fields are written before the taker reads them.
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Takes every node; they are freed as the iterator goes (or drops).
    fn take_all(&self) -> TakenBatches {
        if self.looks_empty() {
            return TakenBatches(ptr::null_mut());
        }
        // Acquire pairs with the Release CAS in `push`.
        TakenBatches(self.head.swap(ptr::null_mut(), Ordering::Acquire))
    }
}

/// The nodes of a ready list taken whole: owned, yielded one by one.
struct TakenBatches(*mut ReadyBatch);

impl Iterator for TakenBatches {
    type Item = Box<ReadyBatch>;

    fn next(&mut self) -> Option<Box<ReadyBatch>> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: the list was swapped out whole, so its nodes are ours
        // alone; each came from `Box::into_raw` in `ReadyList::push`, and
        // we advance past it before handing it out, so it is owned once.
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
        // Closures that ran after the pool was gone left their nodes here;
        // the pool's drop had already dropped every value.
        for ready in self.ready.iter() {
            ready.take_all().for_each(drop);
        }
    }
}
