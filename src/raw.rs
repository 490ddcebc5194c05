//! The raw pool: every slot mechanic, on raw [`Handle`]s.
//!
//! Acquiring a slot (from the home stripe, another stripe, a released batch or
//! fresh storage), publishing a value into it, looking it up, removing it
//! into a batch, giving a slot back, restoring a serialized pool, and the
//! length accounting all live here. The typed face (`pool`, `iter`,
//! `collect`, `serde_impl`) converts handles and delegates; reclamation
//! (`reclaim`) gets sealed batches from here and hands back free chains.

use core::time::Duration;

use crate::Guard;
use crossbeam_utils::CachePadded;

use crate::config::Config;
use crate::handle::Handle;
use crate::hint::cold_path;
use crate::lists::{Chain, RemovalBatch};
use crate::magazine::{Magazine, Revoked, Section};
use crate::reclaim::Reclaimer;
use crate::slot::{drop_catching, keep_first, Panic, Slot, SlotWord, State, NIL};
pub(crate) use crate::storage::View;
use crate::storage::{FindSlot, Slots, Storage};
use crate::stripe::{StripeIndex, Stripes};
use crate::sync::{asymmetric_fences, yield_now, AtomicU64, Ordering, Patience};

/// A stripe is swept (see [`RawPool::sweep`]) once per this many pops of
/// its free list, and once per this many batches it seals: with the
/// default batch of 128, once per 256 removes.
const SWEEP_EVERY_POPS: u32 = 1024;
const SWEEP_EVERY_SEALS: u32 = 2;

/// At most this many times an insert gives the CPU away and looks again
/// before it grows a pool whose reclamation is behind: enough for a thread
/// preempted while pinned to run again when threads outnumber cores (4
/// rounds let 32 threads on 2 cores reach 200–400 thousand slots for 2,048
/// live; 16, about 100 thousand; 64, 16–25 thousand, and 6 thousand since
/// the rounds take quiet stripes' slots).
const BEHIND_ROUNDS: usize = 64;

/// How long, at most, an insert that would take the pool past its bound
/// sleeps waiting for reclamation (see `RawPool::wait_at_bound`): longer
/// than the few milliseconds a busy host typically takes a virtual CPU
/// away for, short against a guard held for a frame or more.
const BOUND_PATIENCE: Duration = Duration::from_millis(10);

/// At most this many times `flush` and a full pool give the CPU away while
/// a magazine's owner is inside a section (a pop, or a CAS and a push) or
/// another revoker holds the magazine, before they leave that magazine
/// alone: enough for a thread preempted there to run again. (Two under
/// loom, whose yields always let the other threads run.)
#[cfg(not(all(test, handle_pool_loom)))]
const REVOKE_PATIENCE: u32 = 256;
#[cfg(all(test, handle_pool_loom))]
const REVOKE_PATIENCE: u32 = 2;

/// Which other stripes an insert may take reusable slots from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Only quiet ones (see [`Stripe::is_quiet`](crate::stripe::Stripe::is_quiet)),
    /// and only if none of the home stripe's removed slots are on their way
    /// back to it (see `find_reusable`).
    QuietOnly,
    /// Any, busy ones included.
    Any,
}

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
}

// SAFETY: moving the pool moves the ownership of its values, which are
// dropped by whichever thread owns or shares the pool: `T: Send`. The rest is
// atomics and the reclaimer, whose deferred closures hold no `T`.
unsafe impl<T: Send> Send for RawPool<T> {}

// SAFETY: through `&RawPool` threads share `&T` (`get`, `entries`), which
// needs `T: Sync`, and insert and remove values on any thread, so a value
// may be dropped on another thread than the one that inserted it: `T: Send`.
unsafe impl<T: Send + Sync> Sync for RawPool<T> {}

/// Whether a removal may still try to enter its thread's magazine.
#[derive(Clone, Copy)]
enum Entry {
    Try,
    /// The owner's section was refused just now: a revoker holds it.
    Refused,
}

/// A `FREE` slot taken for an insert, owned by the inserting thread until it
/// publishes a value into it or gives it back.
struct Acquired<'a, T> {
    index: u32,
    slot: &'a Slot<T>,
    /// The generation the new occupant gets.
    generation: u32,
}

impl<'a, T> Acquired<'a, T> {
    /// The slot at `index`, just popped off a free list with the vacant
    /// `word`: its next occupant gets the generation after `word`'s.
    #[inline(always)]
    fn reusing(index: u32, slot: &'a Slot<T>, word: SlotWord) -> Self {
        Acquired {
            index,
            slot,
            generation: word.generation() + 1,
        }
    }
}

