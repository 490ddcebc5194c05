#![doc = include_str!("../../docs/secondary.md")]

use core::mem::MaybeUninit;

use crate::handle::{Handle, MAX_GENERATION};
use crate::slot::Slot;
use crate::sync::{AtomicU32, AtomicU64, UnsafeCell};

/// Where the generation sits in an entry word: where a handle keeps it.
const GENERATION_SHIFT: u32 = 32;
/// The kind bits of a `POOLED` word, in the upper half (bit 62 of the word).
const POOLED: u32 = 1 << 30;

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
    /// No value: all zero bits, as every entry of a fresh leaf.
    pub(crate) const VACANT: EntryWord = EntryWord(0);

    /// The word of an entry whose value, for generation `generation`, is
    /// at `place`.
    #[inline(always)]
    pub(crate) const fn occupied(generation: u32, place: Place) -> Self {
        debug_assert!(generation >= 1 && generation <= MAX_GENERATION);
        match place {
            Place::Inline => EntryWord((generation as u64) << GENERATION_SHIFT),
            Place::Pooled(slot) => {
                EntryWord((((POOLED | generation) as u64) << GENERATION_SHIFT) | slot as u64)
            }
        }
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

    #[inline(always)]
    pub(crate) const fn is_vacant(self) -> bool {
        self.0 == Self::VACANT.0
    }

    /// Where the value is (`INLINE` or `POOLED` only).
    #[inline(always)]
    pub(crate) const fn place(self) -> Place {
        if self.upper() & POOLED == 0 {
            Place::Inline
        } else {
            Place::Pooled(self.0 as u32)
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
            Some(Place::Pooled(self.0 as u32))
        } else {
            None
        }
    }

    /// Whether `handle` resolves here.
    #[inline(always)]
    pub(crate) const fn holds(self, handle: Handle) -> bool {
        !self.is_vacant() && self.generation() == handle.generation()
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
        if self.is_vacant() {
            return f.write_str("VACANT");
        }
        match self.place() {
            Place::Inline => write!(f, "INLINE(g={})", self.generation()),
            Place::Pooled(slot) => write!(f, "POOLED(g={}, j={slot})", self.generation()),
        }
    }
}

/// The cell of a room nobody owns.
pub(crate) const FREE: u32 = 0;
/// The cell of a room an insert, the entry or a retired cell owns.
pub(crate) const OWNED: u32 = 1;

/// An entry's cell and room: the value part of its slot.
///
/// All zero bits are a valid room, `FREE` and empty: the table's storage
/// comes from the allocator zeroed (or from fresh pages).
pub(crate) struct Room<V> {
    /// `FREE` or `OWNED`: who owns the room (see the module docs).
    cell: AtomicU32,
    /// Initialised while the cell is `OWNED` by the entry (word `INLINE`)
    /// or by a retired cell, and while the insert that owns it holds a
    /// value there.
    value: UnsafeCell<MaybeUninit<V>>,
}

// SAFETY: what `&Room` reaches safely is the cell, an atomic. The value is
// reached only through `Entry`'s `unsafe` methods, whose callers (the map)
// share `&V` between threads (which `V: Sync` allows) and move values in and
// out on any thread, which the map allows only when it is `Sync` itself,
// that is when `V: Send + Sync`.
unsafe impl<V: Sync> Sync for Room<V> {}

// SAFETY: a room owns the value in it (if any): sending it sends that value.
unsafe impl<V: Send> Send for Room<V> {}

impl<V> Room<V> {
    /// A free, empty room (loom's atomics must be constructed; outside
    /// loom, rooms are zeroed instead).
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn new() -> Self {
        Room {
            cell: AtomicU32::new(FREE),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

/// One entry of the table: a slot of the crate's storage whose word is the
/// entry word and whose value is the entry's [`Room`] (the pool's slot
/// layout, so that the table's dense part is a `Storage<Room<V>>`).
#[repr(transparent)]
pub(crate) struct Entry<V>(Slot<Room<V>>);

// SAFETY: an entry is its slot: a word, an atomic, and a room, shared
// under `Room`'s rules (the slot's own cell is only read through, to reach
// the room).
unsafe impl<V: Sync> Sync for Entry<V> {}

// SAFETY: an entry owns the value in its room (if any): sending it sends
// that value.
unsafe impl<V: Send> Send for Entry<V> {}

impl<V> Entry<V> {
    /// The entry that is `slot`.
    ///
    /// # Safety
    /// The slot's value cell holds an initialised `Room` (all zero bits, as
    /// the storage's fresh slots, or one written at construction), for as
    /// long as the slot lives.
    #[inline(always)]
    pub(crate) unsafe fn from_slot(slot: &Slot<Room<V>>) -> &Entry<V> {
        // SAFETY: `Entry<V>` is a `repr(transparent)` `Slot<Room<V>>`; the
        // reference keeps the slot's lifetime.
        unsafe { &*(slot as *const Slot<Room<V>>).cast::<Entry<V>>() }
    }

    /// The entry word.
    #[inline(always)]
    pub(crate) fn word(&self) -> &AtomicU64 {
        &self.0.word
    }

    /// The room.
    #[inline(always)]
    fn room(&self) -> &Room<V> {
        // SAFETY: the slot's value cell holds an initialised room for the
        // slot's whole life (see `from_slot` and the table's construction);
        // it is only ever read through this shared reference (the room's
        // own atomics and cell do the rest).
        self.0.value.with(|room| unsafe { &*(*room).as_ptr() })
    }

    /// The room's cell.
    #[inline(always)]
    pub(crate) fn cell(&self) -> &AtomicU32 {
        &self.room().cell
    }

    /// Writes `value` into the room.
    ///
    /// # Safety
    /// The caller owns the room (it claimed the cell, or holds `&mut` of
    /// the map with the cell `FREE`), and the room holds no value.
    #[inline]
    pub(crate) unsafe fn write(&self, value: V) {
        // SAFETY: the caller owns the room: no other thread reads or writes
        // it until the caller publishes or frees it.
        self.room()
            .value
            .with_mut(|room| unsafe { (*room).write(value) });
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
        self.room()
            .value
            .with(|room| unsafe { (*room).assume_init_read() })
    }

    /// A shared reference to the value in the room.
    ///
    /// # Safety
    /// The room holds a value that stays there, unmoved and not dropped,
    /// for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn value_ref<'a>(&self) -> &'a V {
        // SAFETY: as the caller guarantees.
        self.room()
            .value
            .with(|room| unsafe { (*room).assume_init_ref() })
    }

    /// A unique reference to the value in the room.
    ///
    /// # Safety
    /// The room holds a value and the caller has exclusive access to the
    /// map for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn value_mut<'a>(&self) -> &'a mut V {
        // SAFETY: as the caller guarantees.
        self.room()
            .value
            .with_mut(|room| unsafe { (*room).assume_init_mut() })
    }
}
