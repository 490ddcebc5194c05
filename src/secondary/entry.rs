#![doc = include_str!("../../docs/secondary.md")]

use crate::handle::{Handle, MAX_GENERATION};

/// Where the generation sits in an entry word: where a handle keeps it.
const GENERATION_SHIFT: u32 = 32;

/// A decoded copy of an entry word: `VACANT`, or `OCCUPIED(g, j)` (see the
/// state table in the module docs). All packing and unpacking happens here.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryWord(u64);

impl EntryWord {
    /// No value: all zero bits, as every entry of a fresh leaf.
    pub(crate) const VACANT: EntryWord = EntryWord(0);

    /// The word of an entry whose value, for generation `generation`, is
    /// in the value pool's slot `value_slot`.
    #[inline(always)]
    pub(crate) const fn occupied(generation: u32, value_slot: u32) -> Self {
        debug_assert!(generation >= 1 && generation <= MAX_GENERATION);
        EntryWord(((generation as u64) << GENERATION_SHIFT) | value_slot as u64)
    }

    #[inline(always)]
    pub(crate) const fn from_bits(bits: u64) -> Self {
        EntryWord(bits)
    }

    #[inline(always)]
    pub(crate) const fn to_bits(self) -> u64 {
        self.0
    }

    /// The generation whose value the entry holds; 0 when `VACANT`.
    #[inline(always)]
    pub(crate) const fn generation(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32
    }

    /// The value pool's slot holding the value (`OCCUPIED` only).
    #[inline(always)]
    pub(crate) const fn value_slot(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    pub(crate) const fn is_vacant(self) -> bool {
        self.0 == Self::VACANT.0
    }

    /// Whether `handle` resolves here: the entry holds its generation. A
    /// handle's generation is at least 1, so `VACANT` holds none.
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
        if self.is_vacant() {
            f.write_str("VACANT")
        } else {
            write!(
                f,
                "OCCUPIED(g={}, j={})",
                self.generation(),
                self.value_slot()
            )
        }
    }
}