/// Writes the value into a slot the caller acquired and makes it visible.
#[inline]
fn publish<T>(acquired: Acquired<'_, T>, value: T) -> Handle {
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

/// What [`RawPool::revoke_magazine`] does with a magazine.
#[derive(Clone, Copy)]
enum Magazines {
    /// Seals its partial batch; its free slots stay with its owner.
    Sealed,
    /// Seals its partial batch and moves its free slots onto its stripe's
    /// shared list.
    Emptied,
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

    /// For the loom models, which cannot run the 1,024 pops between two
    /// notes: takes two notes now, so every stripe is quiet until its next
    /// insert (see [`Stripe::is_quiet`]).
    ///
    /// [`Stripe::is_quiet`]: crate::stripe::Stripe::is_quiet
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn quiet_stripes(&self) {
        self.stripes.note_inserts();
        self.stripes.note_inserts();
    }

    /// For the loom models, which cannot run the pops and seals between
    /// sweeps: empties every other stripe's magazine as a sweep does one it
    /// finds idle and holding slots. Returns whether it took any.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn empty_other_magazines(&self) -> bool {
        let home = self.stripes.home();
        self.stripes.others(home).fold(false, |took, stripe| {
            self.revoke_magazine(stripe, 0, Magazines::Emptied) | took
        })
    }

    /// For the loom models, which cannot reach the back-pressure rounds:
    /// seals the calling thread's partial batches as those rounds do.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn seal_own_partial_batches(&self) -> bool {
        self.seal_own(self.stripes.home())
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

    // ---- Lookups -------------------------------------------------------

    /// `found` of the slot `handle` names in `slots`, if it holds the
    /// occupant the handle was made for. Every lookup goes through here.
    #[inline(always)]
    fn find_occupied<'a, R>(
        slots: impl FindSlot<'a, T>,
        handle: Handle,
        found: impl FnOnce(&'a Slot<T>) -> R,
    ) -> Option<R>
    where
        T: 'a,
    {
        slots.find_or(
            handle.index(),
            |slot| {
                // Acquire pairs with the Release store in `publish`, so the
                // value is visible once the word matches.
                let word = slot.word.load(Ordering::Acquire);
                if word == SlotWord::occupied(handle).to_bits() {
                    Some(found(slot))
                } else {
                    // A stale or forged handle: laid out off the hit path,
                    // which then runs with no taken branch (BENCHES.md,
                    // "Misses off the hit path").
                    cold_path();
                    None
                }
            },
            None,
        )
    }

    /// The slot `handle` names if it holds the occupant the handle was made for.
    #[inline]
    fn occupied_slot(&self, handle: Handle) -> Option<&Slot<T>> {
        Self::find_occupied(&self.storage, handle, |slot| slot)
    }

    /// The storage as it is now, for a loop of lookups through
    /// [`get_in`](Self::get_in) and [`contains_in`](Self::contains_in)
    /// (see `Storage::view`).
    #[inline]
    pub(crate) fn view(&self) -> View<'_, T> {
        self.storage.view()
    }

    /// Whether `handle` refers to a value in the pool.
    #[inline]
    pub(crate) fn contains(&self, handle: Handle) -> bool {
        Self::contains_in(&self.storage, handle)
    }

    /// [`contains`](Self::contains), looking in `slots`.
    #[inline(always)]
    pub(crate) fn contains_in<'a>(slots: impl FindSlot<'a, T>, handle: Handle) -> bool
    where
        T: 'a,
    {
        // Acquire pairs with the Release store in `publish`, as in every
        // lookup: no value is read here, but a `true` orders this thread
        // after the insert, as a caller who signals through the pool may
        // expect. The word, or the fresh word where no slot exists, is
        // compared once after the paths meet: the comparison's flag then
        // widens in a zeroed register, where a `false` merged in from the
        // missing-bucket path made it a byte write that waits on the
        // previous lookup's (BENCHES.md, "One comparison for `contains`").
        let word = slots.find_or(
            handle.index(),
            |slot| slot.word.load(Ordering::Acquire),
            SlotWord::FRESH.to_bits(),
        );
        word == SlotWord::occupied(handle).to_bits()
    }

    /// The value `handle` refers to, protected by `guard`.
    #[inline]
    pub(crate) fn get<'g>(&'g self, handle: Handle, guard: &'g Guard) -> Option<&'g T> {
        Self::get_in(&self.storage, handle, guard)
    }

    /// [`get`](Self::get), looking in `slots`: this pool's storage, or a
    /// view of it, borrowed for `'g`.
    #[inline(always)]
    pub(crate) fn get_in<'g>(
        slots: impl FindSlot<'g, T>,
        handle: Handle,
        _guard: &'g Guard,
    ) -> Option<&'g T>
    where
        T: 'g,
    {
        // SAFETY: the word was OCCUPIED(g), so the value is initialised (the
        // Acquire load saw its publication). The guard announced this thread
        // (a `Guard` can only be made by announcing) before that load, so
        // even if the value is removed now, its batch is not reclaimed until
        // the guard is dropped (see `reclaim.md`); exclusive removals need
        // `&mut` of the pool, which `slots`' borrow of its storage for `'g`
        // rules out; the storage lives as long as that borrow: the
        // reference is valid for 'g.
        Self::find_occupied(slots, handle, |slot| unsafe { slot.value_ref() })
    }

    /// Calls `f` with the value `handle` refers to, protected for the call
    /// by a one-call read (see `Reclaimer::read`).
    #[inline]
    pub(crate) fn with<R>(&self, handle: Handle, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.reclaimer.read(|| {
            Self::find_occupied(&self.storage, handle, |slot| {
                // SAFETY: the word was OCCUPIED(g), so the value is
                // initialised. The read's protection began before that load
                // and lasts until `f` returns, so no reclamation drops the
                // value or reuses the slot meanwhile (as `Reclaimer::read`
                // promises); exclusive removals need `&mut`, which `&self`
                // rules out.
                f(unsafe { slot.value_ref() })
            })
        })
    }

    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        let slot = self.occupied_slot(handle)?;
        // SAFETY: OCCUPIED means initialised; `&mut self` excludes every
        // other access to the pool for the returned lifetime.
        Some(unsafe { slot.value_mut() })
    }

    /// Mutable references to the values of `handles`, or `None` if any is
    /// stale or two name the same slot.
    pub(crate) fn get_disjoint_mut<const N: usize>(
        &mut self,
        handles: [Handle; N],
    ) -> Option<[&mut T; N]> {
        for (i, handle) in handles.iter().enumerate() {
            self.occupied_slot(*handle)?;
            if handles[..i]
                .iter()
                .any(|other| other.index() == handle.index())
            {
                return None;
            }
        }
        Some(handles.map(|handle| {
            let slot = self.storage.slot(handle.index());
            // SAFETY: every slot was just seen OCCUPIED and `&mut self` keeps
            // it so; the indices are pairwise distinct, so the references
            // do not alias.
            unsafe { slot.value_mut() }
        }))
    }

    // ---- Inserting -----------------------------------------------------

    /// Inserts `value`, or gives it back when the pool is full.
    ///
    /// The common case, [`pop_own`](Self::pop_own), takes no call; every
    /// other case is one call that takes the value along. So the inline part
    /// keeps nothing live across a call and saves no registers, inlined into
    /// a caller's loop or not (BENCHES.md, "Calls only at the edges").
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
    fn insert_slow_or(&self, value: T, full: fn() -> !) -> Handle {
        match self.insert_slow(value) {
            Ok(handle) => handle,
            Err(_) => full(),
        }
    }

    /// [`insert`](Self::insert) when [`pop_own`](Self::pop_own) found nothing.
    #[inline(never)]
    fn insert_slow(&self, value: T) -> Result<Handle, T> {
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
    fn pop_own(&self) -> Option<Acquired<'_, T>> {
        let (_, magazine) = self.stripes.own_magazine()?;
        let section = magazine.enter()?;
        // Not the pop `popped` would sweep on.
        let (index, slot, word, _) = section
            .free()
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

    /// Takes a `FREE` slot for an insert: from the calling thread's
    /// magazine, else its home stripe, else another stripe or fresh (see
    /// `acquire_slow`); `None` when the pool is full.
    #[inline]
    fn acquire(&self, home: StripeIndex, magazine: Option<&Magazine>) -> Option<Acquired<'_, T>> {
        if let Some(found) = magazine.and_then(|magazine| self.pop_from_magazine(home, magazine)) {
            return Some(found);
        }
        if let Some(found) = self.pop_from(home) {
            return Some(found);
        }
        self.acquire_slow(home)
    }

    /// Pops a slot off the calling thread's own magazine, refilling it
    /// first, if empty, with everything on the home stripe's shared list;
    /// `None` if both are empty or a revoker holds the magazine.
    #[inline(always)]
    fn pop_from_magazine(&self, home: StripeIndex, magazine: &Magazine) -> Option<Acquired<'_, T>> {
        let (index, slot, word, pops) = {
            let section = magazine.enter()?;
            match section.free().pop_owned(&self.storage) {
                Some(found) => found,
                None => {
                    // The whole shared list, with one CAS and no walk: a walk
                    // is a chain of dependent loads, each a miss when another
                    // thread touched the slot's line last.
                    section.refill(self.stripes[home].free.take_all()?);
                    section.free().pop_owned(&self.storage)?
                }
            }
        };
        Some(self.popped(home, index, slot, word, pops))
    }

    /// A slot just popped off one of `stripe`'s lists, whose pop count is
    /// now `pops`, as an acquired slot; runs the sweep due every
    /// `SWEEP_EVERY_POPS` pops.
    #[inline(always)]
    fn popped<'a>(
        &'a self,
        stripe: StripeIndex,
        index: u32,
        slot: &'a Slot<T>,
        word: SlotWord,
        pops: u32,
    ) -> Acquired<'a, T> {
        if pops % SWEEP_EVERY_POPS == 0 {
            self.sweep_on_pops(stripe, pops / SWEEP_EVERY_POPS);
        }
        Acquired::reusing(index, slot, word)
    }

    /// Reusable slots first, in order of cost; fresh slots only when
    /// nothing reusable is ready.
    ///
    /// The home stripe comes first: its sealed batches no reader holds
    /// back. That touches no other stripe's cache line, so under churn
    /// every thread recycles its own slots without pulling the others'
    /// lines away from them. Only then the other stripes, quiet ones first
    /// (see the `stripe` module docs).
    #[cold]
    fn acquire_slow(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if let Some(found) = self.find_reusable(home) {
            return Some(found);
        }
        if let Some(found) = self.acquire_fresh(home, self.config.fresh_block) {
            return Some(found);
        }
        self.last_resort(home)
    }

    /// A reusable slot from anywhere, in order of cost (see `acquire_slow`);
    /// `None` if growing is the only way left.
    fn find_reusable(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if self.reclaim_into(home, home) {
            if let Some(found) = self.pop_from(home) {
                return Some(found);
            }
        }
        // A thread that removed nothing it is still waiting for takes a
        // quiet stripe's slots: they are nobody's next inserts. A thread
        // whose own removed slots are on their way keeps to them: taking
        // another stripe's interleaves two threads' slots in memory, and
        // every later operation on either pays for lines the other wrote,
        // for as long as the slots keep cycling (two churning threads ran at
        // 50 million pairs per second so, 75–80 without: BENCHES.md, "Slots
        // stay with their stripe"). A stripe looks quiet for a moment while
        // its thread flushes or reclaims, so quiet is not enough. Growing a
        // little costs less, until reclamation is behind.
        if let Some(found) = self.take_from_others(home, Take::QuietOnly) {
            return Some(found);
        }
        if !self.reclamation_is_behind() {
            return None;
        }
        // Growing now would be growth the live count does not explain, while
        // removed slots wait for a reader on a thread preempted while it
        // holds a guard, for a whole time slice, or sit in the
        // hands of a thread preempted while it reclaims them (nothing
        // sealed then, and nothing to see). Give the CPU away a few times,
        // so that thread can run, looking again each time. Meanwhile the
        // home stripe is not quiet: what it waits for is its own. (Even a
        // thread holding a guard itself gains by this: what was sealed
        // before its guard is not held back by it.)
        let _waiting = self.stripes[home].waiting();
        for _ in 0..BEHIND_ROUNDS {
            if let Some(found) = self.round_behind(home, Take::QuietOnly, yield_now) {
                return Some(found);
            }
            if !self.reclamation_is_behind() {
                return None;
            }
        }
        // Still behind: busy stripes' slots too, rather than grow.
        if let Some(found) = self.take_from_others(home, Take::Any) {
            return Some(found);
        }
        self.wait_at_bound(home)
    }

    /// One round of back-pressure (see `find_reusable`): looks for a
    /// reusable slot, calling `pause` in the middle to give the CPU away.
    fn round_behind(
        &self,
        home: StripeIndex,
        take: Take,
        pause: impl FnOnce(),
    ) -> Option<Acquired<'_, T>> {
        // Our own batches first, without giving the CPU away: they are
        // reusable unless a reader holds them back. A partial batch is
        // sealed, to wait for. Only a thread with nothing of its own on the
        // way takes another stripe's slots.
        if self.reclaimer.has_sealed(home) || self.seal_own(home) {
            if self.reclaim_into(home, home) {
                if let Some(found) = self.pop_from(home) {
                    return Some(found);
                }
            }
        } else if let Some(found) = self.take_from_others(home, take) {
            return Some(found);
        }
        // Notes on both sides of the pause: a stripe nobody inserted
        // through while this thread was off the CPU is quiet (its
        // threads are idle or preempted too), and taken from below,
        // without waiting for the next regular note.
        self.stripes.note_inserts();
        pause();
        self.stripes.note_inserts();
        if self.reclaim_into(home, home) {
            if let Some(found) = self.pop_from(home) {
                return Some(found);
            }
        }
        None
    }

    /// The last stand of back-pressure, when growing would take the pool
    /// past its bound (`4 × live + 1024`): sleeps, in naps of 50 µs
    /// doubling up to 1 ms, for at most `BOUND_PATIENCE`, looking for a
    /// reusable slot between naps (another stripe's too, once none of this
    /// one's is on the way). `None` once growing is within the bound, or
    /// the patience ran out.
    ///
    /// The yields before it cost nothing when the CPU has nothing else to
    /// run, so they do not outlast a pinned thread whose virtual CPU the
    /// host took away for a few milliseconds (with a real-time busy loop
    /// taking one core 8 ms in 20, two threads passed the bound in 14 runs
    /// of 100: BENCHES.md, "Sleeping at the bound"); a nap does. A calling
    /// thread that holds reclamation back itself does not wait (see
    /// `Reclaimer::held_back_here`; a `par_iter`'s worker counts, since its
    /// caller's guard lasts until the worker is done). Nor can a wait see
    /// another thread that holds a guard until this one finishes (a scoped
    /// thread spawned under a guard): the patience bounds that. A guard held longer than the
    /// patience is the `R × P` of the documented bound, not a stall to ride
    /// out: a wait that runs out lets the pool grow to twice its slots in
    /// use before anyone waits again: waits run out once per doubling (22
    /// from 1,024 slots to 2^32), or once per thread waiting then.
    #[cold]
    #[inline(never)]
    fn wait_at_bound(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if !self.growth_would_pass_bound() || self.reclaimer.held_back_here() {
            return None;
        }
        let mut patience = Patience::new(BOUND_PATIENCE);
        let mut napped = true;
        while napped {
            let pause = || napped = patience.nap();
            if let Some(found) = self.round_behind(home, Take::Any, pause) {
                return Some(found);
            }
            if !self.growth_would_pass_bound() {
                return None;
            }
        }
        // Relaxed: a threshold for a heuristic; any value seen is safe.
        self.bound_waived_below
            .fetch_max(2 * self.slots_used(), Ordering::Relaxed);
        None
    }

    /// Whether a fresh block would take the slots in use past the bound
    /// the pool promises, and no wait that ran out waived it for the
    /// pool's present size (see `wait_at_bound`).
    fn growth_would_pass_bound(&self) -> bool {
        let used = self.slots_used();
        used + self.config.fresh_block as u64 > self.promised_slots()
            // Relaxed: see `wait_at_bound`.
            && used >= self.bound_waived_below.load(Ordering::Relaxed)
    }

    /// Whether slots removed through `home` will come back to it: sealed
    /// batches in flight, or a partial batch, the calling thread's magazine's
    /// or the shared one (a hint, from Relaxed loads).
    fn own_on_the_way(&self, home: StripeIndex) -> bool {
        let (_, magazine) = self.stripes.home_and_magazine();
        self.reclaimer.has_sealed(home)
            || !RemovalBatch::is_empty_word(self.stripes[home].removals.word())
            || magazine.is_some_and(Magazine::has_removals)
    }

    /// Seals the partial removal batches on `home`, the calling thread's
    /// magazine's and the shared one, and defers them; returns whether
    /// there were any.
    fn seal_own(&self, home: StripeIndex) -> bool {
        let mut sealed = false;
        let (_, magazine) = self.stripes.home_and_magazine();
        if let Some(section) = magazine.and_then(Magazine::enter) {
            let batch = section.removals().take_owned();
            drop(section);
            if let Some(batch) = batch {
                self.reclaimer.seal(home, batch);
                sealed = true;
            }
        }
        self.seal_shared(home) || sealed
    }

    /// Seals `stripe`'s shared partial batch, if any, and defers it;
    /// returns whether there was one.
    fn seal_shared(&self, stripe: StripeIndex) -> bool {
        let Some(batch) = self.stripes[stripe].removals.take_all() else {
            return false;
        };
        self.reclaimer.seal(stripe, batch);
        true
    }

    /// Moves reusable slots of another stripe to `home` and pops one there:
    /// a run off its free list, else its ready batches.
    fn take_from_others(&self, home: StripeIndex, take: Take) -> Option<Acquired<'_, T>> {
        // Looked up at the first quiet stripe with something to take.
        let mut own_on_the_way = None;
        for other in self.stripes.others(home) {
            let has_free = !self.stripes[other].free.looks_empty();
            if !has_free && !self.reclaimer.has_sealed(other) {
                continue;
            }
            if take == Take::QuietOnly
                && (!self.stripes[other].is_quiet()
                    || *own_on_the_way.get_or_insert_with(|| self.own_on_the_way(home)))
            {
                continue;
            }
            let moved = has_free
                && self
                    .stripes
                    .move_run(&self.storage, other, home, self.config.batch);
            if moved || self.reclaim_into(other, home) {
                if let Some(found) = self.pop_from(home) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// The pool is full: before failing, take a free slot out of a
    /// magazine, make every removed slot reusable that can be, look at
    /// every stripe once more, and at the magazines once more (an owner's
    /// refill may have taken what the reclamation put on its stripe).
    #[cold]
    fn last_resort(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if let Some(found) = self.pop_from_magazines(home) {
            return Some(found);
        }
        self.seal_and_reclaim_all(home);
        self.stripes
            .all_from(home)
            .find_map(|stripe| self.pop_from(stripe))
            .or_else(|| self.pop_from_magazines(home))
    }

    /// A free slot popped out of some magazine, each revoked in turn (see
    /// `magazine`), waiting for its owner as `flush` does. The slot is
    /// popped while the magazine is held: put on the shared list for a pop
    /// after the hold, it went back into the magazine whenever its owner
    /// refilled first, which takes that list whole, and a full pool's
    /// insert failed with a slot free (loom:
    /// `a_full_pool_takes_a_slot_its_owner_would_refill`).
    fn pop_from_magazines(&self, home: StripeIndex) -> Option<Acquired<'_, T>> {
        if !self.stripes.have_magazines() {
            return None;
        }
        self.stripes.all_from(home).find_map(|stripe| {
            let magazine = &self.stripes[stripe].magazine;
            if !magazine.has_free() {
                return None;
            }
            let revoked = magazine.revoke(REVOKE_PATIENCE)?;
            let (index, slot, word, pops) = revoked.pop_free(&self.storage)?;
            // The rest go to the shared list if the owner did nothing since
            // the last look, a sweep's or a full pool's (this one notes the
            // counts too): left in an idle or exited owner's magazine, each
            // later insert revoked it again for one slot, a heavy fence
            // each (12 µs an insert against 0.5). A busy owner's stay: moved,
            // they would be in this thread's hands until pushed, where
            // neither the owner nor another full pool's insert finds them
            // (loom: `a_full_pool_takes_a_slot_its_owner_would_refill`).
            if magazine.idle_and_holding() {
                self.move_free_to_shared(stripe, &revoked);
            }
            // Let go before `popped`, whose sweep may revoke it again.
            drop(revoked);
            Some(self.popped(stripe, index, slot, word, pops))
        })
    }

    /// Reclaims `from`'s ready batches onto `into`'s free list; returns
    /// whether there were any.
    fn reclaim_into(&self, from: StripeIndex, into: StripeIndex) -> bool {
        let reclaimed =
            self.reclaimer
                .reclaim_ready(from, &self.storage, self.config.max_generation);
        if let Some(chain) = reclaimed.free {
            self.stripes[into].free.push(&self.storage, chain);
        }
        reclaimed.found
    }

    /// Whether growing now would be growth the live count does not explain:
    /// more than three quarters of the bound the pool promises
    /// ([`promised_slots`](Self::promised_slots)) are already in use, so
    /// that what readers hold back is found before the bound is reached.
    /// The quarter left covers the fresh blocks of threads that passed this
    /// test at once, and growth after the back-pressure rounds run out
    /// while a reader holds batches back briefly; growth past the
    /// bound itself waits (`wait_at_bound`), and only a guard held longer
    /// than that wait takes the pool past it (see `design.md`, "Memory
    /// under churn"). At half the bound, eight threads on two cores, each
    /// holding a magazine's open batch of up to 64 slots (the batch then),
    /// were behind almost always (BENCHES.md, "Back-pressure from three
    /// quarters of the bound").
    fn reclamation_is_behind(&self) -> bool {
        self.slots_used() > self.promised_slots() / 4 * 3
    }

    /// The slots in use the pool promises to stay within under churn with
    /// no guard held long: `4 × live + 1024` (see `design.md`, "Memory
    /// under churn").
    fn promised_slots(&self) -> u64 {
        4 * self.len() as u64 + 1024
    }

    #[inline(always)]
    fn pop_from(&self, stripe: StripeIndex) -> Option<Acquired<'_, T>> {
        let (index, slot, word, pops) = self.stripes[stripe].free.pop(&self.storage)?;
        Some(self.popped(stripe, index, slot, word, pops))
    }

    /// The sweep due once per `SWEEP_EVERY_POPS` pops of a stripe. It also
    /// notes every stripe's inserts, for [`Stripe::is_quiet`]: not on the
    /// sweeps due to seals, which come about four times as often under
    /// churn, because each note reads and writes every busy stripe's line
    /// (noting there too cost 2-thread churn a fifth of its rate).
    ///
    /// [`Stripe::is_quiet`]: crate::stripe::Stripe::is_quiet
    #[cold]
    #[inline(never)]
    fn sweep_on_pops(&self, stripe: StripeIndex, turn: u32) {
        self.stripes.note_inserts();
        self.sweep(stripe, turn);
    }

    /// Keeps reclamation going whatever the pool's traffic: visits one
    /// stripe (every stripe in turn, round-robin from `from`). If nobody
    /// removed from it since the last visit, seals its partial removal
    /// batch. Then, if the stripe is `from` itself or quiet, reclaims the
    /// batches no reader holds back onto its own free list (slots stay with
    /// their stripe: see `find_reusable`); a busy stripe's batches are left
    /// to its own threads, since walking them would pull their slots' lines
    /// away from the threads about to reuse them. Run once per `SWEEP_EVERY_POPS` inserts and `SWEEP_EVERY_SEALS` sealed
    /// batches on each stripe, so a removed value is dropped after a bounded
    /// number of later operations: its own stripe's sweeps reach it, and
    /// once that stripe is quiet (the thread that removed it never touches
    /// the pool again) any thread's sweep does.
    #[cold]
    #[inline(never)]
    fn sweep(&self, from: StripeIndex, turn: u32) {
        let target = self.stripes.sweep_target(from, turn);
        let stripe = &self.stripes[target];
        let word = stripe.removals.word();
        // An idle owner's magazine (or an exited one's) is emptied onto the
        // shared lists, its partial batch sealed.
        let emptied = self.stripes.have_magazines()
            && stripe.magazine.idle_and_holding()
            && self.revoke_magazine(target, 0, Magazines::Emptied);
        if (stripe.unchanged_since_last_sweep(word) || emptied)
            && !RemovalBatch::is_empty_word(word)
        {
            if let Some(batch) = stripe.removals.seal_if_still(word) {
                self.reclaimer.seal(target, batch);
            }
        }
        if target == from || stripe.is_quiet() {
            self.reclaim_into(target, target);
        }
    }

    /// Seals every stripe's partial batch, its magazine's too, and reclaims
    /// every batch no reader holds back (a guard or a one-call read that
    /// began before its seal) onto `home`'s free list. The magazines' free
    /// slots stay with their owners: moving them onto a shared list that is
    /// not empty means walking them, a step per slot, and a magazine's list
    /// can hold a whole stripe's free slots.
    fn seal_and_reclaim_all(&self, home: StripeIndex) {
        for stripe in self.stripes.all_from(home) {
            if self.stripes.have_magazines() && self.stripes[stripe].magazine.has_removals() {
                self.revoke_magazine(stripe, REVOKE_PATIENCE, Magazines::Sealed);
            }
            self.seal_shared(stripe);
        }
        for stripe in self.stripes.all_from(home) {
            self.reclaim_into(stripe, home);
        }
    }

    /// Takes `stripe`'s magazine from its owner (see `magazine`), waiting
    /// up to `patience` yields for it to leave a section (and for another
    /// revoker to let go of it), and seals its partial batch; with
    /// [`Magazines::Emptied`] its free slots go onto the stripe's shared
    /// list too. Returns whether it got the magazine.
    fn revoke_magazine(&self, stripe: StripeIndex, patience: u32, magazines: Magazines) -> bool {
        let Some(revoked) = self.stripes[stripe].magazine.revoke(patience) else {
            return false;
        };
        // Both go where others find them before the magazine is let go, so
        // a revoker that waited for this one finds them there.
        if let Magazines::Emptied = magazines {
            self.move_free_to_shared(stripe, &revoked);
        }
        if let Some(batch) = revoked.removals() {
            self.reclaimer.seal(stripe, batch);
        }
        drop(revoked);
        true
    }

    /// Moves the free slots of `stripe`'s magazine, which `revoked` holds,
    /// onto the stripe's shared list: unwalked onto an empty list, the usual
    /// case, since the magazine took that list whole.
    fn move_free_to_shared(&self, stripe: StripeIndex, revoked: &Revoked<'_>) {
        if let Some(first) = revoked.free() {
            self.stripes[stripe].free.push_to_nil(&self.storage, first);
        }
    }

    /// Drops every removed value no guard protects and makes its slot
    /// reusable: see [`HandlePool::flush`](crate::HandlePool::flush).
    pub(crate) fn flush(&self) {
        // Only the removals: a flush is for drops, and its cost must not
        // grow with the free slots the magazines hold.
        self.seal_and_reclaim_all(self.stripes.home());
    }

    /// Reserves up to `count` never-used slots with one atomic step, puts
    /// them on the home stripe's free list and pops one (every insert is a
    /// pop: that is what counts it). If other threads took them all first,
    /// they made progress, and we start over.
    fn acquire_fresh(&self, home: StripeIndex, count: u32) -> Option<Acquired<'_, T>> {
        let (start, end) = self.reserve_fresh(count)?;
        self.free_fresh(home, start, end);
        match self.pop_from(home) {
            Some(found) => Some(found),
            None => self.acquire_slow(home),
        }
    }

    /// Reserves a block of at most `count` consecutive never-used slots,
    /// allocated and owned by the caller: `start..end`, never empty.
    fn reserve_fresh(&self, count: u32) -> Option<(u32, u32)> {
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
    /// none) on `stripe`'s free list, linked in index order.
    fn free_fresh(&self, stripe: StripeIndex, start: u32, end: u32) {
        if start < end {
            for index in start..end - 1 {
                // Relaxed: the chain is published by the push's Release CAS.
                self.storage
                    .slot(index)
                    .word
                    .store(SlotWord::free(0, index + 1).to_bits(), Ordering::Relaxed);
            }
            let chain = Chain {
                first: start,
                last: end - 1,
            };
            self.stripes[stripe].free.push(&self.storage, chain);
        }
    }

    /// Claims up to `want` slots (at least one) for a batch insert, from
    /// the same sources as a single insert and in the same order: a run off
    /// the home stripe's free list (after reclaiming its ready batches),
    /// one slot from anywhere else reusable (`find_reusable`, which moves a
    /// run from another stripe to the home stripe, for the next claim), a
    /// block of consecutive fresh slots, and at the limit whatever
    /// `last_resort` finds. `None` when full.
    fn claim(&self, home: StripeIndex, want: u32) -> Option<Claimed<'_, T>> {
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
        let run = popped()
            .or_else(|| self.reclaim_into(home, home).then(popped).flatten())
            .or_else(|| {
                let single = self.find_reusable(home)?;
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

    /// Puts a slot the caller owns back on `stripe`'s free list, with
    /// `word` (`FREE`, or `EXHAUSTED`, which goes on no list): an exclusive
    /// removal or an insert given back, either way one value fewer than the
    /// pops count.
    fn give_back(&self, stripe: StripeIndex, index: u32, word: SlotWord) {
        self.stripes[stripe].adjust_len(-1);
        let slot = self.storage.slot(index);
        slot.word.store(word.to_bits(), Ordering::Relaxed);
        if word.state() == State::Free {
            let chain = Chain {
                first: index,
                last: index,
            };
            self.stripes[stripe].free.push(&self.storage, chain);
        }
    }

    // ---- Removing ------------------------------------------------------

    /// Removes the value `handle` refers to; `false` if it was not there.
    /// The value is dropped, and the slot reused, after the grace period.
    ///
    /// The inline part is the common case only: a live occupant in the flat
    /// region, removed by the owner of a magazine here. Every other case
    /// (a stale handle, a bucket, a retiring slot, no magazine or a revoked
    /// one) is one cold call that starts over. So the inline part keeps
    /// nothing live across a call, and is small enough for the compiler to
    /// inline where a call site is not one tight loop (BENCHES.md, "No
    /// call inside a call").
    #[inline]
    pub(crate) fn remove(&self, handle: Handle) -> bool {
        let mut entry = Entry::Try;
        if let Some(slot) = self.storage.flat_slot(handle.index()) {
            // A plain load first: a stale handle costs no write to the line.
            if slot.word.load(Ordering::Relaxed) == SlotWord::occupied(handle).to_bits()
                && !self.retires_on_removal(handle)
            {
                if let Some((home, magazine)) = self.stripes.own_magazine() {
                    match magazine.enter() {
                        Some(section) => return self.remove_into(section, home, slot, handle),
                        None => entry = Entry::Refused,
                    }
                }
            }
        }
        self.remove_slow(handle, entry)
    }

    /// [`remove`](Self::remove) in every case but the common one.
    #[cold]
    #[inline(never)]
    fn remove_slow(&self, handle: Handle, entry: Entry) -> bool {
        match self.storage.get(handle.index()) {
            Some(slot) => self.remove_at(slot, handle, entry),
            None => false,
        }
    }

    /// [`remove`](Self::remove) of the value in `slot`, the slot of
    /// `handle`'s index. With [`Entry::Refused`] the caller's section was
    /// just refused, and the removal goes to the shared batch without a
    /// second try: each try sets the owner's `active` flag, which a revoker
    /// waits to see clear, with bounded patience (a loom model,
    /// `flush_revokes_an_owners_partial_batch`, catches a flush giving up).
    #[inline(always)]
    fn remove_at(&self, slot: &Slot<T>, handle: Handle, entry: Entry) -> bool {
        // A plain load first: a stale handle costs no write to the line.
        if slot.word.load(Ordering::Relaxed) != SlotWord::occupied(handle).to_bits() {
            cold_path();
            return false;
        }
        if self.retires_on_removal(handle) {
            return self.remove_and_retire(slot, handle);
        }
        match self.stripes.own_magazine() {
            Some((home, magazine)) => {
                let section = match entry {
                    Entry::Try => magazine.enter(),
                    Entry::Refused => None,
                };
                self.remove_through(home, section, slot, handle)
            }
            None => self.remove_unowned(slot, handle),
        }
    }

    /// [`remove_at`](Self::remove_at) for a thread that owns no magazine
    /// here, or has no number yet (it takes one here, and may then own one).
    #[inline(never)]
    fn remove_unowned(&self, slot: &Slot<T>, handle: Handle) -> bool {
        let (home, magazine) = self.stripes.home_and_magazine();
        self.remove_through(home, magazine.and_then(Magazine::enter), slot, handle)
    }

    /// [`remove_at`](Self::remove_at) through the section of `home`'s
    /// magazine if the thread entered one, else through `home`'s shared
    /// removal batch.
    #[inline(always)]
    fn remove_through(
        &self,
        home: StripeIndex,
        section: Option<Section<'_>>,
        slot: &Slot<T>,
        handle: Handle,
    ) -> bool {
        match section {
            Some(section) => self.remove_into(section, home, slot, handle),
            None => self.remove_shared(home, slot, handle),
        }
    }

    /// [`remove_at`](Self::remove_at) through the magazine `section` holds,
    /// `home`'s.
    #[inline(always)]
    fn remove_into(
        &self,
        section: Section<'_>,
        home: StripeIndex,
        slot: &Slot<T>,
        handle: Handle,
    ) -> bool {
        let removals = section.removals();
        if !slot.try_remove(handle, removals.head_owned()) {
            return false;
        }
        if removals.push_owned(handle.index(), self.config.batch) {
            self.seal_owned(section, home);
        }
        true
    }

    /// Seals the full removal batch of the magazine `section` holds.
    #[cold]
    #[inline(never)]
    fn seal_owned(&self, section: Section<'_>, home: StripeIndex) {
        let removals = section.removals();
        let full = removals
            .take_owned()
            .expect("handle-pool bug: a full removal batch is empty");
        // Counted before the section ends: a revoker may take the batch then.
        let seals = removals.removals() / self.config.batch;
        drop(section);
        self.sealed(home, full, seals);
    }

    /// [`remove`](Self::remove) through `home`'s shared removal batch, for a
    /// thread without a magazine here or whose magazine a revoker holds.
    #[inline(never)]
    fn remove_shared(&self, home: StripeIndex, slot: &Slot<T>, handle: Handle) -> bool {
        let removals = &self.stripes[home].removals;
        let (link, current) = removals.head();
        if !slot.try_remove(handle, link) {
            return false;
        }
        let relink = |head| {
            slot.word.store(
                SlotWord::removed(handle.generation(), head).to_bits(),
                Ordering::Relaxed,
            )
        };
        if let Some(full) = removals.push(handle.index(), 1, current, self.config.batch, relink) {
            self.sealed(home, full, removals.removals() / self.config.batch);
        }
        true
    }

    /// Whether removing `handle` retires its slot at once: a value without
    /// drop glue at the generation limit (see `Slot::try_remove_and_retire`).
    #[inline(always)]
    fn retires_on_removal(&self, handle: Handle) -> bool {
        !core::mem::needs_drop::<T>() && handle.generation() >= self.config.max_generation
    }

    /// Removes a value that [`retires_on_removal`](Self::retires_on_removal);
    /// `false` if it was not there.
    #[cold]
    fn remove_and_retire(&self, slot: &Slot<T>, handle: Handle) -> bool {
        if !slot.try_remove_and_retire(handle) {
            return false;
        }
        // The insert was counted by its pop; no batch counts this removal.
        self.stripes[self.stripes.home()].adjust_len(-1);
        true
    }

    /// Hands a batch this thread just sealed to reclamation, and sweeps once
    /// per `SWEEP_EVERY_SEALS` batches.
    #[cold]
    #[inline(never)]
    fn sealed(&self, home: StripeIndex, batch: crate::lists::SealedBatch, seals: u32) {
        self.reclaimer.seal(home, batch);
        if seals % SWEEP_EVERY_SEALS == 0 {
            self.sweep(home, seals / SWEEP_EVERY_SEALS);
        }
    }

    /// Removes the values of `handles` (skipping stale and repeated ones)
    /// with one push onto the home stripe's batch; returns how many.
    pub(crate) fn remove_many(&self, handles: impl IntoIterator<Item = Handle>) -> usize {
        // Joins the stripe's batch when dropped, also if the iterator (user
        // code) panics part-way: no removed slot is left outside a batch.
        let mut chain = RemovedChain {
            pool: self,
            head: NIL,
            tail: None,
            count: 0,
        };
        let mut retired = 0;
        for handle in handles {
            let Some(slot) = self.storage.get(handle.index()) else {
                continue;
            };
            let generation = handle.generation();
            if slot.word.load(Ordering::Relaxed) != SlotWord::occupied(handle).to_bits() {
                continue;
            }
            if self.retires_on_removal(handle) {
                retired += usize::from(self.remove_and_retire(slot, handle));
                continue;
            }
            if slot.try_remove(handle, chain.head) {
                chain.head = handle.index();
                chain.tail.get_or_insert((slot, generation));
                chain.count += 1;
            }
        }
        chain.count as usize + retired
    }

    // ---- Exclusive access ----------------------------------------------

    /// Moves the value out of slot `index` and gives the slot back.
    ///
    /// # Safety
    /// Slot `index` is `OCCUPIED` and the caller has exclusive access.
    unsafe fn take_exclusive(&self, index: u32) -> T {
        let slot = self.storage.slot(index);
        let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
        // SAFETY: the caller guarantees OCCUPIED (initialised) and exclusivity.
        let value = unsafe { slot.take_value() };
        let vacant = SlotWord::vacated(word.generation(), NIL, self.config.max_generation);
        self.give_back(self.stripes.home(), index, vacant);
        value
    }

    pub(crate) fn take(&mut self, handle: Handle) -> Option<T> {
        self.occupied_slot(handle)?;
        // SAFETY: the slot was just seen OCCUPIED and `&mut self` keeps it so.
        Some(unsafe { self.take_exclusive(handle.index()) })
    }

    /// Keeps the values `keep` says to keep; a panic in `keep` (or in a
    /// value's `Drop`) leaves the pool consistent.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Handle, &mut T) -> bool) {
        for (handle, slot) in Occupied::new(&self.storage, self.slots_used(), Ordering::Relaxed) {
            // SAFETY: OCCUPIED means initialised; `&mut self` is exclusive.
            if !keep(handle, unsafe { slot.value_mut() }) {
                // SAFETY: the slot is OCCUPIED and we hold `&mut self`.
                drop(unsafe { self.take_exclusive(handle.index()) });
            }
        }
    }

    /// Drops, now, every value whose removal is still pending and makes its
    /// slot reusable at once; with `live`, the values still in the pool too
    /// (`clear` and the pool's drop), in the same pass. Every value is
    /// dropped, even if some `Drop` panics; returns the first such panic.
    pub(crate) fn reclaim_all(&mut self, live: bool) -> Option<Panic> {
        // Batches sealed before this point are discarded: their slots are
        // found by the scan below.
        self.reclaimer.begin_exclusive();
        for stripe in self.stripes.all_from(self.stripes.home()) {
            // Their slots are found by the scan below.
            let _ = self.stripes[stripe].removals.take_all();
            // SAFETY: `&mut self`: no section or revoker runs.
            let _ = unsafe { self.stripes[stripe].magazine.discard_removals() };
            if !core::mem::needs_drop::<T>() {
                // Batches reused unwalked left `REMOVED` words on the free
                // lists (see `reclaim::reclaim_batch`): made `FREE` here, so
                // that the scan below finds only removals still pending.
                self.stripes[stripe].free.mark_free_owned(&self.storage);
                // SAFETY: as above.
                unsafe { self.stripes[stripe].magazine.mark_free(&self.storage) };
            }
        }
        let max_generation = self.config.max_generation;
        let mut free = None;
        let mut first_panic = None;
        let mut cleared = 0isize;
        for (index, slot) in self.storage.slots(self.slots_used()) {
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            match word.state() {
                State::Removed => {}
                State::Occupied if live => cleared += 1,
                _ => continue,
            }
            // SAFETY: the value is initialised (REMOVED or OCCUPIED), and
            // `&mut self` proves no reference to it is left; a REMOVED slot's
            // batch, wherever it was (being filled, or sealed), was discarded
            // above and will not be reclaimed again.
            let (vacant, panic) =
                unsafe { slot.reclaim(word.generation(), Chain::link_to(free), max_generation) };
            if vacant.state() == State::Free {
                free = Some(Chain::prepend(free, index));
            }
            keep_first(&mut first_panic, panic);
        }
        let home = self.stripes.home();
        if let Some(chain) = free {
            self.stripes[home].free.push(&self.storage, chain);
        }
        // The live values went without a removal to count them.
        self.stripes[home].adjust_len(-cleared);
        first_panic
    }

    // ---- Iteration -----------------------------------------------------

    /// `(handle, &value)` for the values in the pool, protected by `_guard`
    /// (as in [`get`](Self::get)).
    pub(crate) fn entries<'g>(&'g self, _guard: &'g Guard) -> Entries<'g, T> {
        // Acquire pairs with the Release store that published each occupant.
        Entries(Occupied::new(
            &self.storage,
            self.slots_used(),
            Ordering::Acquire,
        ))
    }

    pub(crate) fn entries_mut(&mut self) -> EntriesMut<'_, T> {
        EntriesMut {
            left: Left(Some(self.len())),
            occupied: Occupied::new(&self.storage, self.slots_used(), Ordering::Relaxed),
        }
    }

    /// Takes every value out; the rest go when the iterator drops.
    pub(crate) fn drain(&mut self) -> Drained<'_, T> {
        Drained {
            left: Left(Some(self.len())),
            occupied: Occupied::new(&self.storage, self.slots_used(), Ordering::Relaxed),
            pool: self,
        }
    }

    /// The pool taken apart into its values.
    pub(crate) fn into_entries(self) -> IntoEntries<T> {
        IntoEntries {
            next: 0,
            end: self.slots_used(),
            left: Left(Some(self.len())),
            pool: self,
        }
    }
}

