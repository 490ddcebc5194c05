//! The state every pool operation works on, shared with the deferred
//! reclamations through an `Arc` (see `reclaim` for why).

use crossbeam_utils::CachePadded;

use crate::config::Config;
use crate::free_list::{Chain, Stripe};
use crate::slot::{Slot, SlotWord};
use crate::storage::Storage;
use crate::sync::{thread_stripe_hint, AtomicU64, Ordering};

pub(crate) struct Shared<T> {
    pub(crate) storage: Storage<T>,
    pub(crate) stripes: Box<[CachePadded<Stripe>]>,
    /// The next never-used slot index. It may run past `config.max_slots`
    /// (each failed reservation adds to it); it is a `u64`, so it never wraps.
    fresh: CachePadded<AtomicU64>,
    pub(crate) config: Config,
}

impl<T> Shared<T> {
    pub(crate) fn new(config: Config) -> Self {
        let config = config.resolved();
        Shared {
            storage: Storage::new(config.first_bucket_shift),
            stripes: (0..config.stripes).map(|_| Stripe::new()).collect(),
            fresh: CachePadded::new(AtomicU64::new(0)),
            config,
        }
    }

    /// The calling thread's stripe number.
    #[inline]
    pub(crate) fn home(&self) -> usize {
        thread_stripe_hint() & (self.stripes.len() - 1)
    }

    /// Number of slots ever handed out from the fresh region.
    #[inline]
    pub(crate) fn used_slots(&self) -> u64 {
        self.fresh
            .load(Ordering::Relaxed)
            .min(self.config.max_slots as u64)
    }

    /// Takes a `FREE` slot for an insert: from the home stripe, else from any
    /// other stripe, else fresh. Returns the index and the slot's generation
    /// (the new occupant gets one more), or `None` when the pool is full.
    /// The caller owns the slot until it publishes or releases it.
    #[inline]
    pub(crate) fn acquire(&self, home: usize) -> Option<(u32, u32)> {
        if let Some((index, word)) = self.stripes[home].pop(&self.storage) {
            return Some((index, word.generation()));
        }
        self.acquire_slow(home)
    }

    #[cold]
    fn acquire_slow(&self, home: usize) -> Option<(u32, u32)> {
        let mask = self.stripes.len() - 1;
        for step in 1..self.stripes.len() {
            let stripe = &self.stripes[(home + step) & mask];
            if stripe.looks_empty() {
                continue;
            }
            if let Some((index, word)) = stripe.pop(&self.storage) {
                return Some((index, word.generation()));
            }
        }
        self.acquire_fresh(home, self.config.fresh_block)
            .map(|start| (start, 0))
    }

    /// Reserves up to `count` never-used slots with one atomic step and
    /// returns the first; the rest go onto the home stripe's free list.
    fn acquire_fresh(&self, home: usize, count: u32) -> Option<u32> {
        let (start, end) = self.reserve_fresh(count)?;
        if end - start > 1 {
            self.link_fresh(start + 1, end);
            self.stripes[home].push_chain(
                &self.storage,
                Chain {
                    first: start + 1,
                    last: end - 1,
                },
            );
        }
        Some(start)
    }

    /// Reserves a block of at most `count` consecutive never-used slots,
    /// allocated and owned by the caller: `start..end`, never empty.
    pub(crate) fn reserve_fresh(&self, count: u32) -> Option<(u32, u32)> {
        let max = self.config.max_slots as u64;
        // Relaxed: the counter only hands out disjoint ranges; the slots are
        // published through the bucket pointers.
        let start = self.fresh.fetch_add(count as u64, Ordering::Relaxed);
        if start >= max {
            return None;
        }
        let end = (start + count as u64).min(max);
        let (start, end) = (start as u32, end as u32);
        self.storage.ensure(start, end);
        Some((start, end))
    }

    /// Links never-used slots `start..end` into a chain, in index order.
    pub(crate) fn link_fresh(&self, start: u32, end: u32) {
        for index in start..end - 1 {
            // Relaxed: the chain is published by `push_chain`'s Release CAS.
            self.storage
                .slot(index)
                .word
                .store(SlotWord::free(0, index + 1).to_bits(), Ordering::Relaxed);
        }
    }

    /// Puts a slot the caller owns back on the home stripe's free list.
    pub(crate) fn release(&self, home: usize, index: u32, word: SlotWord) {
        let slot = self.storage.slot(index);
        slot.word.store(word.to_bits(), Ordering::Relaxed);
        if word.state() == crate::slot::State::Free {
            self.stripes[home].push_chain(
                &self.storage,
                Chain {
                    first: index,
                    last: index,
                },
            );
        }
    }

    /// Sum of the stripes' counters: exact when no operation is in flight.
    pub(crate) fn len(&self) -> usize {
        let sum = self
            .stripes
            .iter()
            .map(|stripe| stripe.len.load(Ordering::Relaxed))
            .fold(0isize, isize::wrapping_add);
        sum.max(0) as usize
    }

    #[inline]
    pub(crate) fn add_len(&self, home: usize, delta: isize) {
        self.stripes[home].len.fetch_add(delta, Ordering::Relaxed);
    }

    /// The slot `index` if it holds the occupant with `generation`.
    #[inline]
    pub(crate) fn occupied_slot(&self, index: u32, generation: u32) -> Option<&Slot<T>> {
        let slot = self.storage.get(index)?;
        // Acquire pairs with the Release store that published the occupant in
        // `insert`, so its value is visible once the word matches.
        let word = slot.word.load(Ordering::Acquire);
        (word == SlotWord::occupied(generation).to_bits()).then_some(slot)
    }
}
