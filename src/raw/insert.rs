//! Inserting: a value is published into a slot `acquire` found.

use crate::handle::Handle;
use crate::lists::Chain;
use crate::reclaim::Horizon;
use crate::slot::{Slot, SlotWord, NIL};
use crate::stripe::StripeIndex;
use crate::sync::Ordering;

use super::sweep::SWEEP_EVERY_POPS;
use super::RawPool;

/// Where a batch insert puts the handles it makes.
pub(crate) trait HandleSink {
    /// Room for `additional` more handles is about to be needed.
    fn reserve(&mut self, additional: usize);
    fn push(&mut self, handle: Handle);
}

/// Keeps no handles.
impl HandleSink for () {
    fn reserve(&mut self, _: usize) {}
    fn push(&mut self, _: Handle) {}
}

/// A `FREE` slot taken for an insert, owned by the inserting thread until it
/// publishes a value into it or gives it back.
pub(super) struct Acquired<'a, T> {
    pub(super) index: u32,
    pub(super) slot: &'a Slot<T>,
    /// The generation the new occupant gets.
    pub(super) generation: u32,
}

impl<'a, T> Acquired<'a, T> {
    /// The slot at `index`, just popped off a free list with the vacant
    /// `word`: its next occupant gets the generation after `word`'s.
    #[inline(always)]
    pub(super) fn reusing(index: u32, slot: &'a Slot<T>, word: SlotWord) -> Self {
        Acquired {
            index,
            slot,
            generation: word.generation() + 1,
        }
    }
}

/// Writes the value into a slot the caller acquired and makes it visible.
#[inline]
pub(super) fn publish<T>(acquired: Acquired<'_, T>, value: T) -> Handle {
    let Acquired {
        index,
        slot,
        generation,
    } = acquired;
    // SAFETY: the slot was acquired (popped off a free list, or claimed
    // fresh), so this thread owns it: it is FREE (or, for a `T` without
    // drop glue, REMOVED past its grace period: see `reclaim_batch`), holds
    // no value that needs dropping, and no reader dereferences it until the
    // word below says OCCUPIED.
    unsafe { slot.write_value(value) };
    let handle = Handle::new(index, generation);
    // Release pairs with the Acquire load in `find_occupied` (and with
    // `remove`'s CAS): the value is written before the handle resolves.
    slot.word
        .store(SlotWord::occupied(handle).to_bits(), Ordering::Release);
    handle
}

/// The pool, borrowed mutably, shared by the jobs of a parallel batch
/// insert: it only moves values in, so it may be shared by threads when
/// `T: Send`, without the `T: Sync` that sharing `&RawPool` needs.
#[cfg(feature = "rayon")]
pub(crate) struct Inserter<'a, T>(&'a RawPool<T>);

#[cfg(feature = "rayon")]
impl<T> Clone for Inserter<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

#[cfg(feature = "rayon")]
impl<T> Copy for Inserter<'_, T> {}

#[cfg(feature = "rayon")]
impl<T> Inserter<'_, T> {
    /// Inserts one value, as [`RawPool::insert`].
    pub(crate) fn insert(self, value: T) -> Result<Handle, T> {
        self.0.insert(value)
    }

    /// Inserts the values as one batch, keeping no handles, as
    /// [`RawPool::insert_many`].
    pub(crate) fn insert_all(self, values: impl IntoIterator<Item = T>) -> Result<(), T> {
        self.0.insert_many(values, &mut ())
    }
}

// SAFETY: an `Inserter` reaches the pool only through `insert` and
// `insert_all`, which move values in from the calling thread and hand out no
// `&T`; the values are later dropped or taken by whoever owns the pool:
// `T: Send` covers both. The `&mut` borrow it came from keeps every other
// access out while it lives.
#[cfg(feature = "rayon")]
unsafe impl<T: Send> Send for Inserter<'_, T> {}

// SAFETY: as for `Send`: `&Inserter` gives nothing more than `Inserter`
// (it is `Copy`), and that only moves `T`s in.
#[cfg(feature = "rayon")]
unsafe impl<T: Send> Sync for Inserter<'_, T> {}

#[cfg(feature = "rayon")]
impl<T> RawPool<T> {
    /// The pool as an [`Inserter`] for parallel batch inserts.
    pub(crate) fn inserter(&mut self) -> Inserter<'_, T> {
        Inserter(self)
    }
}

