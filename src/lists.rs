#![doc = include_str!("../docs/lists.md")]

use crate::slot::{Slot, SlotWord, State, NIL};
use crate::storage::Storage;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

#[inline(always)]
const fn pack(high: u32, low: u32) -> u64 {
    ((high as u64) << 32) | low as u64
}

#[inline(always)]
const fn high(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline(always)]
const fn low(word: u64) -> u32 {
    word as u32
}

/// A chain of slots linked through their words, `first` to `last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) first: u32,
    pub(crate) last: u32,
}

impl Chain {
    /// The link a slot put in front of `chain` must carry.
    #[inline]
    pub(crate) fn link_to(chain: Option<Chain>) -> u32 {
        chain.map_or(NIL, |c| c.first)
    }

    /// `chain` with slot `index` (already linked to it) in front.
    #[inline]
    pub(crate) fn prepend(chain: Option<Chain>, index: u32) -> Chain {
        Chain {
            first: index,
            last: chain.map_or(index, |c| c.last),
        }
    }

    /// The chain from `first` to the slot whose link is `NIL`, found by
    /// walking it: a step per slot. The caller owns the chain, so its links
    /// stay put (read Relaxed).
    fn walked<T>(storage: &Storage<T>, first: u32) -> Chain {
        let mut last = first;
        loop {
            let next = SlotWord::from_bits(storage.slot(last).word.load(Ordering::Relaxed)).link();
            if next == NIL {
                return Chain { first, last };
            }
            last = next;
        }
    }
}

/// The step a pop takes from the list word `head`: the first slot's index,
/// the slot, its `FREE` word (read Relaxed: the caller says why that is
/// enough) and the list word after it; `None` if the list is empty.
#[inline(always)]
fn pop_step<T>(storage: &Storage<T>, head: u64) -> Option<(u32, &Slot<T>, SlotWord, u64)> {
    let index = low(head);
    if index == NIL {
        return None;
    }
    let slot = storage.slot(index);
    let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
    Some((
        index,
        slot,
        word,
        pack(high(head).wrapping_add(1), word.link()),
    ))
}

/// A tagged Treiber stack of free slots (see the module docs): `FREE`
/// words, and for a `T` without drop glue `REMOVED` ones past their grace
/// period, which a pop treats alike.
pub(crate) struct FreeList {
    word: AtomicU64,
}

impl FreeList {
    pub(crate) fn new() -> Self {
        FreeList {
            word: AtomicU64::new(pack(0, NIL)),
        }
    }

    /// Whether the list looks empty (a hint: it may change at once).
    #[inline]
    pub(crate) fn looks_empty(&self) -> bool {
        low(self.word.load(Ordering::Relaxed)) == NIL
    }

    /// Pops so far, mod 2^32: every insert pops once.
    #[inline]
    pub(crate) fn pops(&self) -> u32 {
        high(self.word.load(Ordering::Relaxed))
    }

