#![doc = include_str!("../docs/slot.md")]

use core::mem::MaybeUninit;

use crate::handle::Handle;
use crate::sync::{AtomicU64, Ordering, UnsafeCell};

/// Ends a list threaded through slot links.
pub(crate) const NIL: u32 = u32::MAX;

const LINK_BITS: u32 = 32;
const GENERATION_SHIFT: u32 = LINK_BITS;
const STATE_SHIFT: u32 = 62;
const GENERATION_MASK: u64 = (1 << (STATE_SHIFT - GENERATION_SHIFT)) - 1;

// The generation field is exactly as wide as the largest generation a
// handle can carry, and sits where a handle keeps its generation: an
// `OCCUPIED` word is its handle's bits.
const _: () = assert!(
    crate::handle::MAX_GENERATION as u64 == GENERATION_MASK,
    "MAX_GENERATION must fill the slot word's generation field"
);

/// A panic caught from a value's `Drop`, to be re-raised or discarded.
pub(crate) type Panic = Box<dyn std::any::Any + Send + 'static>;

/// Drops `value`, catching a panic of its `Drop`: every value of a pass is
/// dropped whatever the others do.
pub(crate) fn drop_catching<V>(value: V) -> Option<Panic> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(value))).err()
}

/// How many payloads deep [`discard`] drops before it leaks one.
const DISCARD_DEPTH: usize = 4;

/// Drops a caught panic that will not be re-raised. Its payload is the
/// user's, and the payload's own `Drop` may panic in turn: that panic is
/// caught and its payload dropped the same way, [`DISCARD_DEPTH`] deep,
/// and the next leaked (a `Drop` could panic forever), so that no payload
/// unwinds out of the pool's bookkeeping (a reclamation's walk, an
/// exclusive pass) and leaves it half done.
pub(crate) fn discard(mut panic: Panic) {
    for _ in 0..DISCARD_DEPTH {
        match drop_catching(panic) {
            None => return,
            Some(again) => panic = again,
        }
    }
    core::mem::forget(panic);
}

/// Keeps the first of a pass's panics in `first`, to be re-raised when the
/// pass is done, and discards the others (see [`discard`]).
pub(crate) fn keep_first(first: &mut Option<Panic>, panic: Option<Panic>) {
    match (first.is_some(), panic) {
        (false, panic) => *first = panic,
        (true, Some(later)) => discard(later),
        (true, None) => {}
    }
}

/// The slot state, as stored in bits 62..64 of the word (see the state
/// table: `OCCUPIED` is `0` with a generation of at least 1; the all-zero
/// word is the fresh `FREE(0, 0)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Occupied = 0,
    Free = 1,
    Removed = 2,
    Exhausted = 3,
}

/// A decoded copy of a slot word. All packing and unpacking happens here.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotWord(u64);

impl SlotWord {
    /// The word of a slot no insert has used yet: all zero bits, decoded as
    /// `FREE(0, 0)` (no handle has generation 0, so it is never `OCCUPIED`).
    pub(crate) const FRESH: SlotWord = SlotWord(0);

    #[inline(always)]
    const fn pack(generation: u32, state: State, link: u32) -> Self {
        // Callers keep generations within `MAX_GENERATION`: a larger one
        // would be cut to 30 bits here, silently.
        debug_assert!(
            generation as u64 <= GENERATION_MASK,
            "generation out of range"
        );
        SlotWord(
            ((state as u64) << STATE_SHIFT)
                | ((generation as u64 & GENERATION_MASK) << GENERATION_SHIFT)
                | link as u64,
        )
    }

    #[inline(always)]
    pub(crate) const fn free(generation: u32, link: u32) -> Self {
        Self::pack(generation, State::Free, link)
    }

    /// The word of a slot holding the value `handle` refers to: the
    /// handle's own bits, so that a lookup compares one word with the
    /// handle as it is. Handles have state bits 0 and a generation of at
    /// least 1, which no vacant word has.
    #[inline(always)]
    pub(crate) const fn occupied(handle: Handle) -> Self {
        SlotWord(handle.to_bits())
    }

    #[inline(always)]
    pub(crate) const fn removed(generation: u32, link: u32) -> Self {
        Self::pack(generation, State::Removed, link)
    }

    #[inline(always)]
    pub(crate) const fn exhausted(generation: u32) -> Self {
        Self::pack(generation, State::Exhausted, 0)
    }

    /// The vacant word a slot takes once its value is gone: `FREE`, or
    /// `EXHAUSTED` when the generation has reached the pool's limit.
    #[inline(always)]
    pub(crate) const fn vacated(generation: u32, link: u32, max_generation: u32) -> Self {
        if generation >= max_generation {
            Self::exhausted(generation)
        } else {
            Self::free(generation, link)
        }
    }

    #[inline(always)]
    pub(crate) const fn from_bits(bits: u64) -> Self {
        SlotWord(bits)
    }

    #[inline(always)]
    pub(crate) const fn to_bits(self) -> u64 {
        self.0
    }

    #[inline(always)]
    pub(crate) const fn generation(self) -> u32 {
        ((self.0 >> GENERATION_SHIFT) & GENERATION_MASK) as u32
    }