/// Slots claimed for a batch insert and not filled yet, owned by the
/// inserting thread. Dropping it gives back every slot it still holds.
pub(super) struct Claimed<'a, T> {
    pool: &'a RawPool<T>,
    home: StripeIndex,
    run: Run,
}

pub(super) enum Run {
    /// `count` slots popped off a free list, linked from `next` (the pop
    /// already counted them as inserts).
    Popped { next: u32, count: u32 },
    /// Never-used slots `next..end` (counted as inserts by `claim`).
    Fresh { next: u32, end: u32 },
}

impl<'a, T> Claimed<'a, T> {
    /// The next claimed slot, now the caller's to publish.
    #[inline]
    fn take(&mut self) -> Option<Acquired<'a, T>> {
        let storage = &self.pool.storage;
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
        let pool = self.pool;
        let stripe = &pool.stripes[self.home];
        match self.run {
            Run::Popped { next, count } if count > 0 => {
                // Still linked as popped: find the last, push the run back.
                let mut last = next;
                for _ in 1..count {
                    let word = pool.storage.slot(last).word.load(Ordering::Relaxed);
                    last = SlotWord::from_bits(word).link();
                }
                stripe.adjust_len(-(count as isize));
                stripe.free.push(&pool.storage, Chain { first: next, last });
            }
            Run::Fresh { next, end } if next < end => {
                stripe.adjust_len(-((end - next) as isize));
                pool.free_fresh(self.home, next, end);
            }
            _ => {}
        }
    }
}

impl<T> RawPool<T> {
    /// Inserts `value`, or gives it back when the pool is full.
    ///
    /// The common case, [`pop_own`](Self::pop_own), takes no call; every
    /// other case is one call that takes the value along. So the inline part
    /// keeps nothing live across a call and saves no registers, inlined into
    /// a caller's loop or not (docs/perf/0022).
    #[inline]
    pub(crate) fn insert(&self, value: T) -> Result<Handle, T> {
        match self.pop_own() {
            Some(acquired) => Ok(publish(acquired, value)),
            None => self.insert_slow(value),
        }
    }

    /// [`insert`](Self::insert) for a caller to whom a full pool is fatal:
    /// calls `full` (which panics) instead of giving the value back. No
    /// `Result` to branch on after the common case, and the uncommon one is
    /// a tail call, so the inline part saves no register.
    #[inline]
    pub(crate) fn insert_or(&self, value: T, full: fn() -> !) -> Handle {
        match self.pop_own() {
            Some(acquired) => publish(acquired, value),
            None => self.insert_slow_or(value, full),
        }
    }

    /// [`insert_or`](Self::insert_or) when [`pop_own`](Self::pop_own) found
    /// nothing.
    #[inline(never)]
    pub(super) fn insert_slow_or(&self, value: T, full: fn() -> !) -> Handle {
        match self.insert_slow(value) {
            Ok(handle) => handle,
            Err(_) => full(),
        }
    }

    /// [`insert`](Self::insert) when [`pop_own`](Self::pop_own) found nothing.
    #[inline(never)]
    pub(super) fn insert_slow(&self, value: T) -> Result<Handle, T> {
        let (home, magazine) = self.stripes.home_and_magazine();
        match self.acquire(home, magazine) {
            Some(acquired) => Ok(publish(acquired, value)),
            None => Err(value),
        }
    }

