//! The index (sparse table) words, and each stripe's words for the round:
//! its removal batch and its count of holes with its list of freed indices
//! (see "The sparse word" and "A round" in the module docs).

use crate::handle::{Handle, MAX_GENERATION};
use crate::lists::RemovalBatch;
use crate::slot::{Slot, SlotWord, State, NIL};
use crate::storage::Storage;
use crate::sync::{AtomicU64, Ordering};

/// The sparse word of a value of generation `generation` at `position`:
/// `OCCUPIED(generation, position)`, which is the bits of a handle with the
/// position where its index would be (state 0, the generation, the low
/// bits), so it decodes as an `OCCUPIED` slot word whose link is the
/// position.
#[inline(always)]
pub(super) fn occupied_at(generation: u32, position: u32) -> SlotWord {
    SlotWord::occupied(Handle::new(position, generation))
}

/// The position the sparse word `word` gives for `handle`: `Some` iff it
/// is `OCCUPIED` with the handle's generation. Its upper half is then the
/// handle's (state 0, the same generation): no vacant word has an upper
/// half with state 0 and a generation of at least 1, which every handle
/// has.
#[inline(always)]
pub(super) fn position_for(word: u64, handle: Handle) -> Option<u32> {
    ((word ^ handle.to_bits()) >> 32 == 0).then_some(word as u32)
}

/// Whether a dense word holds a value in the pool (`OCCUPIED`): state 0
/// and a generation of at least 1, that is an upper half in
/// `1..=MAX_GENERATION`, tested with one comparison (the state bits sit
/// above the generation, so any other state is past the range).
#[inline(always)]
pub(super) fn holds_value(word: u64) -> bool {
    let holds = (word >> 32).wrapping_sub(1) < u64::from(MAX_GENERATION);
    debug_assert_eq!(holds, SlotWord::from_bits(word).state() == State::Occupied);
    holds
}

/// [`holds_value`] for a dense word of a clean part of an iteration (see
/// `walk_parts` in `iter`), which is `OCCUPIED` or `REMOVED` and nothing
/// else: the sign bit is `REMOVED`'s first state bit, and an `OCCUPIED`
/// word is positive (its generation is at least 1). One test.
#[inline(always)]
pub(super) fn holds_value_while_clean(word: u64) -> bool {
    let holds = (word as i64) > 0;
    debug_assert!(matches!(
        SlotWord::from_bits(word).state(),
        State::Occupied | State::Removed
    ));
    debug_assert_eq!(holds, holds_value(word));
    holds
}

/// Whether every word of a block holds a value: [`holds_value`] of each,
/// as one maximum. A word holds a value iff its state bits are 0 and its
/// generation at least 1, that is iff `2^32 <= word < 2^62`, iff `word -
/// 2^32` (wrapping) is below `2^62 - 2^32`: so the block's words all do iff
/// the largest `word - 2^32` is. A load, a subtraction and a maximum per
/// word, where a test per word took a shift, a subtraction, a comparison
/// and an `and`.
#[inline(always)]
pub(super) fn all_hold_values(words: impl Iterator<Item = u64>) -> bool {
    const FIRST: u64 = 1 << 32;
    const PAST: u64 = (1 << 62) - FIRST;
    // Generations fill bits 32..62 exactly (see `slot`'s assertion).
    const _: () = assert!(MAX_GENERATION as u64 == (1 << 30) - 1);
    words
        .map(|word| word.wrapping_sub(FIRST))
        .max()
        .unwrap_or(0)
        < PAST
}

/// The handle an `OCCUPIED` dense word holds: its bits (state 0, the
/// generation, the index), taken apart and put together again, which the
/// compiler folds to nothing.
#[inline(always)]
pub(super) fn handle_in(word: u64) -> Handle {
    debug_assert_eq!(
        SlotWord::from_bits(word).state(),
        State::Occupied,
        "a dense word without a value"
    );
    Handle::new(word as u32, (word >> 32) as u32)
}

#[inline(always)]
const fn pack(holes: u32, first: u32) -> u64 {
    ((holes as u64) << 32) | first as u64
}

/// One stripe's words for the round, on a cache line of their own.
pub(super) struct Lane {
    /// Positions removed through this stripe whose values (with drop glue)
    /// wait for their grace period, linked through the dense words.
    pub(super) removals: RemovalBatch,
    /// `(holes, first freed)`: the holes made through this stripe this
    /// round (removals and abandoned claims), and the last sparse index
    /// freed through it, the others linked from there through their
    /// sparse words. Pushed onto under `&self`, taken whole under `&mut`:
    /// no pop, so no tag.
    round: AtomicU64,
}

impl Lane {
    pub(super) fn new() -> Self {
        Lane {
            removals: RemovalBatch::new(),
            round: AtomicU64::new(pack(0, NIL)),
        }
    }

    /// Counts a position abandoned by an insert that got no index.
    pub(super) fn note_hole(&self) {
        // Relaxed: the count is read as a sum for `len` (a best effort under
        // concurrency) and exactly under `&mut`, after everything here.
        self.round.fetch_add(1 << 32, Ordering::Relaxed);
    }

    /// Counts a hole and frees the sparse index `index`, whose slot is
    /// `sparse`, with the vacant word `vacant`: `FREE(g, _)` goes on the
    /// freed list (its link set here), `EXHAUSTED` stays off it for good.
    /// The caller owns the index (it removed or abandoned its occupant),
    /// and has finished with the position's dense word.
    pub(super) fn free(&self, sparse: &Slot<()>, index: u32, vacant: SlotWord) {
        // Release, for the stores of the sparse word below: pairs with the
        // Acquire load (or failed CAS) of a remove that lost to the caller,
        // which then sees the caller's dense store `REMOVED` (see
        // `help_remove`). No lookup can match these words.
        if vacant.state() != State::Free {
            sparse.word.store(vacant.to_bits(), Ordering::Release);
            self.note_hole();
            return;
        }
        // Relaxed for the list: it is only read under `&mut`, which happens
        // after every push.
        let mut current = self.round.load(Ordering::Relaxed);
        loop {
            // Release: see above.
            sparse.word.store(
                vacant.with_link(current as u32).to_bits(),
                Ordering::Release,
            );
            let holes = (current >> 32) as u32;
            match self.round.compare_exchange_weak(
                current,
                pack(holes.wrapping_add(1), index),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// The holes counted this round so far (a best effort under concurrency).
    #[inline]
    pub(super) fn holes(&self) -> u32 {
        // Relaxed: see `note_hole`.
        (self.round.load(Ordering::Relaxed) >> 32) as u32
    }

    /// Ends the round for this stripe (`&mut`): its holes and the first of
    /// its freed indices, the lane emptied.
    pub(super) fn take(&self) -> (u32, u32) {
        // Relaxed: under `&mut`, after every push.
        let word = self.round.swap(pack(0, NIL), Ordering::Relaxed);
        ((word >> 32) as u32, word as u32)
    }
}

/// Appends to `queue` the indices linked from `first` through their
/// sparse words (newest first), oldest first. Under `&mut`.
pub(super) fn queue_freed(
    sparse: &Storage<()>,
    first: u32,
    scratch: &mut Vec<u32>,
    queue: &mut std::collections::VecDeque<u32>,
) {
    scratch.clear();
    let mut index = first;
    while index != NIL {
        scratch.push(index);
        // Relaxed: under `&mut`, after every push that linked it.
        index = SlotWord::from_bits(sparse.slot(index).word.load(Ordering::Relaxed)).link();
    }
    queue.extend(scratch.iter().rev());
}
