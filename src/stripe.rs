#![doc = include_str!("../docs/stripe.md")]

use crossbeam_utils::CachePadded;

use crate::lists::{FreeList, RemovalBatch};
use crate::sync::{thread_stripe_hint, AtomicIsize, AtomicU64, Ordering};

/// One stripe (see the module docs).
pub(crate) struct Stripe {
    pub(crate) free: FreeList,
    pub(crate) removals: RemovalBatch,
    corrections: AtomicIsize,
    /// The removal batch's word when a sweep last looked (see `raw`'s
    /// `sweep`): a batch unchanged between two looks is sealed.
    swept: AtomicU64,
}

impl Stripe {
    fn new() -> Self {
        Stripe {
            free: FreeList::new(),
            removals: RemovalBatch::new(),
            corrections: AtomicIsize::new(0),
            swept: AtomicU64::new(0),
        }
    }

    /// Notes that a sweep sees the removal batch's word `word`; returns
    /// whether the previous sweep saw the same (nobody removed since).
    #[inline]
    pub(crate) fn unchanged_since_last_sweep(&self, word: u64) -> bool {
        self.swept.swap(word, Ordering::Relaxed) == word
    }

    /// This stripe's share of the length, mod 2^32 (see the module docs).
    #[inline]
    pub(crate) fn len_share(&self) -> u32 {
        let corrections = self.corrections.load(Ordering::Relaxed) as u32;
        self.free
            .pops()
            .wrapping_sub(self.removals.removals())
            .wrapping_add(corrections)
    }

    /// Records a length change that bypassed the pops and batches.
    #[inline]
    pub(crate) fn adjust_len(&self, delta: isize) {
        self.corrections.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Which stripe: an index below the pool's stripe count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StripeIndex(usize);

impl StripeIndex {
    /// The index as a plain number (for the reclaimer's per-stripe lists).
    #[inline]
    pub(crate) fn get(self) -> usize {
        self.0
    }
}

/// The pool's stripes.
pub(crate) struct Stripes {
    stripes: Box<[CachePadded<Stripe>]>,
}

impl Stripes {
    /// `count` stripes, a power of two.
    pub(crate) fn new(count: usize) -> Self {
        assert!(
            count.is_power_of_two(),
            "the stripe count is a power of two"
        );
        Stripes {
            stripes: (0..count)
                .map(|_| CachePadded::new(Stripe::new()))
                .collect(),
        }
    }

    /// The calling thread's stripe.
    #[inline]
    pub(crate) fn home(&self) -> StripeIndex {
        StripeIndex(thread_stripe_hint() & (self.stripes.len() - 1))
    }

    /// Every stripe but `home`, starting after it.
    pub(crate) fn others(&self, home: StripeIndex) -> impl Iterator<Item = StripeIndex> {
        let mask = self.stripes.len() - 1;
        (1..self.stripes.len()).map(move |step| StripeIndex((home.0 + step) & mask))
    }

    /// The stripe a sweep visits on its `turn`-th round from `home`: every
    /// stripe, in turn.
    #[inline]
    pub(crate) fn sweep_target(&self, home: StripeIndex, turn: u32) -> StripeIndex {
        StripeIndex((home.0 + turn as usize) & (self.stripes.len() - 1))
    }

    /// Every stripe, starting at `home`.
    pub(crate) fn all_from(&self, home: StripeIndex) -> impl Iterator<Item = StripeIndex> {
        core::iter::once(home).chain(self.others(home))
    }

    /// The pool's length: the shares' sum, mod 2^32 (see the module docs).
    pub(crate) fn len_sum(&self) -> u32 {
        self.stripes
            .iter()
            .map(|stripe| stripe.len_share())
            .fold(0u32, u32::wrapping_add)
    }
}

impl core::ops::Index<StripeIndex> for Stripes {
    type Output = Stripe;

    #[inline]
    fn index(&self, index: StripeIndex) -> &Stripe {
        &self.stripes[index.0]
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/stripe.rs"]
mod tests;
