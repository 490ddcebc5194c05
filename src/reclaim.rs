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
//! `&mut` proves no reader holds a reference. Values in the stripes' unsealed
//! and released batches are simply reclaimed. Values in batches still inside
//! the collector are dropped slot by slot, moving each word from
//! `RETIRING(g, l)` to `FREE(g, l)`. The batch is reclaimed later, by an
//! insert, after its closure has released it: it finds those slots `FREE`,
//! drops nothing, and only splices them, so each value is dropped exactly
//! once. The exclusive side keeps the link `l`, and never puts such a slot
//! on a free list, so the batch can still be walked. No CAS is needed for
//! this hand-over: the closure itself touches no slot, and batches are
//! reclaimed only inside pool operations, which `&mut` excludes.
//!
//! The closure may run on any thread after the pool is gone, so it holds an
//! `Arc` of the shared state (one clone per batch, not per remove): the
//! storage it walks lives until the last pending closure finishes, and by then
//! the pool's drop has claimed every value, so the closure touches no `T`.
//!
//! A value whose `Drop` panics inside a deferred closure cannot unwind into
//! whatever unrelated thread happens to run the collector (that would abandon
//! the rest of crossbeam's bag): the panic is caught and discarded there, after
//! the rest of the batch is reclaimed. In exclusive operations it propagates to
//! the caller once the pool is consistent again.

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
        let stripe = &self.shared.stripes[self.stripe];
        stripe.push_ready(self.node);
        stripe.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Hands a full batch to the epoch collector.
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
            next: core::ptr::null_mut(),
        }),
    };
    // Relaxed: a hint for inserts deciding whether the epoch is worth pushing.
    let sealed = shared.stripes[stripe]
        .in_flight
        .fetch_add(1, Ordering::Relaxed);
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

/// Reclaims every batch on `from`'s ready list into `into`'s free list.
/// Returns whether any slot was reclaimed. A value's `Drop` panicking here
/// (inside some unrelated insert) is caught and discarded; see the module docs.
pub(crate) fn reclaim_ready<T>(shared: &Shared<T>, from: usize, into: usize) -> bool {
    let mut node = shared.stripes[from].take_ready();
    let found = !node.is_null();
    while !node.is_null() {
        // SAFETY: `take_ready` gave us the whole list; every node came from
        // `Box::into_raw` in `push_ready` and nobody else can reach it now.
        let owned = unsafe { Box::from_raw(node) };
        node = owned.next;
        let _ = reclaim_batch(shared, into, owned.batch);
    }
    found
}

/// Reclaims a batch whose grace period is over (or that `&mut` access owns):
/// drops every value not already claimed, frees the slots (or kills those at
/// the generation limit) and splices them onto `stripe`'s free list.
/// Returns the first panic of a value's `Drop`, after finishing the batch.
pub(crate) fn reclaim_batch<T>(
    shared: &Shared<T>,
    stripe: usize,
    batch: RetiredBatch,
) -> Option<Panic> {
    let max_generation = shared.config.max_generation;
    let mut kept: Option<Chain> = None;
    let mut first_panic = None;
    let mut index = batch.head;
    for _ in 0..batch.count {
        let slot = shared.storage.slot(index);
        // Relaxed: the batch's words were made visible to us by the epoch
        // collector (deferring and running a closure synchronise) or by `&mut`.
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        let generation = word.generation();
        let next = word.link();
        let vacant = SlotWord::vacated(
            generation,
            kept.map_or(crate::slot::NIL, |c| c.first),
            max_generation,
        );
        // The claim: only one of this closure and an exclusive `reclaim` or
        // drop (`claim_deferred`) moves the word out of RETIRING.
        let claimed = word.state() == State::Retiring
            && slot
                .word
                .compare_exchange(
                    word.to_bits(),
                    vacant.to_bits(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        if claimed {
            // SAFETY: the slot was RETIRING, so its value is initialised, and
            // winning the CAS made it ours; the grace period (or `&mut`) means
            // no reference to it is left.
            let result = catch_unwind(AssertUnwindSafe(|| drop(unsafe { slot.take_value() })));
            if let Err(payload) = result {
                first_panic.get_or_insert(payload);
            }
        } else {
            // The exclusive side dropped the value and left the word FREE(g, next);
            // the slot is still ours to relink.
            slot.word.store(vacant.to_bits(), Ordering::Relaxed);
        }
        if vacant.state() == State::Free {
            kept = Some(Chain {
                first: index,
                last: kept.map_or(index, |c| c.last),
            });
        }
        index = next;
    }
    if let Some(chain) = kept {
        shared.stripes[stripe].push_chain(&shared.storage, chain);
    }
    first_panic
}

/// Exclusive access: drops, now, every value whose removal is still pending.
/// Returns the first panic of a value's `Drop`, after finishing.
pub(crate) fn reclaim_now<T>(shared: &Shared<T>) -> Option<Panic> {
    let mut first_panic = None;
    // Unsealed and released batches belong to no pending closure: reclaim
    // them completely.
    for (stripe, s) in shared.stripes.iter().enumerate() {
        if let Some(batch) = s.take_retiring() {
            if let Some(p) = reclaim_batch(shared, stripe, batch) {
                first_panic.get_or_insert(p);
            }
        }
        let mut node = s.take_ready();
        while !node.is_null() {
            // SAFETY: as in `reclaim_ready`: the taken list is ours alone.
            let owned = unsafe { Box::from_raw(node) };
            node = owned.next;
            if let Some(p) = reclaim_batch(shared, stripe, owned.batch) {
                first_panic.get_or_insert(p);
            }
        }
    }
    // What is still RETIRING sits in a batch a closure will walk later.
    for (_, slot) in shared.storage.slots(shared.used_slots()) {
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        if word.state() != State::Retiring {
            continue;
        }
        let freed = SlotWord::free(word.generation(), word.link());
        if slot
            .word
            .compare_exchange(
                word.to_bits(),
                freed.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            // SAFETY: RETIRING means the value is initialised; winning the CAS
            // made it ours; `&mut` access means no reference to it is left.
            let result = catch_unwind(AssertUnwindSafe(|| drop(unsafe { slot.take_value() })));
            if let Err(payload) = result {
                first_panic.get_or_insert(payload);
            }
        }
    }
    first_panic
}

/// Re-raises a caught panic, if any.
pub(crate) fn propagate(panic: Option<Panic>) {
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}