impl<T> Drop for RawPool<T> {
    fn drop(&mut self) {
        // The storage goes with the pool, so only the values need dropping,
        // pending and live alike, in one pass: no word is vacated and no
        // free list rebuilt, as `reclaim_all` does for a pool that lives on
        // (that took 4 ms for a million `u64`s, which need nothing at all:
        // BENCHES.md, "Clone and drop"). The sealed batches hold indices
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
struct Claimed<'a, T> {
    pool: &'a RawPool<T>,
    home: StripeIndex,
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

/// Slots `remove_many` has moved to `REMOVED`, linked `head` → … → tail;
/// dropping it pushes them onto the home stripe's batch in one go.
struct RemovedChain<'a, T> {
    pool: &'a RawPool<T>,
    head: u32,
    tail: Option<(&'a Slot<T>, u32)>,
    count: u32,
}

impl<T> Drop for RemovedChain<'_, T> {
    fn drop(&mut self) {
        let Some((tail, generation)) = self.tail else {
            return;
        };
        let pool = self.pool;
        let home = pool.stripes.home();
        let removals = &pool.stripes[home].removals;
        let relink = |head| {
            tail.word.store(
                SlotWord::removed(generation, head).to_bits(),
                Ordering::Relaxed,
            )
        };
        let (link, current) = removals.head();
        relink(link);
        if let Some(full) = removals.push(self.head, self.count, current, pool.config.batch, relink)
        {
            pool.sealed(home, full, removals.removals() / pool.config.batch);
        }
    }
}

/// The occupied slots among those handed out, in index order, each with
/// the raw handle of its occupant, read with one load of `order`.
struct Occupied<'a, T> {
    slots: Slots<'a, T>,
    order: Ordering,
}

