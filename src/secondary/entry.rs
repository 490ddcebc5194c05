#![doc = include_str!("../../docs/secondary.md")]

use crate::handle::{Handle, MAX_GENERATION};
use crate::slot::Slot;
use crate::sync::{AtomicU64, Ordering};

/// Where the generation sits in an entry word: where a handle keeps it.
const GENERATION_SHIFT: u32 = 32;
/// The kind bits of a `POOLED` word, in the upper half (bit 62 of the word).
const POOLED: u32 = 1 << 30;
/// The bit of a `VACANT` or `POOLED` word that says the entry's room is held
/// (by an insert writing there, or by a retired cell); an `INLINE` word's
/// room is held by the entry.
const HELD: u64 = 1 << 31;
/// The value pool slot of a `POOLED` word: the low half but `HELD`.
const SLOT_MASK: u64 = HELD - 1;

/// The most slots the value pool may hand out: a `POOLED` word holds a
/// slot index in 31 bits.
pub(crate) const VALUE_SLOTS: u32 = 1 << 31;

// A generation fits below the kind bits.
const _: () = assert!(MAX_GENERATION < POOLED);

/// A decoded copy of an entry word: `VACANT`, `INLINE(g)` or `POOLED(g, j)`
/// (see the state table in the module docs). All packing and unpacking
/// happens here.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryWord(u64);

/// Where the value of an entry word is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In the entry's room.
    Inline,
    /// In the value pool's slot `j`.
    Pooled(u32),
}

impl EntryWord {
    /// No value, the room free: all zero bits, as every entry of a fresh
    /// leaf.
    pub(crate) const VACANT: EntryWord = EntryWord(0);

    /// The word of an entry whose value, for generation `generation`, is
    /// at `place`; `held` says whether the room is held, for a `POOLED`
    /// word (an `INLINE` word's room is held by the entry).
    #[inline(always)]
    pub(crate) const fn occupied(generation: u32, place: Place, held: bool) -> Self {
        debug_assert!(generation >= 1 && generation <= MAX_GENERATION);
        match place {
            Place::Inline => EntryWord((generation as u64) << GENERATION_SHIFT),
            Place::Pooled(slot) => {
                debug_assert!((slot as u64) < HELD);
                let held = if held { HELD } else { 0 };
                EntryWord((((POOLED | generation) as u64) << GENERATION_SHIFT) | held | slot as u64)
            }
        }
    }

    /// A `VACANT` word, its room held or not.
    #[inline(always)]
    pub(crate) const fn vacant(held: bool) -> Self {
        EntryWord(if held { HELD } else { 0 })
    }

    #[inline(always)]
    pub(crate) const fn from_bits(bits: u64) -> Self {
        EntryWord(bits)
    }

    #[inline(always)]
    pub(crate) const fn to_bits(self) -> u64 {
        self.0
    }

    /// The upper half: the generation, and for `POOLED` its kind bit.
    #[inline(always)]
    const fn upper(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32
    }

    /// The generation whose value the entry holds; 0 when `VACANT`.
    #[inline(always)]
    pub(crate) const fn generation(self) -> u32 {
        self.upper() & !POOLED
    }

    /// Whether the entry holds no value (its room may be held).
    #[inline(always)]
    pub(crate) const fn is_vacant(self) -> bool {
        self.generation() == 0
    }

    /// Whether the entry's room is held: by the entry (`INLINE`), or, as
    /// the `HELD` bit says, by an insert or a retired cell.
    #[inline(always)]
    pub(crate) const fn room_held(self) -> bool {
        matches!(self.place(), Some(Place::Inline)) || self.0 & HELD != 0
    }

    /// The same word with its room held (`VACANT` or `POOLED` only).
    #[inline(always)]
    pub(crate) const fn holding_the_room(self) -> Self {
        EntryWord(self.0 | HELD)
    }

    /// The same word with its room free (`VACANT` or `POOLED` only).
    #[inline(always)]
    pub(crate) const fn freeing_the_room(self) -> Self {
        EntryWord(self.0 & !HELD)
    }

    /// Where the value is (`None` when `VACANT`).
    #[inline(always)]
    pub(crate) const fn place(self) -> Option<Place> {
        if self.generation() == 0 {
            None
        } else if self.upper() & POOLED == 0 {
            Some(Place::Inline)
        } else {
            Some(Place::Pooled((self.0 & SLOT_MASK) as u32))
        }
    }

    /// Where the value for `handle` is, if the entry holds exactly its
    /// generation. The common case, `INLINE`, is the first comparison: the
    /// upper half equals the handle's generation. A handle's generation is
    /// at least 1, so `VACANT` holds none.
    #[inline(always)]
    pub(crate) fn find(self, handle: Handle) -> Option<Place> {
        let generation = handle.generation();
        if self.upper() == generation {
            Some(Place::Inline)
        } else if self.upper() == POOLED | generation {
            Some(Place::Pooled((self.0 & SLOT_MASK) as u32))
        } else {
            None
        }
    }

