//! The state every pool operation works on, shared with the deferred
//! reclamations through an `Arc` (see `reclaim` for why).

use crossbeam_utils::CachePadded;

use crate::config::Config;
use crate::free_list::{Chain, Stripe};
use crate::reclaim::{advance_epoch, reclaim_ready};
use crate::slot::{Slot, SlotWord};
#[cfg(feature = "serde")]
use crate::slot::{SlotEntry, State};
use crate::storage::Storage;
use crate::sync::{thread_stripe_hint, yield_now, AtomicIsize, AtomicU64, Ordering};

/// A `FREE` slot taken for an insert, owned by the inserting thread until it
/// publishes the value or gives the slot back.
pub(crate) struct Acquired<'a, T> {
    pub(crate) index: u32,
    pub(crate) slot: &'a Slot<T>,
    /// The generation the new occupant gets.
    pub(crate) generation: u32,
}

/// Slots claimed for a batch insert and not filled yet, owned by the
/// inserting thread. Dropping it gives back every slot it still holds, so a
/// batch insert that stops early (its iterator ran out, or panicked) loses
/// no slot and leaves the length exact.
pub(crate) struct Claimed<'a, T> {
    shared: &'a Shared<T>,
    home: usize,
    run: Run,
}

enum Run {
    /// `count` slots popped off a free list, linked from `next` (the pop
    /// already counted them as inserts).
    Popped { next: u32, count: u32 },
    /// Never-used slots `next..end` (counted as inserts by `claim`).
    Fresh { next: u32, end: u32 },
}

impl<'a, T> Claimed<'a, T> {
    /// The next claimed slot, now the caller's to publish.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<Acquired<'a, T>> {
        let storage = &self.shared.storage;
        match &mut self.run {
            Run::Popped { next, count } if *count > 0 => {
                let index = *next;
                let slot = storage.slot(index);
                // Relaxed: the slot is ours since the pop, whose Acquire made
                // its word visible; read the link before `publish` overwrites it.
                let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
                *next = word.link();
                *count -= 1;
                Some(Acquired {
                    index,
                    slot,
                    generation: word.generation() + 1,
                })
            }
            Run::Fresh { next, end } if *next < *end => {
                let index = *next;
                *next += 1;
                Some(Acquired {
                    index,
                    slot: storage.slot(index),
                    generation: 1,
                })
            }
            _ => None,
        }
    }
}

impl<T> Drop for Claimed<'_, T> {
    fn drop(&mut self) {
        let shared = self.shared;
        match self.run {
            Run::Popped { next, count } if count > 0 => {
                // Still linked as popped: find the last, push the run back.
                let mut last = next;
                for _ in 1..count {
                    last =
                        SlotWord::from_bits(shared.storage.slot(last).word.load(Ordering::Relaxed))
                            .link();
                }
                shared.stripes[self.home].adjust_len(-(count as isize));
                shared.stripes[self.home].push_chain(&shared.storage, Chain { first: next, last });
            }
            Run::Fresh { next, end } if next < end => {
                shared.stripes[self.home].adjust_len(-((end - next) as isize));
                shared.free_fresh(self.home, next, end);
            }
            _ => {}
        }
    }
}

pub(crate) struct Shared<T> {
    pub(crate) storage: Storage<T>,
    pub(crate) stripes: Box<[CachePadded<Stripe>]>,
    /// The next never-used slot index. It may run past `config.max_slots`
    /// (each failed reservation adds to it); it is a `u64`, so it never wraps.
    fresh: CachePadded<AtomicU64>,
    /// Bumped by every exclusive `reclaim` (see `reclaim`). Read once per
    /// sealed batch, written only under `&mut`.
    era: AtomicU64,
    /// Batches handed to the collector and not yet released, pool-wide: one
    /// load tells an insert whether waiting slots exist at all.
    in_flight: CachePadded<AtomicIsize>,
    /// The collector reclamation defers on (the default one), kept here so
    /// that checking a guard is a pointer comparison.
    pub(crate) collector: crossbeam_epoch::Collector,
    pub(crate) config: Config,
}