impl<'a, T> Occupied<'a, T> {
    fn new(storage: &'a Storage<T>, end: u64, order: Ordering) -> Self {
        Occupied {
            slots: storage.slots(end),
            order,
        }
    }

    #[cfg(feature = "rayon")]
    /// Splits the slots left in two (see [`Slots::split_off`]): keeps the
    /// lower part, returns the upper one.
    fn split_off(&mut self) -> Option<Self> {
        Some(Occupied {
            slots: self.slots.split_off()?,
            order: self.order,
        })
    }

    /// An upper bound on the items left: the slot indices left to visit.
    fn bound(&self) -> usize {
        usize::try_from(self.slots.indices_left()).unwrap_or(usize::MAX)
    }
}

/// How many values an exclusive iterator has left: counted down from the
/// pool's length, exact while the pool is borrowed mutably or owned (no
/// operation in flight); unknown once the range is split.
#[derive(Clone, Copy)]
struct Left(Option<usize>);

impl Left {
    fn yielded(&mut self) {
        if let Some(left) = &mut self.0 {
            *left = left.saturating_sub(1);
        }
    }

    fn finished(&mut self) {
        debug_assert!(
            matches!(self.0, None | Some(0)),
            "handle-pool bug: the length disagrees with the occupied slots"
        );
        self.0 = Some(0);
    }