    /// Whether the entry holds `handle`'s value in its room: the common
    /// lookup, one comparison of the upper half.
    #[inline(always)]
    pub(crate) const fn is_inline_for(self, handle: Handle) -> bool {
        self.upper() == handle.generation()
    }

    /// Whether `handle` resolves here.
    #[inline(always)]
    pub(crate) const fn holds(self, handle: Handle) -> bool {
        self.generation() == handle.generation()
    }

    /// Whether an insert for `handle` is refused: the entry holds a newer
    /// generation than the handle's.
    #[inline(always)]
    pub(crate) const fn refuses(self, handle: Handle) -> bool {
        self.generation() > handle.generation()
    }
}

impl core::fmt::Debug for EntryWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let held = if self.0 & HELD != 0 { ", held" } else { "" };
        match self.place() {
            None => write!(f, "VACANT{held}"),
            Some(Place::Inline) => write!(f, "INLINE(g={})", self.generation()),
            Some(Place::Pooled(slot)) => {
                write!(f, "POOLED(g={}, j={slot}{held})", self.generation())
            }
        }
    }
}

/// One entry of the table: a slot of the crate's storage, whose word is
/// the entry word and whose value cell is the entry's room (so that the
/// table's dense part is a `Storage<V>`).
///
/// All zero bits are a valid entry, `VACANT` with its room free: the
/// table's storage comes from the allocator zeroed (or from fresh pages).
#[repr(transparent)]
pub(crate) struct Entry<V>(Slot<V>);

// SAFETY: what `&Entry` reaches safely is the word, an atomic. The room is
// reached only through the `unsafe` methods below, whose callers (the map)
// share `&V` between threads (which `V: Sync` allows) and move values in
// and out on any thread, which the map allows only when it is `Sync`
// itself, that is when `V: Send + Sync`.
unsafe impl<V: Sync> Sync for Entry<V> {}

// SAFETY: an entry owns the value in its room (if any): sending it sends
// that value.
unsafe impl<V: Send> Send for Entry<V> {}

impl<V> Entry<V> {
    /// The entry that is `slot`, a slot of the table's.
    #[inline(always)]
    pub(crate) fn from_slot(slot: &Slot<V>) -> &Entry<V> {
        // SAFETY: `Entry<V>` is a `repr(transparent)` `Slot<V>`; the
        // reference keeps the slot's lifetime.
        unsafe { &*(slot as *const Slot<V>).cast::<Entry<V>>() }
    }

    /// The entry word.
    #[inline(always)]
    pub(crate) fn word(&self) -> &AtomicU64 {
        &self.0.word
    }

    /// Writes `value` into the room.
    ///
    /// # Safety
    /// The caller holds the room (it set `HELD`, or holds `&mut` of the
    /// map with the room free), and the room holds no value.
    #[inline]
    pub(crate) unsafe fn write(&self, value: V) {
        // SAFETY: as the caller guarantees: no other thread reads or writes
        // the room until the caller publishes or frees it.
        unsafe { self.0.write_value(value) };
    }

    /// Moves the value out of the room.
    ///
    /// # Safety
    /// The room holds a value and the caller owns it: it wrote it and
    /// never published it, or holds `&mut` of the map with the word naming
    /// the room, or is the room's retired cell being dropped. Nobody reads
    /// the value afterwards.
    #[inline]
    pub(crate) unsafe fn take(&self) -> V {
        // SAFETY: as the caller guarantees.
        unsafe { self.0.take_value() }
    }

    /// A shared reference to the value in the room.
    ///
    /// # Safety
    /// The room holds a value that stays there, unmoved and not dropped,
    /// for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn value_ref<'a>(&self) -> &'a V {
        // SAFETY: as the caller guarantees.
        unsafe { self.0.value_ref() }
    }

    /// A unique reference to the value in the room.
    ///
    /// # Safety
    /// The room holds a value and the caller has exclusive access to the
    /// map for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn value_mut<'a>(&self) -> &'a mut V {
        // SAFETY: as the caller guarantees.
        unsafe { self.0.value_mut() }
    }
}

/// Frees the room of `entry`, whose value the caller (a retired cell being
/// dropped, or a refused insert) has just moved out: clears `HELD` on
/// whatever the word is now (`VACANT` or `POOLED`: while the room is held
/// by anyone but the entry, no word is `INLINE`). Retried only when
/// another operation's CAS on the word won meanwhile.
pub(crate) fn free_room<V>(entry: &Entry<V>) {
    // Relaxed: the CAS below decides.
    let mut current = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
    loop {
        debug_assert!(
            current.0 & HELD != 0 && !matches!(current.place(), Some(Place::Inline)),
            "freeing a room this thread does not hold: {current:?}"
        );
        // Release pairs with the Acquire CAS of the insert that holds the
        // room next: the value was moved out before it writes.
        match entry.word().compare_exchange(
            current.to_bits(),
            current.freeing_the_room().to_bits(),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(actual) => current = EntryWord::from_bits(actual),
        }
    }
}
