//! Reclaiming removed values and their slots through `crossbeam-epoch`: the
//! one module that knows about the collector, guards, grace periods, eras
//! and deferred batches. The core hands it sealed batches and gets back
//! chains of free slots to push; it never calls back up.
//!
//! # The argument
//!
//! `remove` moves a slot from `OCCUPIED(g)` to `REMOVED(g)` with one CAS. From
//! that instant every lookup with the handle fails, but a reader that loaded
//! the word a moment earlier may still hold `&T` into the slot, under a pinned
//! [`Guard`](crossbeam_epoch::Guard). The value therefore stays where it is;
//! the slot joins its stripe's removal batch, and when that batch is full
//! the remover pins and defers **one** closure for the whole batch.
//! crossbeam-epoch runs the closure only after every thread that was pinned
//! when it was deferred has unpinned; those are the only threads that can have
//! read the word while it was `OCCUPIED(g)`, since a reader pins before it
//! loads. So once the closure has run, no reference to any value in the batch
//! is left.
//!
//! The closure only moves the batch onto its stripe's *ready list* (one
//! CAS). The work of reclaiming it (dropping the values, moving the slots to
//! `FREE(g)`, or `EXHAUSTED(g)` at the generation limit, and handing the
//! chain of free slots back) is done later, unpinned, by an insert that
//! finds its free list empty. Why: crossbeam runs deferred closures while the
//! collecting thread is pinned, and a thread preempted while pinned stops the
//! epoch for everyone; every microsecond spent pinned is a chance for an
//! oversubscribed machine to stall all reuse and make the pool grow. The
//! remover's own pinned window is likewise just `defer` and a `flush` (so
//! the batch reaches the global queue even if this thread never pins again).
//!
//! # What a deferred closure holds
//!
//! A closure may run on any thread, after the pool is gone. It holds an
//! `Arc` of a small [`Header`] (the ready lists and the count of batches in
//! flight), never the storage or a `T`: the pool's storage is freed when the
//! pool is dropped, and a closure that runs later pushes its node onto a
//! ready list nobody reads again, which the header's drop frees.
//!
//! # Exclusive access and eras
//!
//! `reclaim(&mut self)` and the pool's `Drop` drop pending values at once:
//! `&mut` proves no reader holds a reference. They first start a new *era*
//! (a counter every batch records when it is sealed), then drop every value
//! still `REMOVED`, wherever its batch is (being filled, inside the
//! collector, or ready), free its slot and reuse it right away. A batch of
//! an older era that the collector releases later is discarded unread: its
//! slots were already reclaimed and may have been reused. No CAS is needed
//! for this hand-over, because the closures never touch a slot and batches
//! are reclaimed only inside pool operations, which `&mut` excludes. So each
//! value is dropped exactly once.
//!
//! A value's `Drop` that panics while an unrelated insert reclaims its batch
//! cannot be that caller's business: the panic is discarded there, after the
//! rest of the batch is reclaimed. In exclusive operations it propagates to
//! the caller once the pool is consistent again.

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

    /// Hands a sealed batch of `stripe` to the epoch collector.
    pub(crate) fn defer(&self, stripe: StripeIndex, batch: SealedBatch) {
        // Allocate before pinning: the pinned window should be short.
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
        // Straight to the global queue: left in this thread's local bag, the
        // batch would wait for this thread to pin again, which a thread
        // that goes idle may never do.
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