    fn size_hint(&self, bound: usize) -> (usize, Option<usize>) {
        match self.0 {
            Some(left) => (left, Some(left)),
            None => (0, Some(bound)),
        }
    }
}

impl<'a, T> Iterator for Occupied<'a, T> {
    type Item = (Handle, &'a Slot<T>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let order = self.order;
        self.slots.by_ref().find_map(|(index, slot)| {
            let word = SlotWord::from_bits(slot.word.load(order));
            (word.state() == State::Occupied).then(|| (Handle::new(index, word.generation()), slot))
        })
    }
}

/// `(handle, &value)`, from [`RawPool::entries`].
///
/// It holds no guard, only the storage and a range of slot indices: the
/// guard given to `entries` (a `Guard`, so announced) is borrowed for `'g`
/// by whoever made it. So it is `Send` exactly when `&T` is (`T: Sync`),
/// and a part split off may run on another thread: every visit there
/// happens after the announcement and its fence (the hand-off to that
/// thread synchronizes with the announcing thread), which is all the
/// argument in `reclaim.md` needs of a reader's loads (a `SeqCst` fence
/// that happens before a load orders it as one sequenced after it would),
/// so the value's reclamation waits for the guard, which outlives `'g`.
pub(crate) struct Entries<'g, T>(Occupied<'g, T>);

