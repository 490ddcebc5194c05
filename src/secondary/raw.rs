//! The map without its handle type: the entry's transitions (the state
//! tables in `secondary::entry`), on raw [`Handle`]s, over the table of
//! entries and the value pool.

use crossbeam_utils::CachePadded;

use crate::config::Config;
use crate::guard::Guard;
use crate::handle::Handle;
use crate::hint::cold_path;
use crate::raw::RawPool;
use crate::slot::{drop_catching, keep_first, Panic, Slot, SlotWord, State};
use crate::storage::Storage;
use crate::sync::{AtomicIsize, Ordering};
use crate::thread_id::thread_id;

use super::entry::{free_room, Entry, EntryWord, Place, VALUE_SLOTS};
use super::retired::{RetiredCell, Stored};
use super::table::{Entries, Table};

/// A secondary map on raw handles.
pub(crate) struct RawSecondary<V> {
    /// The values that could not go in their rooms, and the retired cells.
    /// Declared before the table: the retired cells point into it.
    values: RawPool<Stored<V>>,
    /// Retired cells the value pool had no slot for (it was full): never
    /// dropped while readers may see their values, so kept here until
    /// `&mut` of the map (`clear`, or its drop) drops them. Declared before
    /// the table, as the value pool. Touched only on that panic path.
    leaked: std::sync::Mutex<Vec<Stored<V>>>,
    /// The entries, by slot index.
    table: Table<V>,
    /// The length, in shares a thread adds to by its number.
    counts: Counts,
}

/// The value pool's panic, out of line and cold.
#[cold]
#[inline(never)]
fn values_full() -> ! {
    panic!(
        "SecondaryMap: the value pool is full (2^31 values live, awaiting reclamation or retired)"
    )
}

/// The handle of the value in the value pool's slot `slot`, which an entry
/// named and the caller now owns (it won the CAS that took it out of the
/// entry, or holds `&mut`).
///
/// An `OCCUPIED` slot word is its handle's bits (see `docs/slot.md`).
fn value_handle<V>(values: &RawPool<Stored<V>>, slot: u32) -> Handle {
    // Relaxed: the caller synchronised with the insert that stored the
    // entry word (its CAS read that word, or it holds `&mut`), and that
    // insert's value pool publication came before its CAS.
    let bits = values.storage().slot(slot).word.load(Ordering::Relaxed);
    match Handle::from_bits(bits) {
        Some(handle) if SlotWord::from_bits(bits).state() == State::Occupied => handle,
        _ => unnamed_value(slot, bits),
    }
}

#[cold]
#[inline(never)]
fn unnamed_value(slot: u32, bits: u64) -> ! {
    panic!(
        "handle-pool bug: an entry named value slot {slot}, whose word is {:?}",
        SlotWord::from_bits(bits)
    )
}

/// Where an operation found a value: its entry's room, or a slot of the
/// value pool. Reading it is `unsafe`: see [`Found::value_ref`].
pub(crate) enum Found<'a, V> {
    Inline(&'a Entry<V>),
    Pooled(&'a Slot<Stored<V>>),
}

impl<'a, V> Found<'a, V> {
    /// Where the value of `word` is.
    #[inline(always)]
    fn at(entry: &'a Entry<V>, values: &'a Storage<Stored<V>>, place: Place) -> Self {
        match place {
            Place::Inline => Found::Inline(entry),
            Place::Pooled(slot) => Found::Pooled(values.slot(slot)),
        }
    }

    /// The value, shared.
    ///
    /// # Safety
    /// An entry word naming this place was loaded with Acquire while this
    /// thread was protected (a guard, or a one-call read of the value
    /// pool) by a protection that lasts `'a`; or the map is borrowed for
    /// `'a` mutably, or shared with nothing changing it.
    #[inline(always)]
    pub(crate) unsafe fn value_ref(self) -> &'a V {
        // The Acquire load of the word saw the CAS that stored it, after the
        // value was written in the room or published by the value pool, so
        // it is initialised. It is dropped (by its retired cell, or as a
        // removed value of the value pool), and the room written again,
        // only after a CAS took it out of the word, after our load, and the
        // reader's protection, announced before that load, keeps the value
        // pool from reclaiming it until 'a ends ("Lookups" in the module
        // docs of `entry`).
        match self {
            // SAFETY: the room holds the value for 'a, as argued above.
            Found::Inline(entry) => unsafe { entry.value_ref() },
            // SAFETY: the slot holds the value for 'a, as argued above.
            Found::Pooled(slot) => unsafe { slot.value_ref() }.value(),
        }
    }

    /// The value, mutably.
    ///
    /// # Safety
    /// The map is borrowed mutably for `'a`, the word names this place, and
    /// no other reference to this value is handed out meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn value_mut(self) -> &'a mut V {
        match self {
            // SAFETY: the word names the room, so it holds the entry's
            // value; the caller guarantees exclusivity.
            Found::Inline(entry) => unsafe { entry.value_mut() },
            // SAFETY: the word names the slot, so it holds the entry's
            // value; the caller guarantees exclusivity.
            Found::Pooled(slot) => unsafe { slot.value_mut() }.value_mut(),
        }
    }
}

