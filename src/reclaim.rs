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
//! loads. So when the closure runs, no reference to any value in the batch is
//! left: it drops the values, moves the slots to `FREE(g)` (or `DEAD(g)` at the
//! generation limit) and splices the whole batch onto the free list at once.
//!
//! # Exclusive access and the pool's drop
//!
//! `reclaim(&mut self)` and the pool's `Drop` drop pending values at once:
//! `&mut` proves no reader holds a reference. Values in the stripes' unsealed
//! batches are simply reclaimed. Values in batches already handed to the
//! collector are claimed slot by slot with the same CAS the closure uses,
//! `RETIRING(g, l)` → `FREE(g, l)`: whichever of the two wins drops the value,
//! so each is dropped exactly once. The exclusive side keeps the link `l`, and
//! never puts such a slot on a free list, so the closure can still walk its
//! batch and splice the slots when it runs.
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

use crate::free_list::{Chain, RetiredBatch};
use crate::shared::Shared;
use crate::slot::{SlotWord, State};
use crate::sync::{Arc, Ordering};

type Panic = Box<dyn std::any::Any + Send + 'static>;

/// A sealed batch on its way through the collector.
struct BatchJob<T> {
    shared: Arc<Shared<T>>,
    stripe: usize,
    batch: RetiredBatch,
}

// SAFETY: the job moves to the thread that runs the collector, where it drops
// the batch's values (hence `T: Send`) and touches the storage only through
// atomics and slots whose values it owns by winning the claim CAS; it never
// creates a `&T` that another thread could also hold.
unsafe impl<T: Send> Send for BatchJob<T> {}

/// Hands a full batch to the epoch collector.
pub(crate) fn defer_batch<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    stripe: usize,
    batch: RetiredBatch,
) {
    let job = BatchJob {
        shared: Arc::clone(shared),
        stripe,
        batch,
    };
    let guard = crossbeam_epoch::pin();
    guard.defer(move || {
        let BatchJob {
            shared,
            stripe,
            batch,
        } = job;
        // Panics were caught per value; see the module docs.
        let _ = reclaim_batch(&shared, stripe, batch);
    });
    // Push the batch to the global queue now and help collect, so slots come
    // back for reuse promptly instead of after 64 more batches.
    guard.flush();
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
    // Unsealed batches belong to no closure: reclaim them completely.
    for (stripe, s) in shared.stripes.iter().enumerate() {
        if let Some(batch) = s.take_retiring() {
            if let Some(p) = reclaim_batch(shared, stripe, batch) {
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
