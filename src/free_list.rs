//! Striped free lists and retirement batches.
//!
//! # Why stripes
//!
//! A single free-list head (or length counter) is one cache line that every
//! insert and remove writes; at 16 to 128 threads that line, not the work,
//! sets the throughput. So the pool keeps a small power-of-two number of
//! [`Stripe`]s (four per core, at most 64), each on its own cache line, and a
//! thread uses the stripe its per-thread number picks (`sync::thread_stripe_hint`).
//! There is no thread limit: threads beyond the stripe count share stripes,
//! which costs contention, never correctness. An insert whose stripe is empty
//! steals from the others before it takes fresh slots, so reusable slots are
//! never stranded in another thread's stripe.
//!
//! # The free list: a tagged Treiber stack threaded through the slots
//!
//! `free` packs `tag << 32 | head`: the first free slot and a tag that every
//! pop increments. A pop reads `head`, reads `head`'s link from its slot word,
//! and CASes `(tag, head)` to `(tag + 1, link)`.
//!
//! **Why it is ABA-safe.** The classic failure: a popper reads head `A` with
//! link `B`, stalls, and meanwhile `A` is popped, `B` is popped, and `A` is
//! pushed back; the stalled CAS would succeed and install the stale `B`. Here
//! that cannot happen: `A` can only be on top again after being popped, and
//! that pop raised the tag, so the stalled CAS fails. Pushes need no tag bump:
//! a push links its slot to the head it read and succeeds only if the head is
//! still that value, so the link it wrote is right whatever happened in
//! between. Only 2^32 pops during one stalled pop could wrap the tag back.
//! Independently of the tag, a removed slot only comes back to a free list
//! after an epoch grace period, so a popper that is pinned cannot see its
//! slot recycled at all; the tag is what makes unpinned pops safe.
//!
//! A popper may read the link of a slot that another thread has already
//! popped and filled; the read is an atomic load of memory that lives as long
//! as the pool, and the CAS then fails, so the value read is never used.
//!
//! # Retirement batches
//!
//! `retiring` packs `count << 32 | head`: a stack of removed (`RETIRING`)
//! slots linked through their words. A remover pushes its slot with one CAS;
//! the remover that would make it `Config::batch` long (64 by default) instead swaps the whole stack
//! out and hands it to the epoch collector as one deferred reclamation (see
//! `reclaim`). Only push and take-all happen here, so no tag is needed.

use crossbeam_utils::CachePadded;

use crate::slot::{SlotWord, NIL};
use crate::storage::Storage;
use crate::sync::{AtomicIsize, AtomicU64, Ordering};

const LOW: u64 = u32::MAX as u64;

#[inline(always)]
const fn pack(high: u32, low: u32) -> u64 {
    ((high as u64) << 32) | low as u64
}

#[inline(always)]
const fn high(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline(always)]
const fn low(word: u64) -> u32 {
    (word & LOW) as u32
}

/// A chain of slots linked through their words, `first` to `last`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chain {
    pub(crate) first: u32,
    pub(crate) last: u32,
}

/// A batch of `RETIRING` slots taken off a stripe, ready to be reclaimed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetiredBatch {
    pub(crate) head: u32,
    pub(crate) count: u32,
}

/// One stripe: a free list, a retirement batch being filled, and a share of
/// the length counter, on a cache line of its own.
pub(crate) struct Stripe {
    /// `tag << 32 | first free slot`.
    free: AtomicU64,
    /// `count << 32 | first retiring slot`.
    retiring: AtomicU64,
    /// Inserts minus removes done through this stripe; may be negative.
    pub(crate) len: AtomicIsize,
}

impl Stripe {
    pub(crate) fn new() -> CachePadded<Self> {
        CachePadded::new(Stripe {
            free: AtomicU64::new(pack(0, NIL)),
            retiring: AtomicU64::new(pack(0, NIL)),
            len: AtomicIsize::new(0),
        })
    }

