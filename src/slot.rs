#![doc = include_str!("../docs/slot.md")]

use core::mem::MaybeUninit;

use crate::sync::{AtomicU64, Ordering, UnsafeCell};

/// Ends a list threaded through slot links.
pub(crate) const NIL: u32 = u32::MAX;

const LINK_BITS: u32 = 32;
const STATE_BITS: u32 = 2;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;
const GENERATION_SHIFT: u32 = LINK_BITS + STATE_BITS;

// The generation field is exactly as wide as the largest generation a
// handle can carry.
const _: () = assert!(
    crate::handle::MAX_GENERATION as u64 == (1u64 << (64 - GENERATION_SHIFT)) - 1,
    "MAX_GENERATION must fill the slot word's generation field"
);

/// A panic caught from a value's `Drop`, to be re-raised or discarded.
pub(crate) type Panic = Box<dyn std::any::Any + Send + 'static>;

/// The slot state, as stored in bits 32..34 of the word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Free = 0,
    Occupied = 1,
    Removed = 2,
    Exhausted = 3,
}

/// A decoded copy of a slot word. All packing and unpacking happens here.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotWord(u64);

impl SlotWord {
    #[inline(always)]
    const fn pack(generation: u32, state: State, link: u32) -> Self {
        SlotWord(
            ((generation as u64) << GENERATION_SHIFT) | ((state as u64) << LINK_BITS) | link as u64,
        )
    }

    #[inline(always)]
    pub(crate) const fn free(generation: u32, link: u32) -> Self {
        Self::pack(generation, State::Free, link)
    }

    #[inline(always)]
    pub(crate) const fn occupied(generation: u32) -> Self {
        Self::pack(generation, State::Occupied, 0)
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
        (self.0 >> GENERATION_SHIFT) as u32
    }

    #[inline(always)]
    pub(crate) const fn link(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    pub(crate) fn state(self) -> State {
        match (self.0 >> LINK_BITS) & STATE_MASK {
            0 => State::Free,
            1 => State::Occupied,
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
    /// Initialised exactly while the word is `OCCUPIED` or `REMOVED`.
    pub(crate) value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    /// A fresh slot: `FREE(0, 0)`, all zero bits (see `storage::new_slots`).
    pub(crate) fn new() -> Self {
        Slot {
            word: AtomicU64::new(SlotWord::free(0, 0).to_bits()),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// `remove`'s CAS: `OCCUPIED(generation)` to `REMOVED(generation,
    /// link)`. The one thread that succeeds owns the value from then on.
    #[inline]
    pub(crate) fn try_remove(&self, generation: u32, link: u32) -> bool {
        // Acquire pairs with `publish`'s Release store: the winner sees the
        // initialised value it now owns and hands on to the reclamation.
        self.word
            .compare_exchange(
                SlotWord::occupied(generation).to_bits(),
                SlotWord::removed(generation, link).to_bits(),
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
    /// except through references whose guard keeps the slot from reuse.
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
            panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(value))).err();
        }
        let vacant = SlotWord::vacated(generation, link, max_generation);
        // Relaxed: whoever reuses the slot gets it through a free list's
        // Release push, or through `&mut`.
        self.word.store(vacant.to_bits(), Ordering::Relaxed);
        (vacant, panic)
    }
}
