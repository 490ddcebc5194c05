//! Reading a pool slot by slot, and building a pool from such a list:
//! what `serde` and `Clone` share.

use super::insert::{publish, Acquired};
use super::RawPool;
use crate::lists::Chain;
use crate::slot::{SlotWord, State};
use crate::sync::Ordering;
use crate::Guard;

/// Slots read under one pin before [`RawPool::read_slots`] repins: a long
/// clone or serialization then holds reclamation back, in every pool, for
/// the time of this many values' clones or writes, not for the whole call.
const REPIN_EVERY: u32 = 32;

/// What one slot holds, as a serialized pool lists it.
#[derive(Debug)]
pub(crate) enum SlotEntry<V> {
    /// Any state but `OCCUPIED`, with the generation of the slot's last
    /// occupant (0 if it never had one). A slot whose bucket is not
    /// allocated yet is `Vacant(0)`.
    Vacant(u32),
    /// `OCCUPIED(g)` and its value: the handle `(index, g)` resolves.
    Live(u32, V),
}

/// Slot entries read from a serialized pool, held until every one is
/// checked: one 4-byte tag per entry, two per run of vacant slots, and the
/// live entries' values apart, so that a vacant entry (two bytes in a
/// compact format) costs its tag and not a `V`, and a run of vacant slots
/// costs two tags however many slots it covers.
#[cfg(feature = "serde")]
pub(crate) struct ReadEntries<V> {
    /// Per entry, in index order: a slot's generation, with
    /// [`ReadEntries::LIVE`] set for a live entry; or a run of vacant slots
    /// as two tags with [`ReadEntries::RUN`] set, its generation then its
    /// length.
    tags: Vec<u32>,
    /// The live entries' values, in index order.
    values: Vec<V>,
    /// How many slots the entries describe.
    slots: usize,
}

#[cfg(feature = "serde")]
impl<V> ReadEntries<V> {
    /// Marks a live entry's tag. Free: generations are below 2^30 (those
    /// past it are refused before an entry is kept, see `push`).
    const LIVE: u32 = 1 << 31;

    /// Marks both tags of a run of vacant slots (generations and run
    /// lengths are below 2^30).
    const RUN: u32 = 1 << 30;

    /// Room for `entries` entries' tags (the values grow as they come).
    pub(crate) fn with_capacity(entries: usize) -> Self {
        ReadEntries {
            tags: Vec::with_capacity(entries),
            values: Vec::new(),
            slots: 0,
        }
    }

    /// How many slots the entries kept so far describe.
    pub(crate) fn len(&self) -> usize {
        self.slots
    }

    /// Keeps `entry`, which [`RawPool::check_entry`] accepted (restoring
    /// checks every entry again before it writes anything).
    ///
    /// # Panics
    /// If its generation has the live or run tag's bit: `check_entry`
    /// refuses it.
    pub(crate) fn push(&mut self, entry: SlotEntry<V>) {
        let (generation, value) = match entry {
            SlotEntry::Vacant(generation) => (generation, None),
            SlotEntry::Live(generation, value) => (generation, Some(value)),
        };
        assert!(
            generation & (Self::LIVE | Self::RUN) == 0,
            "handle-pool bug: an unchecked generation {generation} was kept"
        );
        match value {
            None => self.tags.push(generation),
            Some(value) => {
                self.tags.push(generation | Self::LIVE);
                self.values.push(value);
            }
        }
        self.slots += 1;
    }

    /// Keeps a run of `count` vacant slots of generation `generation`, which
    /// [`RawPool::check_entry`] accepted for its first and last slots.
    ///
    /// # Panics
    /// If `count` is 0 or either has the run tag's bit.
    pub(crate) fn push_run(&mut self, generation: u32, count: u32) {
        assert!(
            count > 0 && (generation | count) & (Self::LIVE | Self::RUN) == 0,
            "handle-pool bug: an unchecked run ({generation}, {count}) was kept"
        );
        self.tags.push(generation | Self::RUN);
        self.tags.push(count | Self::RUN);
        self.slots += count as usize;
    }