    /// Pops a free slot; returns its index, the slot, its vacant word
    /// (`FREE`, or `REMOVED` past its grace period: see `reclaim_batch`) and
    /// the list's pop count after this pop. The caller owns the slot.
    #[inline(always)]
    pub(crate) fn pop<'a, T>(
        &self,
        storage: &'a Storage<T>,
    ) -> Option<(u32, &'a Slot<T>, SlotWord, u32)> {
        // Acquire pairs with the Release CAS in `push`: the links the pusher
        // wrote, and the reclaimer's drop of the old value, are visible.
        let mut head = self.word.load(Ordering::Acquire);
        loop {
            // The link was published by the Acquire load of `head`; if the
            // slot has moved on since, the CAS below fails.
            let (index, slot, word, next) = pop_step(storage, head)?;
            // Acquire on both outcomes: as for the first load of `head`.
            match self
                .word
                .compare_exchange_weak(head, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some((index, slot, word, high(next))),
                Err(actual) => head = actual,
            }
        }
    }

    /// Pops up to `max` free slots at once: walks that many links from the
    /// head and swings the head past them with one CAS, raising the tag by
    /// the number taken. Returns the run and its length; the caller owns
    /// the run, linked `first` → … → `last` through the slot words.
    ///
    /// ABA-safe for the same reason as `pop`: the CAS succeeds only if head
    /// and tag are unchanged, so no pop happened since the head was read and
    /// no slot of the walked run can have moved.
    pub(crate) fn pop_run<T>(&self, storage: &Storage<T>, max: u32) -> Option<(Chain, u32)> {
        self.pop_run_within(storage, max, u32::MAX)
    }

    /// [`pop_run`](Self::pop_run), giving up (`None`) after `tries` walks
    /// that another thread's pop or push made stale: for a magazine's
    /// refill, which walks inside its owner's section, and must keep that
    /// section short whatever the other threads do to the shared list.
    pub(crate) fn pop_run_within<T>(
        &self,
        storage: &Storage<T>,
        max: u32,
        tries: u32,
    ) -> Option<(Chain, u32)> {
        // Acquire: as in `pop`; it also covers the links of every slot below
        // the head (earlier pushes are in the head's release sequence).
        let mut head = self.word.load(Ordering::Acquire);
        for _ in 0..tries {
            let first = low(head);
            if first == NIL || max == 0 {
                return None;
            }
            let mut count = 0;
            let (mut last, mut next) = (first, first);
            while count < max && next != NIL {
                // A stale link (the slot was popped meanwhile) can name a slot
                // whose bucket another thread has reserved but not allocated
                // yet: the head has moved on, so start over.
                let Some(slot) = storage.find(next) else {
                    break;
                };
                last = next;
                // Relaxed: as in `pop`; a stale link only makes the CAS fail.
                next = SlotWord::from_bits(slot.word.load(Ordering::Relaxed)).link();
                count += 1;
            }
            if count < max && next != NIL {
                head = self.word.load(Ordering::Acquire);
                continue;
            }
            let new = pack(high(head).wrapping_add(count), next);
            // Acquire on both outcomes: as in `pop`.
            match self
                .word
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some((Chain { first, last }, count)),
                Err(actual) => head = actual,
            }
        }
        None
    }

    /// Pushes the chain the caller owns from `first` to the slot whose link
    /// is `NIL`: onto an empty list as it is, its `NIL` the list's end
    /// ([`push_if_empty`](Self::push_if_empty)); else walked to its last
    /// slot, a step per slot, to be linked in front.
    pub(crate) fn push_to_nil<T>(&self, storage: &Storage<T>, first: u32) {
        if !self.push_if_empty(first) {
            self.push(storage, Chain::walked(storage, first));
        }
    }

    /// Makes the chain the caller owns from `first` (its last link `NIL`)
    /// the list's contents if the list is empty, keeping the pop count:
    /// the chain's `NIL` stays the list's end, so its last slot need not be
    /// known, nor found by a walk. `false`, and nothing done, if the list is
    /// not empty.
    fn push_if_empty(&self, first: u32) -> bool {
        let mut head = self.word.load(Ordering::Relaxed);
        while low(head) == NIL {
            // Release pairs with the Acquire in `pop`: as in `push`.
            match self.word.compare_exchange_weak(
                head,
                pack(high(head), first),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => head = actual,
            }
        }
        false
    }

    /// Pushes a chain of free slots the caller owns, already linked
    /// `first` → … → `last`; `last`'s link is overwritten.
    pub(crate) fn push<T>(&self, storage: &Storage<T>, chain: Chain) {
        let last = &storage.slot(chain.last).word;
        let mut head = self.word.load(Ordering::Relaxed);
        loop {
            let word = SlotWord::from_bits(last.load(Ordering::Relaxed));
            last.store(word.with_link(low(head)).to_bits(), Ordering::Relaxed);
            let new = pack(high(head), chain.first);
            // Release pairs with the Acquire in `pop`: our links, and whatever
            // we did to the slots' values, happen before the slots are reused.
            match self
                .word
                .compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }
}

impl FreeList {
    // ---- Owned lists (a magazine's: one writer at a time, see `magazine`) --
    //
    // The same steps as above, as a load and a store: only the magazine's
    // owner, inside a section, or its revoker writes the word, and each
    // hand-over between them synchronises (the owner word, the `active`
    // flag). Others only read the pop count (Relaxed, as above).