impl<T> Entries<'_, T> {
    #[cfg(feature = "rayon")]
    /// Splits the slots left in two: keeps the lower part, returns the upper.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        Some(Entries(self.0.split_off()?))
    }
}

impl<'g, T> Iterator for Entries<'g, T> {
    type Item = (Handle, &'g T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (handle, slot) = self.0.next()?;
        // SAFETY: the word was OCCUPIED (an Acquire load), so the value is
        // initialised; the guard given to `entries` and borrowed for 'g
        // announced before that load (on this thread, or on the thread that
        // handed this part over, which is all the argument of `reclaim.md`
        // needs), so the value outlives 'g even if removed.
        Some((handle, unsafe { slot.value_ref() }))
    }

    /// Concurrent inserts and removes make any lower bound but 0 a guess;
    /// the slots left to visit bound it above.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.0.bound()))
    }
}

/// `(handle, &mut value)`, from [`RawPool::entries_mut`].
pub(crate) struct EntriesMut<'a, T> {
    occupied: Occupied<'a, T>,
    left: Left,
}

impl<T> EntriesMut<'_, T> {
    #[cfg(feature = "rayon")]
    /// Splits the slots left in two: keeps the lower part, returns the upper.
    /// The parts visit disjoint slots, so their references never alias.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        let upper = self.occupied.split_off()?;
        self.left = Left(None);
        Some(EntriesMut {
            occupied: upper,
            left: Left(None),
        })
    }
}