impl<T> Shared<T> {
    pub(crate) fn new(config: Config) -> Self {
        let config = config.resolved();
        Shared {
            storage: Storage::new(config.first_bucket_shift),
            stripes: (0..config.stripes).map(|_| Stripe::new()).collect(),
            fresh: CachePadded::new(AtomicU64::new(0)),
            era: AtomicU64::new(0),
            in_flight: CachePadded::new(AtomicIsize::new(0)),
            collector: crossbeam_epoch::default_collector().clone(),
            config,
        }
    }

    /// The current reclamation era.
    #[inline]
    pub(crate) fn era(&self) -> u64 {
        // Relaxed: a new era starts only under `&mut`, which orders it with
        // every later operation.
        self.era.load(Ordering::Relaxed)
    }

    /// Starts a new reclamation era (exclusive access only).
    pub(crate) fn start_era(&self) {
        self.era.fetch_add(1, Ordering::Relaxed);
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
    /// other stripe, else fresh; `None` when the pool is full.
    #[inline]
    pub(crate) fn acquire(&self, home: usize) -> Option<Acquired<'_, T>> {
        if let Some(found) = self.pop_from(home) {
            return Some(found);
        }
        self.acquire_slow(home)
    }

    /// Reusable slots first, in order of cost; fresh slots only when
    /// nothing reusable is ready.
    ///
    /// The home stripe comes first: its released batches, then, if batches
    /// are waiting for the epoch, one push of the epoch. That touches no
    /// other stripe's cache line, so under churn every thread recycles its
    /// own slots without pulling the others' lines away from them. Only then
    /// the other stripes: their free lists and released batches.
    #[cold]
    fn acquire_slow(&self, home: usize) -> Option<Acquired<'_, T>> {
        if let Some(found) = self.reclaim_home(home) {
            return Some(found);
        }
        if self.in_flight.load(Ordering::Relaxed) >= 2 {
            // Batches are waiting for the epoch: push it once. Below two,
            // growing a little is cheaper than a flush (about a microsecond);
            // from two on, one epoch step releases a batch. Pushing it on
            // every slow path, not only for this stripe's own batches, keeps
            // reuse prompt when threads outnumber cores.
            advance_epoch();
            if let Some(found) = self.reclaim_home(home) {
                return Some(found);
            }
        }
        let mask = self.stripes.len() - 1;
        for step in 1..self.stripes.len() {
            let other = (home + step) & mask;
            if !self.stripes[other].looks_empty() {
                if let Some(found) = self.pop_from(other) {
                    return Some(found);
                }
            }
        }
        if let Some(found) = self.reclaim_any(home) {
            return Some(found);
        }
        if self.in_flight.load(Ordering::Relaxed) > 0 && self.reclamation_is_behind() {
            // Most removed slots are waiting for an epoch that a thread
            // preempted while pinned may be holding back for a whole time
            // slice. Give the CPU away once, so that thread can run and
            // unpin, then look again; either way we go on (no waiting on
            // anyone).
            yield_now();
            advance_epoch();
            if let Some(found) = self.reclaim_any(home) {
                return Some(found);
            }
        }
        self.acquire_fresh(home, self.config.fresh_block)
    }

    /// Reclaims the home stripe's released batches and pops one slot.
    #[inline]
    fn reclaim_home(&self, home: usize) -> Option<Acquired<'_, T>> {
        if reclaim_ready(self, home, home) {
            self.pop_from(home)
        } else {
            None
        }
    }

    /// Records a batch handed to the collector (`+1`) or released (`-1`);
    /// returns the previous count.
    #[inline]
    pub(crate) fn count_in_flight(&self, delta: isize) -> isize {
        self.in_flight.fetch_add(delta, Ordering::Relaxed)
    }

    /// Reclaims released batches from any stripe into the home stripe.
    fn reclaim_any(&self, home: usize) -> Option<Acquired<'_, T>> {
        let mask = self.stripes.len() - 1;
        for step in 0..self.stripes.len() {
            let other = (home + step) & mask;
            if self.stripes[other].has_ready() && reclaim_ready(self, other, home) {
                if let Some(found) = self.pop_from(home) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Whether growing now would be growth the live count does not explain:
    /// more than 4x the live values plus 1024 slots are already in use.
    fn reclamation_is_behind(&self) -> bool {
        self.used_slots() > 4 * self.len() as u64 + 1024
    }

    #[inline]
    fn pop_from(&self, stripe: usize) -> Option<Acquired<'_, T>> {
        self.stripes[stripe]
            .pop(&self.storage)
            .map(|(index, slot, word)| Acquired {
                index,
                slot,
                generation: word.generation() + 1,
            })
    }

    /// Claims up to `want` slots (at least one) for a batch insert: a run
    /// off the home stripe's free list (after reclaiming its released
    /// batches), else a block of consecutive fresh slots, else any one
    /// reusable slot the single-insert path can find. `None` when the pool
    /// is full.
    pub(crate) fn claim(&self, home: usize, want: u32) -> Option<Claimed<'_, T>> {
        let want = want.max(1);
        loop {
            if let Some((first, count)) = self.stripes[home].pop_chain(&self.storage, want) {
                return Some(Claimed {
                    shared: self,
                    home,
                    run: Run::Popped { next: first, count },
                });
            }
            if !reclaim_ready(self, home, home) {
                break;
            }
        }
        if let Some((start, end)) = self.reserve_fresh(want) {
            // These inserts pop nothing, so the claim counts them (and the
            // give-back uncounts those left unfilled).
            self.stripes[home].adjust_len((end - start) as isize);
            return Some(Claimed {
                shared: self,
                home,
                run: Run::Fresh { next: start, end },
            });
        }
        let single = self.acquire(home)?;
        Some(Claimed {
            shared: self,
            home,
            run: Run::Popped {
                next: single.index,
                count: 1,
            },
        })
    }

    /// Reserves up to `count` never-used slots with one atomic step, puts
    /// them on the home stripe's free list and pops one (every insert is a
    /// pop: that is what counts it). If other threads took them all first,
    /// they made progress, and we start over.
    fn acquire_fresh(&self, home: usize, count: u32) -> Option<Acquired<'_, T>> {
        let (start, end) = self.reserve_fresh(count)?;
        self.free_fresh(home, start, end);
        match self.pop_from(home) {
            Some(found) => Some(found),
            None => self.acquire_slow(home),
        }
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

    /// Puts never-used slots `start..end` (owned by the caller, possibly
    /// none) on the home stripe's free list, in index order.
    pub(crate) fn free_fresh(&self, home: usize, start: u32, end: u32) {
        if start < end {
            self.link_fresh(start, end);
            self.stripes[home].push_chain(
                &self.storage,
                Chain {
                    first: start,
                    last: end - 1,
                },
            );
        }
    }

    /// Links never-used slots `start..end` into a chain, in index order.
    fn link_fresh(&self, start: u32, end: u32) {
        for index in start..end - 1 {
            // Relaxed: the chain is published by `push_chain`'s Release CAS.
            self.storage
                .slot(index)
                .word
                .store(SlotWord::free(0, index + 1).to_bits(), Ordering::Relaxed);
        }
    }

    /// Puts a slot the caller owns back on the home stripe's free list, for
    /// an exclusive removal or an insert given back: either way one value
    /// fewer than the pops count.
    pub(crate) fn release(&self, home: usize, index: u32, word: SlotWord) {
        self.stripes[home].adjust_len(-1);
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

    /// Sum of the stripes' shares: exact when no operation is in flight.
    /// The shares are read one after another, so under concurrency a remove
    /// may be seen without its insert; such a transient underflow reads as 0.
    pub(crate) fn len(&self) -> usize {
        let sum = self
            .stripes
            .iter()
            .map(|stripe| stripe.len_share())
            .fold(0u32, u32::wrapping_add);
        if sum as u64 > self.used_slots() {
            0
        } else {
            sum as usize
        }
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

/// Why a list of slot entries cannot become a pool.
#[cfg(feature = "serde")]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RestoreError {
    /// More entries than the pool may have slots.
    TooManySlots { max: u32 },
    /// A live entry whose generation no insert could have given.
    LiveGeneration {
        index: usize,
        generation: u32,
        max: u32,
    },
    /// A vacant entry whose generation does not fit a slot word.
    VacantGeneration { index: usize, generation: u32 },
}

#[cfg(feature = "serde")]
impl core::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            RestoreError::TooManySlots { max } => {
                write!(f, "more than {max} slot entries (a pool has at most {max} slots)")
            }
            RestoreError::LiveGeneration {
                index,
                generation,
                max,
            } => write!(
                f,
                "slot {index}: live entry with generation {generation} (live generations are 1..={max})"
            ),
            RestoreError::VacantGeneration { index, generation } => write!(
                f,
                "slot {index}: vacant entry with generation {generation} (generations are at most {})",
                crate::handle::MAX_GENERATION
            ),
        }
    }
}