impl<V> RawSecondary<V> {
    pub(crate) fn new(config: Config) -> Self {
        // A `POOLED` word holds a slot index in 31 bits.
        let config = Config {
            max_slots: config.max_slots.min(VALUE_SLOTS),
            ..config
        }
        .resolved();
        RawSecondary {
            values: RawPool::new(config),
            leaked: std::sync::Mutex::new(Vec::new()),
            table: Table::new(),
            counts: Counts::new(config.stripes),
        }
    }

    /// Allocates the entries of indices `0..capacity`.
    pub(crate) fn reserve(&self, capacity: usize) {
        self.table.reserve(capacity as u64);
    }

    /// Entries allocated.
    pub(crate) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Values in the map (see "Lookups" in the module docs of `entry`).
    pub(crate) fn len(&self) -> usize {
        self.counts.sum()
    }

    pub(crate) fn flush(&self) {
        self.values.flush();
    }

    /// Whether `handle` resolves.
    #[inline]
    pub(crate) fn contains(&self, handle: Handle) -> bool {
        // Acquire (in `load`) pairs with the insert's Release CAS: a `true`
        // orders this thread after the insert, as a `get` that finds it.
        EntryWord::from_bits(self.table.load(handle.index()).1).holds(handle)
    }

    /// Where the value for `handle` is now, loaded with Acquire. The caller
    /// reads it only under a protection that began before this call.
    #[inline(always)]
    fn find(&self, handle: Handle) -> Option<Found<'_, V>> {
        // Acquire (in `load`) pairs with the insert's Release CAS: the
        // value is written (or published by the value pool) before the
        // word names it.
        let (entry, word) = self.table.load(handle.index());
        match (entry, EntryWord::from_bits(word).find(handle)) {
            (Some(entry), Some(place)) => Some(Found::at(entry, self.values.storage(), place)),
            _ => {
                cold_path();
                None
            }
        }
    }

    /// Whether the value for `handle` is in its entry's room (`None` if
    /// there is none), for the loom models.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn is_in_its_room(&self, handle: Handle) -> Option<bool> {
        let (_, word) = self.table.load(handle.index());
        EntryWord::from_bits(word)
            .find(handle)
            .map(|place| place == Place::Inline)
    }

    /// The value `handle` refers to now.
    ///
    /// # Safety
    /// The calling thread is protected (a guard, or a one-call read of the
    /// value pool) from before this call until the reference's last use,
    /// within the borrow of `self`.
    #[inline(always)]
    unsafe fn value_of(&self, handle: Handle) -> Option<&V> {
        self.table.find_or(
            handle.index(),
            |entry| {
                // Acquire pairs with the insert's Release CAS: the value is
                // written (or published by the value pool) before the word
                // names it.
                let word = EntryWord::from_bits(entry.word().load(Ordering::Acquire));
                if word.is_inline_for(handle) {
                    // SAFETY: the word names the room; the caller's
                    // protection keeps its value there (see `Found::value_ref`).
                    Some(unsafe { Found::Inline(entry).value_ref() })
                } else {
                    // SAFETY: as the caller guarantees.
                    unsafe { self.pooled_value(word, handle) }
                }
            },
            None,
        )
    }

    /// [`value_of`](Self::value_of) for a word whose value is not in its
    /// room: in the value pool, or none for `handle`. Out of line: the
    /// common lookup keeps no code for it.
    ///
    /// # Safety
    /// As for `value_of`, `word` loaded with Acquire under the protection.
    #[inline(never)]
    unsafe fn pooled_value(&self, word: EntryWord, handle: Handle) -> Option<&V> {
        match word.find(handle)? {
            Place::Pooled(slot) => {
                let found = Found::Pooled(self.values.storage().slot(slot));
                // SAFETY: the word names the slot; the caller's protection
                // keeps its value there (see `Found::value_ref`).
                Some(unsafe { found.value_ref() })
            }
            Place::Inline => None,
        }
    }

    /// The value `handle` refers to, protected by `guard`.
    #[inline]
    pub(crate) fn get<'g>(&'g self, handle: Handle, _guard: &'g Guard) -> Option<&'g V> {
        // SAFETY: `guard` announced this thread before this call (a `Guard`
        // can only be made by announcing) and lives for `'g`.
        unsafe { self.value_of(handle) }
    }

    /// Calls `f` with the value `handle` refers to, protected for the call
    /// by a one-call read of the value pool.
    #[inline]
    pub(crate) fn with<R>(&self, handle: Handle, f: impl FnOnce(&V) -> R) -> Option<R> {
        // SAFETY: the one-call read announced before the lookup and lasts
        // until `f` returns.
        self.values
            .reclaimer()
            .read(|| unsafe { self.value_of(handle) }.map(f))
    }

    /// Stores `value` for `handle`, unless the entry holds a newer
    /// generation; returns whether it did. A value replaced is retired; a
    /// value refused is dropped (now, or by the value pool's reclamation if
    /// it went there).
    pub(crate) fn insert(&self, handle: Handle, value: V) -> bool {
        if handle.is_null() {
            // The null handle names no entity: storing for it would make it
            // resolve here (its index, `u32::MAX`, has an entry like any
            // other), and it must resolve nowhere. Refused as a stale
            // handle is, before the table grows.
            return false;
        }
        let entry = self.table.find_or_grow(handle.index());
        // Relaxed: a first look, to refuse without placing the value; the
        // CASes below decide.
        let current = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
        let Some((placed, mut current)) = self.place(entry, current, handle, value) else {
            return false;
        };
        loop {
            if current.refuses(handle) {
                // A newer generation came in meanwhile. No word named our
                // value, so nobody read it.
                self.give_back(entry, placed);
                return false;
            }
            // In the room, the value's word holds the room; in the value
            // pool, the room stays as it is, or passes from the entry to the
            // retired cell of a value this replaces.
            let new = EntryWord::occupied(handle.generation(), placed.place(), current.room_held());
            // Release pairs with the Acquire loads of lookups and with the
            // Acquire of the CAS that takes this word out: our value was
            // written in the room, or published by the value pool, before.
            // Acquire pairs with the Release CAS that stored `current`: a
            // replaced value's place is visible to `retire`.
            match entry.word().compare_exchange(
                current.to_bits(),
                new.to_bits(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if current.is_vacant() {
                        self.counts.add(1);
                    } else {
                        self.retire(entry, current);
                    }
                    return true;
                }
                Err(actual) => current = EntryWord::from_bits(actual),
            }
        }
    }

    /// Puts `value` for `handle` in `entry`'s room if it is free (holding
    /// it, by a CAS on the word that sets `HELD`), else in the value pool.
    /// Returns where, and the word now; `None` if, meanwhile, the word came
    /// to refuse `handle` (the value is dropped then).
    fn place(
        &self,
        entry: &Entry<V>,
        mut current: EntryWord,
        handle: Handle,
        value: V,
    ) -> Option<(Placed, EntryWord)> {
        while !current.room_held() {
            if current.refuses(handle) {
                return None;
            }
            let holding = current.holding_the_room();
            // Acquire pairs with the Release CAS that freed the room (a
            // retired cell's drop, or a refused insert giving it back): the
            // value that was there was moved out before we write.
            match entry.word().compare_exchange(
                current.to_bits(),
                holding.to_bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // SAFETY: we hold the room, which holds no value: a
                    // room is freed only once its value is moved out.
                    unsafe { entry.write(value) };
                    return Some((Placed::Inline, holding));
                }
                Err(actual) => current = EntryWord::from_bits(actual),
            }
        }
        if current.refuses(handle) {
            return None;
        }
        let stored = self.values.insert_or(Stored::Value(value), values_full);
        Some((Placed::Pooled(stored), current))
    }

    /// Drops the value of a refused insert, which no word ever named.
    fn give_back(&self, entry: &Entry<V>, placed: Placed) {
        match placed {
            Placed::Inline => {
                // SAFETY: we hold the room and wrote the value there; no
                // word named it, so nobody else reads it.
                let value = unsafe { entry.take() };
                free_room(entry);
                drop(value);
            }
            Placed::Pooled(stored) => {
                let removed = self.values.remove(stored);
                debug_assert!(removed, "a value no entry named was removed");
            }
        }
    }

    /// Removes the value `handle` refers to; `false` if it was not there.
    pub(crate) fn remove(&self, handle: Handle) -> bool {
        let Some(entry) = self.table.find(handle.index()) else {
            return false;
        };
        // Relaxed: the CAS below decides.
        let mut current = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
        while current.holds(handle) {
            // The room stays held: by whoever held it, or, for an `INLINE`
            // value, by the retired cell that takes it over.
            let vacant = EntryWord::vacant(current.room_held());
            // Acquire pairs with the Release CAS that stored `current`: the
            // value's place is visible to `retire`.
            match entry.word().compare_exchange(
                current.to_bits(),
                vacant.to_bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.counts.add(-1);
                    self.retire(entry, current);
                    return true;
                }
                // Another generation's value, or vacant: the loop ends;
                // the same generation's replacement, or the room freed or
                // held meanwhile: again.
                Err(actual) => current = EntryWord::from_bits(actual),
            }
        }
        false
    }

    /// Retires the value of `word`, which this thread just took out of
    /// `entry` (its CAS won): it is dropped once no reader can see it.
    fn retire(&self, entry: &Entry<V>, word: EntryWord) {
        let stored = match word.place() {
            Some(Place::Inline) => {
                // SAFETY: our CAS took the `INLINE` word out, leaving the
                // room held, so the room, holding its value, is ours; the
                // table outlives the value pool.
                let retired = unsafe { RetiredCell::new(entry) };
                match self.values.insert(Stored::Retired(retired)) {
                    Ok(stored) => stored,
                    Err(cell) => {
                        // The value pool is full. Readers that loaded the
                        // `INLINE` word may still be reading the value: the
                        // cell must not drop (which drops the value and
                        // frees the room) while they may, so not here as
                        // the panic unwinds. Kept aside, value and room,
                        // until `&mut` of the map.
                        self.leaked
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(cell);
                        values_full()
                    }
                }
            }
            Some(Place::Pooled(slot)) => value_handle(&self.values, slot),
            None => return,
        };
        let removed = self.values.remove(stored);
        debug_assert!(removed, "a value taken out of an entry was removed");
    }

    /// The value `handle` refers to, mutably.
    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut V> {
        let found = self.find(handle)?;
        // SAFETY: the word names the place; `&mut self` excludes every
        // other access for the returned lifetime.
        Some(unsafe { found.value_mut() })
    }

    /// Takes the value `handle` refers to out of the map.
    pub(crate) fn take(&mut self, handle: Handle) -> Option<V> {
        let entry = self.table.find(handle.index())?;
        // Relaxed: `&mut self`.
        let word = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
        if !word.holds(handle) {
            return None;
        }
        self.counts.add(-1);
        Some(take_entry(&mut self.values, entry, word))
    }

    /// Keeps the values `keep` says to keep. A panic in `keep` or in a
    /// value's `Drop` leaves the map consistent: the entries visited before
    /// are kept or removed as decided, the others kept.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Handle, &mut V) -> bool) {
        for (index, entry) in self.table.entries() {
            // Relaxed: `&mut self`.
            let word = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
            let Some(place) = word.place() else { continue };
            let found = Found::at(entry, self.values.storage(), place);
            // SAFETY: the word names the place; `&mut self` is exclusive,
            // and the reference ends before the value is taken out below.
            let value = unsafe { found.value_mut() };
            if !keep(Handle::new(index, word.generation()), value) {
                self.counts.add(-1);
                drop(take_entry(&mut self.values, entry, word));
            }
        }
    }

    /// Removes every value, dropping each; the first panic of a value's
    /// `Drop` is raised once every value is dropped and the map is empty.
    pub(crate) fn clear(&mut self) {
        let mut panic = vacate_all(&mut self.values, self.table.entries());
        keep_first(&mut panic, self.drop_leaked());
        self.counts.clear();
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
    }

    /// A cursor over the occupied entries (for `iter`, `iter_mut`).
    pub(crate) fn occupied(&self) -> Occupied<'_, V> {
        Occupied {
            entries: self.table.entries(),
            slots: self.values.storage(),
        }
    }

    /// The map taken apart for a drain: its entries, its value pool
    /// mutably, and its length shares.
    pub(crate) fn drained(&mut self) -> Drained<'_, V> {
        Drained {
            entries: self.table.entries(),
            values: &mut self.values,
            counts: &self.counts,
        }
    }
}

