//! The dense pool without its handle type: the two tables, the round, the
//! stripes and the reclaimer; construction, length and drop. The
//! operations live beside it, one policy per file: `insert`, `lookup`,
//! `remove` (and reclamation), `exclusive` (compaction and every `&mut`
//! pass), `iter` (the cursors).

use std::collections::VecDeque;

use crossbeam_utils::CachePadded;

use crate::config::Config;
use crate::reclaim::Reclaimer;
use crate::slot::{drop_catching, keep_first, SlotWord, State};
use crate::storage::Storage;
use crate::stripe::{StripeIndex, Stripes};
use crate::sync::{AtomicU64, Ordering};

use super::column::Column;
use super::index::Lane;

/// The dense pool on raw handles (see the module docs).
pub(crate) struct RawDense<T> {
    /// Handle index to position: one slot word per index, no value.
    pub(super) sparse: Storage<()>,
    /// Position to handle and value.
    pub(super) column: Column<T>,
    /// Inserts claimed this round (see "A round"); may run past the limit.
    pub(super) claims: CachePadded<AtomicU64>,
    /// What the round began with; written only under `&mut`.
    pub(super) round: Round,
    /// Each stripe's words for the round, indexed by stripe.
    pub(super) lanes: Box<[CachePadded<Lane>]>,
    /// Which stripe a thread uses: the pool's stripes, without magazines,
    /// for their thread-to-stripe map and the reclaimer's stripe indices.
    pub(super) stripes: Stripes,
    /// Sealed removal batches and the readers' announcements.
    pub(super) reclaimer: Reclaimer,
    /// `max_slots` bounds both the indices and the positions of a round.
    pub(super) config: Config,
}

/// What a round began with (see "A round" in the module docs).
pub(super) struct Round {
    /// Live values: positions `0..len` hold them.
    pub(super) len: u32,
    /// Sparse indices ever handed out: the round's fresh ones are `used..`.
    pub(super) used: u32,
    /// Sparse indices free for reuse, oldest first: the round's `k`-th
    /// insert takes `queue[k]` while there is one.
    pub(super) queue: VecDeque<u32>,
}

// SAFETY: moving the pool moves the ownership of its values, which are
// dropped by whichever thread owns or shares it: `T: Send`. The rest is
// atomics, the reuse queue and the reclaimer, whose batches hold positions.
unsafe impl<T: Send> Send for RawDense<T> {}

// SAFETY: through `&RawDense` threads share `&T` (`get`, iteration), which
// needs `T: Sync`, and insert and remove values on any thread, so a value
// may be dropped on another thread than the one that inserted it: `T: Send`.
unsafe impl<T: Send + Sync> Sync for RawDense<T> {}

impl<T> RawDense<T> {
    pub(crate) fn new(config: Config) -> Self {
        let config = config.resolved();
        RawDense {
            sparse: Storage::new(
                config.first_bucket_shift,
                config.flat_slots,
                config.max_slots,
            ),
            column: Column::new(
                config.first_bucket_shift,
                config.max_slots,
                config.flat_slots,
            ),
            claims: CachePadded::new(AtomicU64::new(0)),
            round: Round {
                len: 0,
                used: 0,
                queue: VecDeque::new(),
            },
            lanes: (0..config.stripes)
                .map(|_| CachePadded::new(Lane::new()))
                .collect(),
            stripes: Stripes::new(config.stripes, false),
            reclaimer: Reclaimer::new(config.stripes),
            config,
        }
    }

    /// Allocates room for positions and indices `0..capacity` (at most the
    /// pool's limit).
    pub(crate) fn reserve(&self, capacity: usize) {
        let end = capacity.min(self.config.max_slots as usize) as u32;
        self.column.ensure_below(end);
        self.sparse.ensure(0, end);
    }

    /// The calling thread's stripe and its words.
    #[inline]
    pub(super) fn lane(&self) -> (StripeIndex, &Lane) {
        let home = self.stripes.home();
        (home, &self.lanes[home.get()])
    }

    /// The end of the positions in use: this round's first position past
    /// its claims, at most the limit. Exact when no insert is in flight.
    #[inline]
    pub(crate) fn end(&self) -> u32 {
        // Relaxed: a bound for a walk whose every visit reads the position's
        // word with Acquire; a claim seen here or not is an insert in flight.
        let claims = self.claims.load(Ordering::Relaxed);
        (self.round.len as u64 + claims).min(self.config.max_slots as u64) as u32
    }

    /// The holes below [`end`](Self::end): removals and abandoned inserts
    /// this round. Exact when no operation is in flight.
    pub(crate) fn holes(&self) -> usize {
        self.lanes.iter().map(|lane| lane.holes() as usize).sum()
    }

    /// Values in the pool: exact when no operation is in flight; under
    /// concurrency the counts are read one after another, and a transient
    /// underflow reads as 0.
    pub(crate) fn len(&self) -> usize {
        (self.end() as usize).saturating_sub(self.holes())
    }

    /// Positions allocated.
    pub(crate) fn capacity(&self) -> usize {
        self.column.capacity()
    }
}

impl<T> Drop for RawDense<T> {
    fn drop(&mut self) {
        // The columns go with the pool: only the values need dropping, live
        // and removed alike (a `REMOVED` word's value waits for its grace
        // period, which `&mut self` ends; a `FREE` one's was dropped).
        if !core::mem::needs_drop::<T>() {
            return;
        }
        let mut first_panic = None;
        for run in self.column.runs(0, self.end()) {
            for (offset, word) in run.words.iter().enumerate() {
                // Relaxed: `&mut self`.
                let state = SlotWord::from_bits(word.load(Ordering::Relaxed)).state();
                if matches!(state, State::Occupied | State::Removed) {
                    // SAFETY: OCCUPIED or REMOVED with drop glue: the value
                    // is initialised and not dropped yet; `&mut self`
                    // proves no reference to it is left, and nothing reads
                    // the position after this pass.
                    let value = unsafe { run.values.add(offset).read() };
                    keep_first(&mut first_panic, drop_catching(value));
                }
            }
        }
        if let Some(panic) = first_panic {
            std::panic::resume_unwind(panic);
        }
    }
}
