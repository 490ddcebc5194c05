//! Reclaiming removed values and their slots through `crossbeam-epoch`.
//!
//! # The argument
//!
//! `remove` moves a slot from `OCCUPIED(g)` to `RETIRING(g)` with one CAS. From
//! that instant every lookup with the handle fails, but a reader that loaded
//! the word a moment earlier may still hold `&T` into the slot, under a pinned
//! [`Guard`](crossbeam_epoch::Guard). The value therefore stays where it is;
//! the slot goes onto its stripe's retirement batch, and when that batch is
//! full the remover pins and defers **one** closure for the whole batch.
//! crossbeam-epoch runs the closure only after every thread that was pinned
//! when it was deferred has unpinned; those are the only threads that can have
//! read the word while it was `OCCUPIED(g)`, since a reader pins before it
//! loads. So once the closure has run, no reference to any value in the batch
//! is left.
//!
//! The closure itself only moves the batch onto its stripe's ready list (one
//! CAS). The work of reclaiming it (dropping the values, moving the slots to
//! `FREE(g)`, or `DEAD(g)` at the generation limit, and splicing the whole
//! batch onto a free list at once) is done later, unpinned, by an insert that
//! finds its free list empty. Why: crossbeam runs deferred closures while the
//! collecting thread is pinned, and a thread preempted while pinned stops the
//! epoch for everyone; every microsecond spent pinned is a chance for an
//! oversubscribed machine to stall all reuse and make the pool grow. The
//! remover's own pinned window is likewise just `defer` plus `flush`.
//!
//! # Exclusive access and the pool's drop
//!
//! `reclaim(&mut self)` and the pool's `Drop` drop pending values at once:
//! `&mut` proves no reader holds a reference. They first start a new *era*
//! (a counter in the shared state that every batch records when it is
//! sealed), then drop every value still `RETIRING`, wherever its batch is
//! (being filled, inside the collector, or released), free its slot and put
//! it on a free list right away. A batch of an older era that the collector
//! releases later is discarded unread: its slots were already reclaimed and
//! may have been reused. No CAS is needed for this hand-over, because the
//! closures never touch a slot (they only move their batch onto a ready
//! list) and batches are reclaimed only inside pool operations, which `&mut`
//! excludes. So each value is dropped exactly once.
//!
//! The closure may run on any thread after the pool is gone, so it holds an
//! `Arc` of the shared state (one clone per batch, not per remove): the ready
//! list it pushes to lives until the last pending closure finishes, and by
//! then the pool's drop has dropped every value, so the closure touches no `T`.
//!
//! A value's `Drop` that panics during a reclamation inside some unrelated
//! insert cannot be the inserting caller's business: the panic is caught and
//! discarded there, after the rest of the batch is reclaimed. In exclusive
//! operations it propagates to the caller once the pool is consistent again.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crate::free_list::{Chain, ReadyBatch, RetiredBatch};
use crate::shared::Shared;
use crate::slot::{SlotWord, State};
use crate::sync::{Arc, Ordering};

type Panic = Box<dyn std::any::Any + Send + 'static>;

/// A sealed batch on its way through the collector.
struct BatchJob<T> {
    shared: Arc<Shared<T>>,
    stripe: usize,
    node: Box<ReadyBatch>,
}

// SAFETY: the job moves to the thread that runs the collector, where it only
// pushes its node onto a ready list through atomics; it never touches a `T`.
// It still requires `T: Send`, because the `Arc` it holds may be the last
// one, and then the storage (not the values: those are gone) drops there.
unsafe impl<T: Send> Send for BatchJob<T> {}

impl<T> BatchJob<T> {
    /// Runs once the grace period is over.
    fn release(self) {
        self.shared.stripes[self.stripe].push_ready(self.node);
        self.shared.count_in_flight(-1);
    }
}

/// Hands a sealed batch to the epoch collector.
pub(crate) fn defer_batch<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    stripe: usize,
    batch: RetiredBatch,
) {
    // Allocate before pinning: the pinned window should be as short as possible.
    let job = BatchJob {
        shared: Arc::clone(shared),
        stripe,
        node: Box::new(ReadyBatch {
            batch,
            era: shared.era(),
            next: core::ptr::null_mut(),
        }),
    };
    // Relaxed: a hint for inserts deciding whether the epoch is worth pushing.
    let sealed = shared.count_in_flight(1);
    let guard = crossbeam_epoch::pin();
    guard.defer(move || job.release());
    // The batch sits in this thread's local bag until the bag is flushed to
    // the global queue. Flushing (and collecting) costs about a microsecond
    // pinned, so the remover does it only for every few batches; an insert
    // that runs out of slots flushes too (`Shared::acquire_slow`).
    if sealed % FLUSH_EVERY == 0 {
        guard.flush();
    }
}

/// A remover flushes its local bag for one batch in this many.
const FLUSH_EVERY: isize = 4;

/// Pins, pushes this thread's deferred batches to the global queue, and
/// helps the epoch advance and expired batches get released.
pub(crate) fn advance_epoch() {
    crossbeam_epoch::pin().flush();
}