impl<V> RawSecondary<V> {
    /// Drops the retired cells the value pool had no slot for (see
    /// `leaked`), which drop their values and free their rooms; returns the
    /// first panic of a value's `Drop`. `&mut`: no reader is left.
    fn drop_leaked(&mut self) -> Option<Panic> {
        let leaked = self
            .leaked
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut first_panic = None;
        for cell in leaked.drain(..) {
            keep_first(&mut first_panic, drop_catching(cell));
        }
        first_panic
    }
}

impl<V> Drop for RawSecondary<V> {
    fn drop(&mut self) {
        // The values in rooms, then every value of the value pool (pooled
        // values and retired cells, which drop the values of their rooms),
        // and the retired cells kept aside, while the table, into which
        // retired cells point, still exists.
        let mut panic = vacate_all(&mut self.values, self.table.entries());
        keep_first(&mut panic, self.drop_leaked());
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
    }
}

/// What [`RawSecondary::place`] did with a value.
#[derive(Clone, Copy)]
enum Placed {
    Inline,
    Pooled(Handle),
}

impl Placed {
    fn place(self) -> Place {
        match self {
            Placed::Inline => Place::Inline,
            Placed::Pooled(stored) => Place::Pooled(stored.index()),
        }
    }
}

/// Vacates an `INLINE` or `POOLED` entry and takes its value out, in that
/// order: no word names a value that is gone, even if dropping the value
/// then panics. The caller holds `&mut` of the map.
fn take_entry<V>(values: &mut RawPool<Stored<V>>, entry: &Entry<V>, word: EntryWord) -> V {
    match word.place() {
        Some(Place::Inline) => {
            // Relaxed (this store and the next): `&mut`. The room is free
            // again once its value is out.
            entry
                .word()
                .store(EntryWord::VACANT.to_bits(), Ordering::Relaxed);
            // SAFETY: the word named the room, so it holds the entry's
            // value, and `&mut` means nobody reads it.
            unsafe { entry.take() }
        }
        Some(Place::Pooled(slot)) => {
            // The room stays as it was: a retired cell may hold it.
            let vacant = EntryWord::vacant(word.room_held());
            entry.word().store(vacant.to_bits(), Ordering::Relaxed);
            let handle = value_handle(values, slot);
            match values.take(handle) {
                Some(stored) => stored.into_value(),
                None => unnamed_value(slot, handle.to_bits()),
            }
        }
        None => unreachable!("take_entry of a vacant entry"),
    }
}