    /// The next slot on the slot's list (`FREE` and `REMOVED`); an
    /// `OCCUPIED` word holds its own index here.
    #[inline(always)]
    pub(crate) const fn link(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    pub(crate) fn state(self) -> State {
        match self.0 >> STATE_SHIFT {
            0 if self.generation() == 0 => State::Free,
            0 => State::Occupied,
            1 => State::Free,
            2 => State::Removed,
            _ => State::Exhausted,
        }
    }

    /// The same word with another link (`FREE` and `REMOVED` only).
    #[inline(always)]
    pub(crate) const fn with_link(self, link: u32) -> Self {
        SlotWord((self.0 & !(u32::MAX as u64)) | link as u64)
    }
}

impl core::fmt::Debug for SlotWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:?}(g={}, link={})",
            self.state(),
            self.generation(),
            self.link()
        )
    }
}

/// One slot of the pool.
pub(crate) struct Slot<T> {
    /// The state word; see the module docs.
    pub(crate) word: AtomicU64,
    /// Initialised while the word is `OCCUPIED` or `REMOVED` (and, for a
    /// `T` without drop glue, left as it was whatever the word: nothing
    /// drops it, see `reclaim::reclaim_batch`).
    pub(crate) value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    /// A fresh slot: all zero bits (see `storage::new_slots`).
    pub(crate) fn new() -> Self {
        Slot {
            word: AtomicU64::new(SlotWord::FRESH.to_bits()),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// `remove`'s CAS: `OCCUPIED(handle)` to `REMOVED(generation, link)`.
    /// The one thread that succeeds owns the value from then on.
    #[inline]
    pub(crate) fn try_remove(&self, handle: Handle, link: u32) -> bool {
        self.vacate_occupied(handle, SlotWord::removed(handle.generation(), link))
    }

    /// `remove`'s CAS for a value without drop glue at the generation
    /// limit: `OCCUPIED(handle)` to `EXHAUSTED`, at once. The slot is never
    /// reused, so nothing can overwrite the value under a reader still
    /// holding a reference, and there is nothing to drop: no grace period is
    /// needed, and the slot joins no batch. It cannot wait for reclamation
    /// to retire it: batches of such values are reused without a walk (see
    /// `reclaim::reclaim_batch`).
    #[inline]
    pub(crate) fn try_remove_and_retire(&self, handle: Handle) -> bool {
        self.vacate_occupied(handle, SlotWord::exhausted(handle.generation()))
    }

    #[inline(always)]
    fn vacate_occupied(&self, handle: Handle, vacant: SlotWord) -> bool {
        // Acquire pairs with `publish`'s Release store: the winner sees the
        // initialised value it now owns and hands on to the reclamation.
        self.word
            .compare_exchange(
                SlotWord::occupied(handle).to_bits(),
                vacant.to_bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Writes a value into a slot its caller owns.
    ///
    /// # Safety
    /// The caller owns the slot (it popped it off a free list and has not
    /// published it), so no other thread reads or writes the value cell, and
    /// the cell holds no value that needs dropping.
    #[inline]
    pub(crate) unsafe fn write_value(&self, value: T) {
        // SAFETY: the caller guarantees exclusive access to the cell.
        self.value.with_mut(|cell| unsafe { (*cell).write(value) });
    }

    /// Moves the value out of a slot whose value this thread has claimed.
    ///
    /// # Safety
    /// The value is initialised and the caller won the CAS (or holds `&mut`
    /// on the pool) that gave it the value; no one reads it afterwards
    /// except through references whose guard (or one-call read) keeps the
    /// slot from reuse.
    #[inline]
    pub(crate) unsafe fn take_value(&self) -> T {
        // SAFETY: the caller guarantees the value is initialised and is theirs.
        self.value
            .with(|cell| unsafe { (*cell).assume_init_read() })
    }

    /// A shared reference to the value.
    ///
    /// # Safety
    /// The value is initialised and stays so, unmoved, for `'a`.
    #[inline]
    pub(crate) unsafe fn value_ref<'a>(&self) -> &'a T {
        // SAFETY: the caller guarantees the value is initialised and outlives 'a.
        self.value.with(|cell| unsafe { (*cell).assume_init_ref() })
    }

    /// A unique reference to the value.
    ///
    /// # Safety
    /// The value is initialised and the caller has exclusive access to the
    /// pool for `'a`.
    #[inline]
    pub(crate) unsafe fn value_mut<'a>(&self) -> &'a mut T {
        // SAFETY: the caller guarantees initialisation and exclusivity.
        self.value
            .with_mut(|cell| unsafe { (*cell).assume_init_mut() })
    }
    /// Drops the value of a `REMOVED` slot (or an `OCCUPIED` one, under
    /// exclusive access) and stores its vacant word: `FREE(generation,
    /// link)`, or `EXHAUSTED` at `max_generation`. Returns that word, and
    /// the panic of the value's `Drop` if it had one (the slot is vacated
    /// either way).
    ///
    /// # Safety
    /// The slot holds a value under `generation` and the caller owns it:
    /// the slot is `REMOVED` and its grace period is over (no reference to
    /// the value is left), or the caller has exclusive access to the pool.
    pub(crate) unsafe fn reclaim(
        &self,
        generation: u32,
        link: u32,
        max_generation: u32,
    ) -> (SlotWord, Option<Panic>) {
        let mut panic = None;
        if core::mem::needs_drop::<T>() {
            // SAFETY: the caller guarantees the value is initialised, not
            // yet dropped, and theirs.
            let value = unsafe { self.take_value() };
            panic = drop_catching(value);
        }
        let vacant = SlotWord::vacated(generation, link, max_generation);
        // Relaxed: whoever reuses the slot gets it through a free list's
        // Release push, or through `&mut`.
        self.word.store(vacant.to_bits(), Ordering::Relaxed);
        (vacant, panic)
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/slot.rs"]
mod tests;