/// Reclaims every batch on `from`'s ready list into `into`'s free list
/// (discarding batches of an earlier era). Returns whether the list had
/// anything. A value's `Drop` panicking here is caught and discarded.
pub(crate) fn reclaim_ready<T>(shared: &Shared<T>, from: usize, into: usize) -> bool {
    let mut node = shared.stripes[from].take_ready();
    let found = !node.is_null();
    let era = shared.era();
    while !node.is_null() {
        // SAFETY: `take_ready` gave us the whole list; every node came from
        // `Box::into_raw` in `push_ready` and nobody else can reach it now.
        let owned = unsafe { Box::from_raw(node) };
        node = owned.next;
        if owned.era == era {
            let _ = reclaim_batch(shared, into, owned.batch);
        }
    }
    found
}

/// Reclaims a batch whose grace period is over (or that `&mut` access owns):
/// drops the values, frees the slots (or retires those at the generation
/// limit) and splices them onto `stripe`'s free list with one CAS.
/// Returns the first panic of a value's `Drop`, after finishing the batch.
pub(crate) fn reclaim_batch<T>(
    shared: &Shared<T>,
    stripe: usize,
    batch: RetiredBatch,
) -> Option<Panic> {
    let mut kept: Option<Chain> = None;
    let mut first_panic = None;
    let mut index = batch.head;
    for _ in 0..batch.count {
        let slot = shared.storage.slot(index);
        // Relaxed: the batch's words were made visible to us by the epoch
        // collector (deferring and running a closure synchronise, and so do
        // the ready list's push and take) or by `&mut`.
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        debug_assert_eq!(word.state(), State::Retiring, "batch slot {index}");
        if let Some(p) = vacate(shared, index, slot, word, &mut kept) {
            first_panic.get_or_insert(p);
        }
        index = word.link();
    }
    if let Some(chain) = kept {
        shared.stripes[stripe].push_chain(&shared.storage, chain);
    }
    first_panic
}

/// Drops the value of a RETIRING slot whose value is ours, and moves the
/// slot to FREE (prepended to `kept`) or, at the generation limit, DEAD.
fn vacate<T>(
    shared: &Shared<T>,
    index: u32,
    slot: &crate::slot::Slot<T>,
    word: SlotWord,
    kept: &mut Option<Chain>,
) -> Option<Panic> {
    let mut result = Ok(());
    if core::mem::needs_drop::<T>() {
        // SAFETY: RETIRING means the value is initialised and not yet
        // dropped, and the caller owns it (a released batch, or `&mut`
        // access): the grace period is over, so no reference to it is left.
        result = catch_unwind(AssertUnwindSafe(|| drop(unsafe { slot.take_value() })));
    }
    let link = kept.map_or(crate::slot::NIL, |c| c.first);
    let vacant = SlotWord::vacated(word.generation(), link, shared.config.max_generation);
    slot.word.store(vacant.to_bits(), Ordering::Relaxed);
    if vacant.state() == State::Free {
        *kept = Some(Chain {
            first: index,
            last: kept.map_or(index, |c| c.last),
        });
    }
    result.err()
}

/// Exclusive access: drops, now, every value whose removal is still pending
/// and makes its slot reusable at once; with `live`, the values still in the
/// pool too (the pool's drop), in the same pass. Returns the first panic of
/// a value's `Drop`, after finishing.
pub(crate) fn reclaim_now<T>(shared: &Shared<T>, live: bool) -> Option<Panic> {
    // Batches sealed before this point are reclaimed here; when the
    // collector releases them later, their era says so.
    shared.start_era();
    let mut first_panic = None;
    for s in shared.stripes.iter() {
        let _ = s.take_retiring();
        // Released batches of the old era: their slots are found by the scan.
        let mut node = s.take_ready();
        while !node.is_null() {
            // SAFETY: as in `reclaim_ready`: the taken list is ours alone.
            let owned = unsafe { Box::from_raw(node) };
            node = owned.next;
        }
    }
    let mut kept = None;
    for (index, slot) in shared.storage.slots(shared.used_slots()) {
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        let panic = match word.state() {
            State::Retiring => vacate(shared, index, slot, word, &mut kept),
            State::Occupied if live => {
                let free = SlotWord::free(word.generation(), crate::slot::NIL);
                slot.word.store(free.to_bits(), Ordering::Relaxed);
                // SAFETY: OCCUPIED means initialised, and `&mut` access is
                // exclusive; the word no longer says OCCUPIED, so nobody
                // drops it again.
                let value = unsafe { slot.take_value() };
                catch_unwind(AssertUnwindSafe(|| drop(value))).err()
            }
            _ => None,
        };
        if let Some(p) = panic {
            first_panic.get_or_insert(p);
        }
    }
    if let Some(chain) = kept {
        shared.stripes[shared.home()].push_chain(&shared.storage, chain);
    }
    first_panic
}

/// Re-raises a caught panic, if any.
pub(crate) fn propagate(panic: Option<Panic>) {
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}