    /// A slot off the calling thread's own magazine, when that needs no
    /// call: `None`, having changed nothing, if the thread owns no magazine
    /// here, a revoker holds it, it is empty, or this pop is one a sweep is
    /// due on. [`acquire`](Self::acquire) handles all of those.
    #[inline(always)]
    pub(super) fn pop_own(&self) -> Option<Acquired<'_, T>> {
        let (_, magazine) = self.stripes.own_magazine()?;
        let section = magazine.enter()?;
        // Not the pop `popped` would sweep on.
        let (index, slot, word, _) = section
            .free_list()
            .pop_owned_unless(&self.storage, |pops| pops % SWEEP_EVERY_POPS == 0)?;
        Some(Acquired::reusing(index, slot, word))
    }

    /// Inserts the value `f` makes from its handle; `None`, without calling
    /// `f`, when the pool is full. If `f` unwinds, the generation it was
    /// shown is burnt and the slot given back.
    pub(crate) fn insert_with(&self, f: impl FnOnce(Handle) -> T) -> Option<Handle> {
        let (home, magazine) = self.stripes.home_and_magazine();
        let acquired = self.acquire(home, magazine)?;
        let (index, generation) = (acquired.index, acquired.generation);
        struct GiveBack<'a, T> {
            pool: &'a RawPool<T>,
            home: StripeIndex,
            index: u32,
            generation: u32,
        }
        impl<T> Drop for GiveBack<'_, T> {
            fn drop(&mut self) {
                let max = self.pool.config.max_generation;
                let word = SlotWord::vacated(self.generation, NIL, max);
                self.pool.give_back(self.home, self.index, word);
            }
        }
        let give_back = GiveBack {
            pool: self,
            home,
            index,
            generation,
        };
        let value = f(Handle::new(index, generation));
        core::mem::forget(give_back);
        Some(publish(acquired, value))
    }

    /// Inserts every value, handing each handle to `sink`. Slots are
    /// claimed in runs no longer than the iterator's `size_hint` and than
    /// what it has produced so far (64 at first); every slot claimed and
    /// not filled is given back, also when the iterator (or the sink)
    /// panics. Gives back the value that found the pool full.
    pub(crate) fn insert_many(
        &self,
        values: impl IntoIterator<Item = T>,
        sink: &mut impl HandleSink,
    ) -> Result<(), T> {
        /// The first run's length limit, before the iterator has produced anything.
        const FIRST_RUN: usize = 64;
        let home = self.stripes.home();
        let mut values = values.into_iter();
        // Dropped on every exit, unwinding included: gives back what is left.
        let mut claimed: Option<Claimed<'_, T>> = None;
        let mut inserted = 0usize;
        while let Some(value) = values.next() {
            let slot = match claimed.as_mut().and_then(Claimed::take) {
                Some(slot) => slot,
                None => {
                    // `value` is one more than the hint's count of what is left.
                    let left = values.size_hint().0.saturating_add(1);
                    let want = left.min(inserted.max(FIRST_RUN)).min(u32::MAX as usize);
                    let Some(mut run) = self.claim(home, want as u32) else {
                        return Err(value);
                    };
                    sink.reserve(want);
                    let slot = run.take().expect("a claim holds at least one slot");
                    claimed = Some(run);
                    slot
                }
            };
            sink.push(publish(slot, value));
            inserted += 1;
        }
        Ok(())
    }

    /// Claims up to `want` slots (at least one) for a batch insert, from
    /// the same sources as a single insert and in the same order: a run off
    /// the home stripe's free list (after reclaiming its ready batches),
    /// one slot from anywhere else reusable (`find_reusable`, which moves a
    /// run from another stripe to the home stripe, for the next claim), a
    /// block of consecutive fresh slots, and at the limit whatever
    /// `last_resort` finds. `None` when full.
    pub(super) fn claim(&self, home: StripeIndex, want: u32) -> Option<Claimed<'_, T>> {
        let want = want.max(1);
        let popped = || {
            let free = &self.stripes[home].free;
            let (run, count) = free.pop_run(&self.storage, want)?;
            let pops = free.pops();
            if pops % SWEEP_EVERY_POPS < count {
                self.sweep_on_pops(home, pops / SWEEP_EVERY_POPS);
            }
            Some(Run::Popped {
                next: run.first,
                count,
            })
        };
        // One horizon for the home stripe's batches and the search after.
        let mut horizon = Horizon::unread();
        let run = popped()
            .or_else(|| {
                self.reclaim_into(home, home, &mut horizon)
                    .then(popped)
                    .flatten()
            })
            .or_else(|| {
                let single = self.find_reusable(home, &mut horizon).ok()?;
                Some(Run::Popped {
                    next: single.index,
                    count: 1,
                })
            })
            .or_else(|| {
                let (start, end) = self.reserve_fresh(want)?;
                // These inserts pop nothing, so the claim counts them (and
                // the give-back uncounts those left unfilled).
                self.stripes[home].adjust_len((end - start) as isize);
                Some(Run::Fresh { next: start, end })
            })
            .or_else(|| {
                let single = self.last_resort(home)?;
                Some(Run::Popped {
                    next: single.index,
                    count: 1,
                })
            })?;
        Some(Claimed {
            pool: self,
            home,
            run,
        })
    }
}