/// Vacates every entry of `entries` and drops every value: those in rooms
/// here, then every value of the value pool (pooled values, those awaiting
/// reclamation, and retired cells, which drop the values of their rooms
/// and free them). Every value is dropped even if some `Drop` panics;
/// returns the first panic. The caller holds `&mut` of the map.
fn vacate_all<'a, V: 'a>(
    values: &mut RawPool<Stored<V>>,
    entries: impl Iterator<Item = (u32, &'a Entry<V>)>,
) -> Option<Panic> {
    let mut first_panic = None;
    for (_, entry) in entries {
        // Relaxed (loads and stores): `&mut`.
        let word = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
        match word.place() {
            Some(Place::Inline) => {
                entry
                    .word()
                    .store(EntryWord::VACANT.to_bits(), Ordering::Relaxed);
                // SAFETY: the word named the room, so it holds the entry's
                // value, and `&mut` means nobody reads it.
                let value = unsafe { entry.take() };
                keep_first(&mut first_panic, drop_catching(value));
            }
            Some(Place::Pooled(_)) => {
                // The value goes with the value pool's below; a retired
                // cell may hold the room.
                let vacant = EntryWord::vacant(word.room_held());
                entry.word().store(vacant.to_bits(), Ordering::Relaxed);
            }
            None => {}
        }
    }
    keep_first(&mut first_panic, values.reclaim_all(true));
    first_panic
}

/// The occupied entries of a range of indices, in index order: each as its
/// handle and where its value is.
pub(crate) struct Occupied<'a, V> {
    entries: Entries<'a, V>,
    slots: &'a Storage<Stored<V>>,
}

