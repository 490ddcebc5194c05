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
//! pop increments (which also makes the tag a count of inserts: see
//! [`Stripe::len_share`]). A pop reads `head`, reads `head`'s link from its slot word,
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

use crate::slot::{Slot, SlotWord, NIL};
use crate::storage::Storage;
use crate::sync::{AtomicIsize, AtomicPtr, AtomicU64, Ordering};

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

/// A batch whose grace period is over, on a stripe's ready list.
pub(crate) struct ReadyBatch {
    pub(crate) batch: RetiredBatch,
    /// The pool's era when the batch was sealed (see `reclaim`).
    pub(crate) era: u64,
    pub(crate) next: *mut ReadyBatch,
}

/// One stripe: a free list, a retirement batch being filled, the batches
/// whose grace period is over, and a share of the length counter, on a
/// cache line of its own.
pub(crate) struct Stripe {
    /// Batches the epoch collector has released, waiting for an insert (or
    /// an exclusive `reclaim`) to drop their values and splice their slots.
    /// Push one, take all: no ABA.
    ready: AtomicPtr<ReadyBatch>,
    /// `tag << 32 | first free slot`.
    free: AtomicU64,
    /// `count << 32 | first retiring slot`.
    retiring: AtomicU64,
    /// Slots ever taken off `retiring` as batches (mod 2^32 is what counts).
    retired: AtomicU64,
    /// Rare corrections to the length: exclusive removals (which skip the
    /// retirement batches) and inserts given back when their closure panicked.
    adjust: AtomicIsize,
}

impl Stripe {
    pub(crate) fn new() -> CachePadded<Self> {
        CachePadded::new(Stripe {
            ready: AtomicPtr::new(core::ptr::null_mut()),
            free: AtomicU64::new(pack(0, NIL)),
            retiring: AtomicU64::new(pack(0, NIL)),
            retired: AtomicU64::new(0),
            adjust: AtomicIsize::new(0),
        })
    }

    /// Whether the free list looks empty (a hint: it may change at once).
    #[inline]
    pub(crate) fn looks_empty(&self) -> bool {
        low(self.free.load(Ordering::Relaxed)) == NIL
    }

    /// Pops a free slot; returns its index, the slot and its `FREE` word.
    /// The caller owns the slot from then on.
    #[inline]
    pub(crate) fn pop<'a, T>(
        &self,
        storage: &'a Storage<T>,
    ) -> Option<(u32, &'a Slot<T>, SlotWord)> {
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
            let slot = storage.slot(index);
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            let next = pack(high(head).wrapping_add(1), word.link());
            // Acquire on both outcomes: as for the first load of `head`.
            match self
                .free
                .compare_exchange_weak(head, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some((index, slot, word)),
                Err(actual) => head = actual,
            }
        }
    }

    /// Pops up to `max` free slots at once: walks that many links from the
    /// head and swings the head past them with one CAS, raising the tag by
    /// the number taken (each is an insert). Returns the first slot and the
    /// count; the caller owns the chain, linked through the slot words.
    ///
    /// ABA-safe for the same reason as `pop`: the CAS succeeds only if the
    /// head and tag are unchanged, which means no pop happened since we read
    /// the head, so no slot of the chain we walked can have moved.
    pub(crate) fn pop_chain<T>(&self, storage: &Storage<T>, max: u32) -> Option<(u32, u32)> {
        // Acquire: as in `pop`; it also covers the links of every slot
        // below the head (earlier pushes are in the head's release sequence).
        let mut head = self.free.load(Ordering::Acquire);
        loop {
            let first = low(head);
            if first == NIL || max == 0 {
                return None;
            }
            let mut count = 0;
            let mut next = first;
            while count < max && next != NIL {
                // Relaxed: as in `pop`; a stale link only makes the CAS fail.
                next = SlotWord::from_bits(storage.slot(next).word.load(Ordering::Relaxed)).link();
                count += 1;
            }
            let new = pack(high(head).wrapping_add(count), next);
            // Acquire on both outcomes: as in `pop`.
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some((first, count)),
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

    /// Adds a chain of `count` slots the caller has just moved to
    /// `RETIRING`, linked `head` → … → tail, to the batch being filled; the
    /// tail's link is (re)written to the batch's current head. Returns the
    /// batch when this push fills it; the caller must then have it reclaimed.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push_retiring(
        &self,
        tail: &AtomicU64,
        tail_generation: u32,
        head: u32,
        count: u32,
        mut current: u64,
        batch: u32,
    ) -> Option<RetiredBatch> {
        loop {
            let total = high(current) + count;
            let new = if total >= batch {
                pack(0, NIL)
            } else {
                pack(total, head)
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
                Ok(_) if total >= batch => {
                    self.retired.fetch_add(total as u64, Ordering::Relaxed);
                    return Some(RetiredBatch { head, count: total });
                }
                Ok(_) => return None,
                Err(actual) => {
                    current = actual;
                    // We still own the chain: relink its tail to the new head.
                    tail.store(
                        SlotWord::retiring(tail_generation, low(current)).to_bits(),
                        Ordering::Relaxed,
                    );
                }
            }
        }
    }

    /// This stripe's share of the pool's length, mod 2^32: every insert pops
    /// a free list once, which raises that list's tag, and every `remove`
    /// pushes its slot on a retirement batch once. Deriving the length from
    /// words the operations write anyway spares each of them a counter RMW.
    #[inline]
    pub(crate) fn len_share(&self) -> u32 {
        let pops = high(self.free.load(Ordering::Relaxed));
        let pending = high(self.retiring.load(Ordering::Relaxed));
        let retired = self.retired.load(Ordering::Relaxed) as u32;
        let adjust = self.adjust.load(Ordering::Relaxed) as u32;
        pops.wrapping_sub(pending)
            .wrapping_sub(retired)
            .wrapping_add(adjust)
    }

    /// Records a length change that bypassed the pops and batches.
    pub(crate) fn adjust_len(&self, delta: isize) {
        self.adjust.fetch_add(delta, Ordering::Relaxed);
    }

    /// Puts a batch whose grace period is over on the ready list.
    pub(crate) fn push_ready(&self, node: Box<ReadyBatch>) {
        let node = Box::into_raw(node);
        let mut head = self.ready.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` came from `Box::into_raw` just above and is not
            // shared until the CAS below succeeds.
            unsafe { (*node).next = head };
            // Release pairs with the Acquire swap in `take_ready`: the node's
            // fields are written before the taker reads them.
            match self
                .ready
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Whether the ready list looks empty (a hint).
    #[inline]
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.load(Ordering::Relaxed).is_null()
    }

    /// Takes every ready batch; the caller owns the returned list of nodes
    /// (made by `Box::into_raw`, linked through `next`).
    pub(crate) fn take_ready(&self) -> *mut ReadyBatch {
        if !self.has_ready() {
            return core::ptr::null_mut();
        }
        // Acquire pairs with the Release CAS in `push_ready`.
        self.ready.swap(core::ptr::null_mut(), Ordering::Acquire)
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
        self.retired
            .fetch_add(high(taken) as u64, Ordering::Relaxed);
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
