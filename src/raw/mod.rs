//! The raw pool: every slot mechanic, on raw [`Handle`](crate::Handle)s, one policy per
//! file, each an `impl<T> RawPool<T>` block:
//!
//! | file | decides |
//! |---|---|
//! | `mod.rs` | the type, construction, length, drop |
//! | `lookup.rs` | whether a handle resolves, and to what |
//! | `insert.rs` | publishing values: one, one made from its handle, many |
//! | `acquire.rs` | where an insert's slot comes from, in order of cost |
//! | `backpressure.rs` | what an insert does while reclamation is behind |
//! | `remove.rs` | removing into a batch |
//! | `sweep.rs` | sealing batches, revoking magazines, `flush` |
//! | `exclusive.rs` | `&mut` operations: take, retain, reclaim now |
//! | `cursor.rs` | the iterators over occupied slots |
//! | `snapshot.rs` | copying and restoring (clone, serde) |
//!
//! The typed face (`pool`, `iter`, `collect`, `serde_impl`) converts
//! handles and delegates; reclamation (`reclaim`) gets sealed batches from
//! here and hands back free chains.

use crossbeam_utils::CachePadded;

use crate::config::Config;
use crate::membarrier::asymmetric_fences;
use crate::reclaim::Reclaimer;
use crate::slot::{drop_catching, keep_first, SlotWord, State};
use crate::storage::Storage;
use crate::stripe::Stripes;
use crate::sync::{AtomicU64, Ordering};

/// The pool without its handle type.
pub(crate) struct RawPool<T> {
    storage: Storage<T>,
    stripes: Stripes,
    /// The next never-used slot index. It may run past `config.max_slots`
    /// (each failed reservation adds to it); it is a `u64`, so it never wraps.
    fresh: CachePadded<AtomicU64>,
    reclaimer: Reclaimer,
    config: Config,
    /// A wait at the bound ran out when the pool used half this many
    /// slots: no insert waits at the bound again until it uses this many
    /// (see `RawPool::wait_at_bound`).
    bound_waived_below: AtomicU64,
    /// Magazines that were ever refilled here: about the threads that
    /// churn this pool, each holding up to a few batches in flight by
    /// design (see `RawPool::promised_slots`).
    magazine_users: AtomicU64,
}

// SAFETY: moving the pool moves the ownership of its values, which are
// dropped by whichever thread owns or shares the pool: `T: Send`. The rest is
// atomics and the reclaimer, whose deferred closures hold no `T`.
unsafe impl<T: Send> Send for RawPool<T> {}

// SAFETY: through `&RawPool` threads share `&T` (`get`, `entries`), which
// needs `T: Sync`, and insert and remove values on any thread, so a value
// may be dropped on another thread than the one that inserted it: `T: Send`.
unsafe impl<T: Send + Sync> Sync for RawPool<T> {}

impl<T> Drop for RawPool<T> {
    fn drop(&mut self) {
        // The storage goes with the pool, so only the values need dropping,
        // pending and live alike, in one pass: no word is vacated and no
        // free list rebuilt, as `reclaim_all` does for a pool that lives on
        // (that was slow even for a million `u64`s, which need nothing at
        // all: docs/perf/0035). The sealed batches hold indices
        // only, and are freed with the reclaimer.
        if !core::mem::needs_drop::<T>() {
            return;
        }
        let mut first_panic = None;
        for (_, slot) in self.storage.slots(self.slots_used()) {
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            if matches!(word.state(), State::Occupied | State::Removed) {
                // SAFETY: OCCUPIED or REMOVED, with drop glue (so no batch
                // was reused unwalked, see `reclaim::reclaim_batch`): the
                // value is initialised and not dropped yet; `&mut self`
                // proves no reference to it is left, and the pool is gone
                // after this pass, so nothing reads the slot again.
                let value = unsafe { slot.take_value() };
                keep_first(&mut first_panic, drop_catching(value));
            }
        }
        if let Some(panic) = first_panic {
            std::panic::resume_unwind(panic);
        }
    }
}

impl<T> RawPool<T> {
    pub(crate) fn new(config: Config) -> Self {
        let config = config.resolved();
        RawPool {
            storage: Storage::new(
                config.first_bucket_shift,
                config.flat_slots,
                config.max_slots,
            ),
            stripes: Stripes::new(config.stripes, config.magazines && asymmetric_fences()),
            fresh: CachePadded::new(AtomicU64::new(0)),
            reclaimer: Reclaimer::new(config.stripes),
            config,
            bound_waived_below: AtomicU64::new(0),
            magazine_users: AtomicU64::new(0),
        }
    }

    /// Allocates room for slots `0..capacity` (at most `max_slots`).
    pub(crate) fn reserve(&self, capacity: usize) {
        let end = capacity.min(self.config.max_slots as usize) as u32;
        self.storage.ensure(0, end);
    }

    /// Number of slots ever handed out from the fresh region.
    #[inline]
    pub(crate) fn slots_used(&self) -> u64 {
        self.fresh
            .load(Ordering::Relaxed)
            .min(self.config.max_slots as u64)
    }

    /// Number of slots in allocated buckets.
    pub(crate) fn capacity(&self) -> usize {
        // The last bucket may reach past `max_slots`: its slots there are
        // allocated but can never be handed out.
        self.storage.capacity().min(self.config.max_slots as usize)
    }

    /// The slots, for a map that keeps its values in this pool and reaches
    /// them by index (`secondary`).
    #[inline(always)]
    pub(crate) fn storage(&self) -> &Storage<T> {
        &self.storage
    }

    /// The reclamation, for that map's one-call reads.
    #[inline(always)]
    pub(crate) fn reclaimer(&self) -> &Reclaimer {
        &self.reclaimer
    }

    /// The sum of the stripes' length shares: exact when no operation is in
    /// flight. The shares are read one after another, so under concurrency
    /// a remove may be seen without its insert; such a transient underflow
    /// reads as 0.
    pub(crate) fn len(&self) -> usize {
        let sum = self.stripes.len_sum();
        if sum as u64 > self.slots_used() {
            0
        } else {
            sum as usize
        }
    }
}

mod acquire;
mod backpressure;
mod cursor;
mod exclusive;
mod insert;
mod lookup;
mod remove;
mod snapshot;
mod sweep;

pub(crate) use cursor::{Drained, Entries, EntriesMut, IntoEntries};
pub(crate) use insert::HandleSink;
#[cfg(feature = "rayon")]
pub(crate) use insert::Inserter;
#[cfg(feature = "serde")]
pub(crate) use snapshot::{ReadEntries, SlotEntry};