impl<'a, T> Iterator for EntriesMut<'a, T> {
    type Item = (Handle, &'a mut T);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let Some((handle, slot)) = self.occupied.next() else {
            self.left.finished();
            return None;
        };
        self.left.yielded();
        // SAFETY: OCCUPIED means initialised; the iterator borrows the pool
        // mutably for 'a and visits each slot once (parts split off visit
        // disjoint ranges), so the references are unique.
        Some((handle, unsafe { slot.value_mut() }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.left.size_hint(self.occupied.bound())
    }
}

// SAFETY: an `EntriesMut` is a `&mut` borrow of the pool handing out `&mut T`,
// one per slot: sending it sends those `&mut T`, which needs `T: Send`, as
// for `std::slice::IterMut`. Its own state is a cursor and a shared borrow of
// the storage's bucket pointers, which it only loads.
unsafe impl<T: Send> Send for EntriesMut<'_, T> {}

// SAFETY: through `&EntriesMut` nothing can be reached (`next` needs `&mut`),
// but `Sync` follows `&mut T`'s rule, `T: Sync`, as for `std::slice::IterMut`.
unsafe impl<T: Sync> Sync for EntriesMut<'_, T> {}

/// `(handle, value)` taken out of the pool, from [`RawPool::drain`].
pub(crate) struct Drained<'a, T> {
    pool: &'a RawPool<T>,
    occupied: Occupied<'a, T>,
    left: Left,
}