    /// The entries without their values, one per slot, in index order:
    /// what [`RawPool::check_entry`] looks at.
    fn shapes(&self) -> impl Iterator<Item = SlotEntry<()>> + '_ {
        let mut tags = self.tags.iter();
        let mut run = (0, 0);
        core::iter::from_fn(move || {
            if run.1 > 0 {
                run.1 -= 1;
                return Some(SlotEntry::Vacant(run.0));
            }
            let tag = *tags.next()?;
            if tag & Self::RUN != 0 {
                let count = tags.next().expect("a run's two tags") & !Self::RUN;
                run = (tag & !Self::RUN, count - 1);
                Some(SlotEntry::Vacant(run.0))
            } else if tag & Self::LIVE == 0 {
                Some(SlotEntry::Vacant(tag))
            } else {
                Some(SlotEntry::Live(tag & !Self::LIVE, ()))
            }
        })
    }

    /// The entries, one per slot, from the last slot's down.
    fn into_rev(self) -> impl Iterator<Item = SlotEntry<V>> {
        let ReadEntries {
            mut tags,
            mut values,
            ..
        } = self;
        let mut run = (0, 0);
        core::iter::from_fn(move || {
            if run.1 > 0 {
                run.1 -= 1;
                return Some(SlotEntry::Vacant(run.0));
            }
            let tag = tags.pop()?;
            if tag & Self::RUN != 0 {
                let generation = tags.pop().expect("a run's two tags") & !Self::RUN;
                run = (generation, (tag & !Self::RUN) - 1);
                Some(SlotEntry::Vacant(generation))
            } else if tag & Self::LIVE == 0 {
                Some(SlotEntry::Vacant(tag))
            } else {
                let value = values.pop().expect("a value for every live tag");
                Some(SlotEntry::Live(tag & !Self::LIVE, value))
            }
        })
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

impl<T> RawPool<T> {
    /// Calls `f` with what each slot of `indices` holds, in that order,
    /// from one read of each slot's word ([`read_slot`](Self::read_slot)),
    /// under a guard repinned every [`REPIN_EVERY`] slots; stops at `f`'s
    /// first error.
    pub(crate) fn read_slots<E>(
        &self,
        indices: impl Iterator<Item = u32>,
        mut f: impl FnMut(SlotEntry<&T>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut guard = crate::pin();
        for (read, index) in indices.enumerate() {
            if read % REPIN_EVERY as usize == 0 && read != 0 {
                guard.repin();
            }
            f(self.read_slot(index, &guard))?;
        }
        Ok(())
    }

    /// What slot `index` holds, from one load of its word: every entry is
    /// a state the slot actually had. A live value is borrowed for as
    /// long as `_guard` stays pinned, even if removed meanwhile.
    fn read_slot<'a>(&'a self, index: u32, _guard: &'a Guard) -> SlotEntry<&'a T> {
        let Some(slot) = self.storage.find(index) else {
            // Reserved, bucket not allocated yet: never occupied.
            return SlotEntry::Vacant(0);
        };
        // Acquire pairs with the Release store in `publish`: once the word
        // says OCCUPIED, the value written before it is visible.
        let word = SlotWord::from_bits(slot.word.load(Ordering::Acquire));
        if word.state() == State::Occupied {
            // SAFETY: as in `get`: OCCUPIED, seen under a guard that
            // announced before the load, and `&'a self`.
            SlotEntry::Live(word.generation(), unsafe { slot.value_ref() })
        } else {
            SlotEntry::Vacant(word.generation())
        }
    }

    /// Checks that `entry` could describe slot `index` of this pool.
    ///
    /// # Errors
    /// An index at or above `max_slots`; a live generation outside
    /// `1..=max_generation`; a vacant generation above `MAX_GENERATION`.
    #[cfg(feature = "serde")]
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

    /// Gives an empty pool exactly `entries.len()` slots, slot `i` as
    /// entry `i` says. Every entry is checked before anything is
    /// written, so on error the values are still in `entries` and
    /// dropped with it, and the pool stays empty. Allocates the slots
    /// themselves only: at most about `2 * len + 64`.
    ///
    /// # Panics
    /// If the pool has ever handed out a slot.
    #[cfg(feature = "serde")]
    pub(crate) fn restore(&mut self, entries: ReadEntries<T>) -> Result<(), RestoreError> {
        for (index, entry) in entries.shapes().enumerate() {
            self.check_entry(index, &entry)?;
        }
        // Checked above: every index is below `max_slots`, a `u32`.
        let mut rebuild = Rebuild::new(self, entries.len() as u32);
        for entry in entries.into_rev() {
            rebuild.put_next_down(entry);
        }
        rebuild.finish();
        Ok(())
    }
}

/// An empty pool being given slots `0..count`, from the top down, each as
/// an entry says (see [`RawPool::restore`]): the `FREE` slots are linked in
/// index order, so their chain is built back to front. Dropped unfinished
/// (a value's `clone` panicked), it leaves the pool to be dropped: the
/// slots not put yet are fresh, and the values put are `OCCUPIED`, which
/// the pool's drop drops.
struct Rebuild<'a, T> {
    pool: &'a mut RawPool<T>,
    /// The slots below this one are still to be put.
    next: u32,
    free: Option<Chain>,
    live: isize,
}

impl<'a, T> Rebuild<'a, T> {
    /// Reserves slots `0..count` of `pool`, which must be new.
    ///
    /// # Panics
    /// If the pool has ever handed out a slot, or `count` is past its
    /// `max_slots`.
    fn new(pool: &'a mut RawPool<T>, count: u32) -> Self {
        assert_eq!(pool.slots_used(), 0, "restore needs an empty pool");
        if count > 0 {
            let Some((0, reserved)) = pool.reserve_fresh(count) else {
                unreachable!("an empty pool reserves from slot 0");
            };
            assert_eq!(reserved, count, "restore past the pool's max_slots");
        }
        Rebuild {
            pool,
            next: count,
            free: None,
            live: 0,
        }
    }

    /// Puts `entry` in the highest slot not put yet. The entry was checked
    /// ([`RawPool::check_entry`]) or read from a pool with the same
    /// configuration.
    fn put_next_down(&mut self, entry: SlotEntry<T>) {
        self.next -= 1;
        let index = self.next;
        let slot = self.pool.storage.slot(index);
        match entry {
            SlotEntry::Live(generation, value) => {
                // `&mut` on the pool is exclusive and the slot was just
                // reserved fresh: this thread owns it.
                let acquired = Acquired {
                    index,
                    slot,
                    generation,
                };
                publish(acquired, value);
                self.live += 1;
            }
            SlotEntry::Vacant(generation) => {
                let word = SlotWord::vacated(
                    generation,
                    Chain::link_to(self.free),
                    self.pool.config.max_generation,
                );
                // Relaxed: published by the free list's push in `finish`,
                // and the pool is reached through `&mut` or a move.
                slot.word.store(word.to_bits(), Ordering::Relaxed);
                if word.state() == State::Free {
                    self.free = Some(Chain::prepend(self.free, index));
                }
            }
        }
    }

    /// Every slot put: the free ones go on the home stripe's list, and the
    /// length counts the live ones.
    fn finish(self) {
        debug_assert_eq!(self.next, 0, "every slot put");
        let pool = self.pool;
        let home = pool.stripes.home();
        if let Some(chain) = self.free {
            pool.stripes[home].free.push(&pool.storage, chain);
        }
        // The length counts pops; the live values came without any.
        pool.stripes[home].adjust_len(self.live);
    }
}

impl<V: Clone> SlotEntry<&V> {
    /// The entry with its value cloned.
    fn cloned(self) -> SlotEntry<V> {
        match self {
            SlotEntry::Vacant(generation) => SlotEntry::Vacant(generation),
            SlotEntry::Live(generation, value) => SlotEntry::Live(generation, value.clone()),
        }
    }
}

impl<T: Clone> Clone for RawPool<T> {
    /// A pool with this one's configuration and, slot for slot, the state
    /// each slot had when it was read (once, see [`read_slots`]): what
    /// serializing and deserializing gives, without the format.
    ///
    /// [`read_slots`]: RawPool::read_slots
    fn clone(&self) -> Self {
        // At most `max_slots`, a `u32`.
        let len = self.slots_used() as u32;
        let mut pool = RawPool::new(self.config);
        // Read from the top down, as a rebuild puts them, with no list of
        // entries in between. Should a value's `clone` panic, the pool
        // built so far is dropped as it unwinds, with the clones made so
        // far; `self` is only read.
        let mut rebuild = Rebuild::new(&mut pool, len);
        let read: Result<(), core::convert::Infallible> =
            self.read_slots((0..len).rev(), |entry| {
                rebuild.put_next_down(entry.cloned());
                Ok(())
            });
        let Ok(()) = read;
        rebuild.finish();
        pool
    }
}