    /// Whether the free list looks empty (a hint: it may change at once).
    #[inline]
    pub(crate) fn looks_empty(&self) -> bool {
        low(self.free.load(Ordering::Relaxed)) == NIL
    }

    /// Pops a free slot; returns its index and its `FREE` word. The caller
    /// owns the slot from then on.
    #[inline]
    pub(crate) fn pop<T>(&self, storage: &Storage<T>) -> Option<(u32, SlotWord)> {
        // Acquire pairs with the Release CAS in `push_chain`: the links the
        // pusher wrote, and the reclaimer's drop of the old value, are visible.
        let mut head = self.free.load(Ordering::Acquire);
        loop {
            let index = low(head);
            if index == NIL {
                return None;
            }
            // Relaxed: the link was published by the Acquire load of `head`;
            // if the slot has moved on since, the CAS below fails (see module docs).
            let word = SlotWord::from_bits(storage.slot(index).word.load(Ordering::Relaxed));
            let next = pack(high(head).wrapping_add(1), word.link());
            // Acquire on both outcomes: as for the first load of `head`.
            match self
                .free
                .compare_exchange_weak(head, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some((index, word)),
                Err(actual) => head = actual,
            }
        }
    }

    /// Pushes a chain of `FREE` slots, already linked `first` → … → `last`,
    /// that the caller owns. `last`'s link is overwritten.
    pub(crate) fn push_chain<T>(&self, storage: &Storage<T>, chain: Chain) {
        let last = &storage.slot(chain.last).word;
        let mut head = self.free.load(Ordering::Relaxed);
        loop {
            let word = SlotWord::from_bits(last.load(Ordering::Relaxed));
            last.store(word.with_link(low(head)).to_bits(), Ordering::Relaxed);
            let new = pack(high(head), chain.first);
            // Release pairs with the Acquire in `pop`: our links, and whatever
            // we did to the slots' values, happen before the slots are reused.
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Adds a slot the caller has just moved to `RETIRING(generation, _)`.
    /// Returns a full batch when this push completes one; the caller must
    /// then have it reclaimed.
    #[inline]
    pub(crate) fn push_retiring<T>(
        &self,
        storage: &Storage<T>,
        index: u32,
        generation: u32,
        mut current: u64,
        batch: u32,
    ) -> Option<RetiredBatch> {
        let word = &storage.slot(index).word;
        loop {
            let count = high(current) + 1;
            let new = if count >= batch {
                pack(0, NIL)
            } else {
                pack(count, index)
            };
            // AcqRel: Release publishes our slot's link to whoever takes the
            // batch; Acquire, when we take it, pairs with the other pushers'
            // Release so their links are visible to us.
            match self.retiring.compare_exchange_weak(
                current,
                new,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) if count >= batch => return Some(RetiredBatch { head: index, count }),
                Ok(_) => return None,
                Err(actual) => {
                    current = actual;
                    // We still own the slot: relink it to the new head.
                    word.store(
                        SlotWord::retiring(generation, low(current)).to_bits(),
                        Ordering::Relaxed,
                    );
                }
            }
        }
    }

    /// The head of the retirement batch, for a remover to link its slot to
    /// before it pushes.
    #[inline]
    pub(crate) fn retiring_head(&self) -> u64 {
        self.retiring.load(Ordering::Relaxed)
    }

    /// Takes whatever is in the retirement batch (exclusive access only).
    pub(crate) fn take_retiring(&self) -> Option<RetiredBatch> {
        // Acquire: as when a remover takes a full batch.
        let taken = self.retiring.swap(pack(0, NIL), Ordering::Acquire);
        (low(taken) != NIL).then(|| RetiredBatch {
            head: low(taken),
            count: high(taken),
        })
    }
}

/// The link stored with a retiring slot pushed on top of `current`.
#[inline(always)]
pub(crate) fn retiring_link(current: u64) -> u32 {
    low(current)
}