#[cfg(feature = "serde")]
impl<T> Shared<T> {
    /// What slot `index` holds, from one load of its word: every entry is a
    /// state the slot actually had. A live value is borrowed for as long as
    /// `guard` stays pinned, even if another thread removes it meanwhile.
    ///
    /// # Panics
    /// If `guard` does not pin the collector reclamation defers on.
    pub(crate) fn read_slot<'a>(
        &'a self,
        index: u32,
        guard: &'a crossbeam_epoch::Guard,
    ) -> SlotEntry<&'a T> {
        assert!(
            guard.collector() == Some(&self.collector),
            "read_slot needs a guard from handle_pool::pin()"
        );
        let Some(slot) = self.storage.get(index) else {
            // Reserved, bucket not allocated yet: never occupied.
            return SlotEntry::Vacant(0);
        };
        // Acquire pairs with the Release store in `publish`: once the word
        // says OCCUPIED, the value written before it is visible.
        let word = SlotWord::from_bits(slot.word.load(Ordering::Acquire));
        if word.state() == State::Occupied {
            // SAFETY: the word was OCCUPIED, so the value is initialised. The
            // guard (of the default collector, checked above) was pinned
            // before that load, so a removal from now on defers the drop
            // until the guard is dropped; exclusive removals need `&mut` on
            // the pool, which our `&'a self` borrow rules out. The storage
            // lives as long as `&'a self`.
            SlotEntry::Live(word.generation(), unsafe { slot.value_ref() })
        } else {
            SlotEntry::Vacant(word.generation())
        }
    }

    /// Checks that entry `index` of a list could describe slot `index` of
    /// this pool.
    ///
    /// # Errors
    /// An index at or above `max_slots`; a live generation outside
    /// `1..=max_generation`; a vacant generation above `MAX_GENERATION`.
    pub(crate) fn check_entry<V>(
        &self,
        index: usize,
        entry: &SlotEntry<V>,
    ) -> Result<(), RestoreError> {
        let max_slots = self.config.max_slots;
        if index >= max_slots as usize {
            return Err(RestoreError::TooManySlots { max: max_slots });
        }
        let max = self.config.max_generation;
        match *entry {
            SlotEntry::Live(generation, _) if generation == 0 || generation > max => {
                Err(RestoreError::LiveGeneration {
                    index,
                    generation,
                    max,
                })
            }
            SlotEntry::Vacant(generation) if generation > crate::handle::MAX_GENERATION => {
                Err(RestoreError::VacantGeneration { index, generation })
            }
            _ => Ok(()),
        }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Closures that ran after the pool was dropped left their nodes on the
        // ready lists; the pool's drop already dropped every value.
        for stripe in self.stripes.iter() {
            let mut node = stripe.take_ready();
            while !node.is_null() {
                // SAFETY: the taken list is ours alone (`&mut self`), and
                // every node came from `Box::into_raw` in `push_ready`.
                let owned = unsafe { Box::from_raw(node) };
                node = owned.next;
            }
        }
    }
}