impl<'a, V> Iterator for Occupied<'a, V> {
    type Item = (Handle, Found<'a, V>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        for (index, entry) in &mut self.entries {
            // Acquire pairs with the insert's Release CAS, as in `find`.
            let word = EntryWord::from_bits(entry.word().load(Ordering::Acquire));
            if let Some(place) = word.place() {
                let handle = Handle::new(index, word.generation());
                return Some((handle, Found::at(entry, self.slots, place)));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl<V> Occupied<'_, V> {
    /// Splits the indices left in two (see `Entries::split_off`).
    #[cfg(feature = "rayon")]
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        Some(Occupied {
            entries: self.entries.split_off()?,
            slots: self.slots,
        })
    }
}

/// A drain's state: the entries left to visit, the value pool, the length.
pub(crate) struct Drained<'a, V> {
    entries: Entries<'a, V>,
    values: &'a mut RawPool<Stored<V>>,
    counts: &'a Counts,
}

impl<V> Iterator for Drained<'_, V> {
    type Item = (Handle, V);

    fn next(&mut self) -> Option<Self::Item> {
        for (index, entry) in &mut self.entries {
            // Relaxed: the map is borrowed mutably.
            let word = EntryWord::from_bits(entry.word().load(Ordering::Relaxed));
            if !word.is_vacant() {
                let handle = Handle::new(index, word.generation());
                self.counts.add(-1);
                return Some((handle, take_entry(self.values, entry, word)));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.counts.sum()))
    }
}