    /// Pops a free slot off an owned list: as [`pop`](Self::pop).
    #[inline(always)]
    pub(crate) fn pop_owned<'a, T>(
        &self,
        storage: &'a Storage<T>,
    ) -> Option<(u32, &'a Slot<T>, SlotWord, u32)> {
        self.pop_owned_unless(storage, |_| false)
    }

    /// [`pop_owned`](Self::pop_owned), unless the pop count it would leave
    /// meets `skip`: then `None`, and the list is left as it was.
    #[inline(always)]
    pub(crate) fn pop_owned_unless<'a, T>(
        &self,
        storage: &'a Storage<T>,
        skip: impl FnOnce(u32) -> bool,
    ) -> Option<(u32, &'a Slot<T>, SlotWord, u32)> {
        // This thread put the slots here, or received them with the
        // magazine; nobody else moves them while they are on an owned list.
        let (index, slot, word, next) = pop_step(storage, self.word.load(Ordering::Relaxed))?;
        if skip(high(next)) {
            return None;
        }
        self.word.store(next, Ordering::Relaxed);
        Some((index, slot, word, high(next)))
    }

    /// Makes `first` (the head of a chain ending in `NIL`) the contents of an
    /// owned list that is empty, keeping the pop count.
    pub(crate) fn fill_owned(&self, first: u32) {
        let head = self.word.load(Ordering::Relaxed);
        debug_assert_eq!(low(head), NIL, "fill_owned on a list that is not empty");
        self.word.store(pack(high(head), first), Ordering::Relaxed);
    }

    /// Takes every slot off an owned list, keeping the pop count: returns
    /// the first (the rest follow its links to `NIL`), without a walk.
    pub(crate) fn take_owned(&self) -> Option<u32> {
        let head = self.word.load(Ordering::Relaxed);
        let first = low(head);
        if first == NIL {
            return None;
        }
        self.word.store(pack(high(head), NIL), Ordering::Relaxed);
        Some(first)
    }

    /// Stores `FREE` over every `REMOVED` word on an owned list (or any
    /// list, under `&mut` on the pool): a batch of values without drop glue
    /// joins a free list unwalked, its words still `REMOVED` (see
    /// `reclaim::reclaim_batch`), which an exclusive reclamation's scan
    /// would take for removals still pending.
    pub(crate) fn mark_free_owned<T>(&self, storage: &Storage<T>) {
        let mut index = low(self.word.load(Ordering::Relaxed));
        while index != NIL {
            let slot = storage.slot(index);
            let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
            if word.state() == State::Removed {
                let free = SlotWord::free(word.generation(), word.link());
                slot.word.store(free.to_bits(), Ordering::Relaxed);
            }
            index = word.link();
        }
    }
}

/// A sealed batch of `REMOVED` slots, linked from `head`, `count` long.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SealedBatch {
    pub(crate) head: u32,
    pub(crate) count: u32,
    /// The slot at the end of the batch (its link is `NIL`), if known:
    /// an owned batch records it, a shared one cannot (its first pusher
    /// learns it was first only when its CAS succeeds, after a sealer may
    /// have taken the batch). `NIL` if not known.
    pub(crate) last: u32,
}

/// The count of a batch a push has just sealed: its slots are distinct
/// slots of one pool, fewer than 2^32 (see [`RemovalBatch::push`]).
///
/// # Panics
/// If `total` does not fit: that would be a bug in the pool, and a wrong
/// count would lose slots when the batch is walked.
#[inline]
fn sealed_count(total: u64) -> u32 {
    u32::try_from(total).expect("handle-pool bug: a sealed batch counts more slots than a pool has")
}

/// The batch of removed slots a stripe is filling (see the module docs).
pub(crate) struct RemovalBatch {
    word: AtomicU64,
    /// Slots ever sealed or taken off (mod 2^32 is what counts).
    sealed: AtomicU64,
    /// An owned batch's last slot, the first pushed (see `SealedBatch::last`).
    last: AtomicU32,
}

impl RemovalBatch {
    pub(crate) fn new() -> Self {
        RemovalBatch {
            word: AtomicU64::new(pack(0, NIL)),
            sealed: AtomicU64::new(0),
            last: AtomicU32::new(NIL),
        }
    }

    /// Removals so far, mod 2^32: pending in the batch plus sealed.
    #[inline]
    pub(crate) fn removal_count(&self) -> u32 {
        let pending = high(self.word.load(Ordering::Relaxed));
        pending.wrapping_add(self.sealed.load(Ordering::Relaxed) as u32)
    }

    /// The first slot of the batch, for a remover to link its slot to
    /// before it pushes, and the word to pass to `push`.
    #[inline]
    pub(crate) fn head(&self) -> (u32, u64) {
        let word = self.word.load(Ordering::Relaxed);
        (low(word), word)
    }