impl<T> Drained<'_, T> {
    #[cfg(feature = "rayon")]
    /// Splits the slots left in two: keeps the lower part, returns the
    /// upper. Each part takes out (or, when dropped, drops) the values of
    /// its own range, so every value goes exactly once.
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        let upper = self.occupied.split_off()?;
        self.left = Left(None);
        Some(Drained {
            pool: self.pool,
            occupied: upper,
            left: Left(None),
        })
    }
}

impl<T> Iterator for Drained<'_, T> {
    type Item = (Handle, T);

    fn next(&mut self) -> Option<Self::Item> {
        let Some((handle, _)) = self.occupied.next() else {
            self.left.finished();
            return None;
        };
        self.left.yielded();
        // SAFETY: the slot is OCCUPIED, `drain` borrowed the pool mutably for
        // as long as this iterator (and every part split off it) lives, and
        // no other part visits this slot: the access is exclusive.
        let value = unsafe { self.pool.take_exclusive(handle.index()) };
        Some((handle, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.left.size_hint(self.occupied.bound())
    }
}

impl<T> Drop for Drained<'_, T> {
    /// Drops the values not taken, every one even if some `Drop` panics
    /// (as `clear` does), then re-raises the first such panic.
    fn drop(&mut self) {
        let mut first_panic = None;
        for (_, value) in self.by_ref() {
            keep_first(&mut first_panic, drop_catching(value));
        }
        if let Some(panic) = first_panic {
            std::panic::resume_unwind(panic);
        }
    }
}

// SAFETY: a `Drained` borrows the pool mutably and moves values out of it:
// sending it sends those values, which needs `T: Send` (as for
// `std::vec::Drain`); it never hands out a `&T`, so parts split off it may
// run on several threads at once without `T: Sync`. What else it touches,
// the slot words of its own range, the length shares and the stripes' free
// lists, are atomics the pool shares between threads anyway.
unsafe impl<T: Send> Send for Drained<'_, T> {}

// SAFETY: `&Drained` reaches nothing (`next` needs `&mut`); `Sync` follows
// `T: Sync`, as for `std::vec::Drain`.
unsafe impl<T: Sync> Sync for Drained<'_, T> {}

/// `(handle, value)`, owning the pool, from [`RawPool::into_entries`].
pub(crate) struct IntoEntries<T> {
    pool: RawPool<T>,
    next: u64,
    end: u64,
    left: Left,
}

impl<T> Iterator for IntoEntries<T> {
    type Item = (Handle, T);

    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            let index = self.next as u32;
            self.next += 1;
            let Some(slot) = self.pool.storage.get(index) else {
                continue;
            };
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            if word.state() == State::Occupied {
                self.left.yielded();
                // SAFETY: the slot is OCCUPIED and the iterator owns the pool.
                let value = unsafe { self.pool.take_exclusive(index) };
                return Some((Handle::new(index, word.generation()), value));
            }
        }
        self.left.finished();
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let bound = usize::try_from(self.end.saturating_sub(self.next)).unwrap_or(usize::MAX);
        self.left.size_hint(bound)
    }
}

mod snapshot;
#[cfg(feature = "serde")]
pub(crate) use snapshot::ReadEntries;
#[cfg(feature = "serde")]
pub(crate) use snapshot::SlotEntry;