// SAFETY: a `Drained` borrows the map mutably and moves values out of it:
// sending it sends those values, which needs `V: Send` (as for
// `std::vec::Drain`); it never hands out a `&V`. What else it touches, the
// words of the entries it visits and their rooms, the value pool and the length
// shares, are the map's alone while it is borrowed.
unsafe impl<V: Send> Send for Drained<'_, V> {}

// SAFETY: `&Drained` reaches nothing (`next` needs `&mut`); `Sync` follows
// `V: Sync`, as for `std::vec::Drain`.
unsafe impl<V: Sync> Sync for Drained<'_, V> {}

impl<V> Drained<'_, V> {
    /// Vacates every entry left and drops every value still in the map;
    /// the first panic of a value's `Drop` is raised once every value is
    /// dropped.
    pub(crate) fn finish(&mut self) {
        let panic = vacate_all(self.values, &mut self.entries);
        self.counts.clear();
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
    }
}

/// The map's length as shares, one cache line each, that a thread adds to
/// by its number (as the pool's stripes keep theirs): inserts on different
/// threads do not write one line.
struct Counts {
    shares: Box<[CachePadded<AtomicIsize>]>,
}

impl Counts {
    fn new(shares: usize) -> Self {
        Counts {
            shares: (0..shares.next_power_of_two())
                .map(|_| CachePadded::new(AtomicIsize::new(0)))
                .collect(),
        }
    }

    #[inline]
    fn add(&self, delta: isize) {
        let share = thread_id().unwrap_or(0) & (self.shares.len() - 1);
        // Relaxed: a count, read as a sum (see `sum`).
        self.shares[share].fetch_add(delta, Ordering::Relaxed);
    }

    /// The sum of the shares: exact when no operation is in flight. Read
    /// one after another, so under concurrency a removal may be counted
    /// without its insert; such a transient underflow reads as 0.
    fn sum(&self) -> usize {
        let sum: isize = self
            .shares
            .iter()
            // Relaxed: see above.
            .map(|share| share.load(Ordering::Relaxed))
            .sum();
        sum.max(0) as usize
    }

    /// All shares 0 (the map is empty; the caller holds `&mut` of it).
    fn clear(&self) {
        for share in self.shares.iter() {
            // Relaxed: `&mut` of the map.
            share.store(0, Ordering::Relaxed);
        }
    }
}