    /// Adds a chain of `count` slots the caller has just moved to
    /// `REMOVED`, linked `head` → … → tail, whose tail links to the batch
    /// head read as `current` (from [`head`](Self::head)). On a lost race
    /// the tail is relinked to the new head (`relink`). Returns the batch
    /// when this push fills it to `size` or past it: the caller must then
    /// defer it.
    ///
    /// Any `count` is taken, up to every slot a pool has (`remove_many` of
    /// all its handles pushes one chain): the sum with what the batch holds
    /// is taken in 64 bits. A push that succeeds adds slots distinct from
    /// the batch's (the caller moved them to `REMOVED` itself, and the
    /// batch holds only slots removed before), so its total counts distinct
    /// slots of one pool, fewer than 2^32, and fits the sealed batch's
    /// count. A `current` read before a seal may claim more; its CAS fails.
    #[inline]
    pub(crate) fn push(
        &self,
        head: u32,
        count: u32,
        mut current: u64,
        size: u32,
        relink: impl Fn(u32),
    ) -> Option<SealedBatch> {
        loop {
            let total = u64::from(high(current)) + u64::from(count);
            let new = if total >= u64::from(size) {
                pack(0, NIL)
            } else {
                // Below `size`, a `u32`.
                pack(total as u32, head)
            };
            // AcqRel: Release publishes our slots' links to whoever seals the
            // batch; Acquire, when we seal it, pairs with the other pushers'
            // Release so their links are visible to us.
            match self
                .word
                .compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) if total >= u64::from(size) => {
                    self.sealed.fetch_add(total, Ordering::Relaxed);
                    return Some(SealedBatch {
                        head,
                        count: sealed_count(total),
                        last: NIL,
                    });
                }
                Ok(_) => return None,
                Err(actual) => {
                    current = actual;
                    // We still own the chain: relink its tail to the new head.
                    relink(low(current));
                }
            }
        }
    }

    /// The batch's word as it is now, for [`seal_if_still`](Self::seal_if_still).
    #[inline]
    pub(crate) fn word(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }

    /// Whether `word` (from [`word`](Self::word)) holds no slot.
    #[inline]
    pub(crate) fn is_empty_word(word: u64) -> bool {
        low(word) == NIL
    }

    /// Seals the batch if its word is still `seen`: nobody pushed onto it
    /// (or sealed it) since. Returns what it sealed.
    pub(crate) fn seal_if_still(&self, seen: u64) -> Option<SealedBatch> {
        if low(seen) == NIL {
            return None;
        }
        // Acquire, as when a remover seals a full batch: the pushers'
        // Release CASes made their links visible.
        self.word
            .compare_exchange(seen, pack(0, NIL), Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        self.sealed.fetch_add(high(seen) as u64, Ordering::Relaxed);
        Some(SealedBatch {
            head: low(seen),
            count: high(seen),
            last: NIL,
        })
    }

    /// Takes whatever the batch holds.
    pub(crate) fn take_all(&self) -> Option<SealedBatch> {
        // Acquire: as when a remover seals a full batch.
        let taken = self.word.swap(pack(0, NIL), Ordering::Acquire);
        self.sealed.fetch_add(high(taken) as u64, Ordering::Relaxed);
        (low(taken) != NIL).then(|| SealedBatch {
            head: low(taken),
            count: high(taken),
            last: NIL,
        })
    }
}

impl RemovalBatch {
    // ---- Owned batches (a magazine's: see the note on owned free lists) --

    /// The first slot of an owned batch, for a remover to link its slot to.
    #[inline(always)]
    pub(crate) fn head_owned(&self) -> u32 {
        low(self.word.load(Ordering::Relaxed))
    }

    /// Adds `index` (already `REMOVED` and linked to [`head_owned`](Self::head_owned))
    /// to an owned batch; returns whether the batch now holds `size` slots.
    /// The owner must then take the full batch with
    /// [`take_owned`](Self::take_owned) before its section ends, and seal it.
    #[inline(always)]
    pub(crate) fn push_owned(&self, index: u32, size: u32) -> bool {
        let total = high(self.word.load(Ordering::Relaxed)) + 1;
        if total == 1 {
            self.last.store(index, Ordering::Relaxed);
        }
        self.word.store(pack(total, index), Ordering::Relaxed);
        total >= size
    }

    /// Takes whatever an owned batch holds, counting it as sealed.
    pub(crate) fn take_owned(&self) -> Option<SealedBatch> {
        let word = self.word.load(Ordering::Relaxed);
        if low(word) == NIL {
            return None;
        }
        let batch = SealedBatch {
            head: low(word),
            count: high(word),
            last: self.last.load(Ordering::Relaxed),
        };
        let sealed = self.sealed.load(Ordering::Relaxed);
        self.sealed.store(
            sealed.wrapping_add(u64::from(batch.count)),
            Ordering::Relaxed,
        );
        self.word.store(pack(0, NIL), Ordering::Relaxed);
        Some(batch)
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/lists.rs"]
mod tests;
