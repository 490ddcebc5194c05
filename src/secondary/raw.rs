//! The map without its handle type: the entry word's transitions (the state
//! table in `secondary::entry`), on raw [`Handle`]s, over the table of
//! entry words and the value pool.

use crate::config::Config;
use crate::guard::Guard;
use crate::handle::Handle;
use crate::hint::cold_path;
use crate::raw::RawPool;
use crate::slot::{Slot, SlotWord, State};
use crate::storage::Storage;
use crate::sync::{AtomicU64, Ordering};

use super::entry::EntryWord;
use super::table::{Table, Words};

/// A secondary map on raw handles.
pub(crate) struct RawSecondary<V> {
    /// The entry words, by slot index.
    table: Table,
    /// Every value an entry names, and those removed and not reclaimed yet.
    values: RawPool<V>,
}

/// The value pool's panic, out of line and cold.
#[cold]
#[inline(never)]
fn values_full() -> ! {
    panic!("SecondaryMap: the value pool is full (2^32 - 1 values live, awaiting reclamation or retired)")
}

/// The handle of the value in the value pool's slot `slot`, which an entry
/// named and the caller now owns (it won the CAS that took it out of the
/// entry, or holds `&mut`).
///
/// An `OCCUPIED` slot word is its handle's bits (see `docs/slot.md`).
fn value_handle<V>(values: &RawPool<V>, slot: u32) -> Handle {
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

impl<V> RawSecondary<V> {
    pub(crate) fn new(config: Config) -> Self {
        RawSecondary {
            table: Table::new(),
            values: RawPool::new(config),
        }
    }

    /// Allocates the entries of indices `0..capacity` and room for as many
    /// values.
    pub(crate) fn reserve(&self, capacity: usize) {
        self.table.reserve(capacity as u64);
        self.values.reserve(capacity);
    }

    /// Entries allocated.
    pub(crate) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Values in the map: the value pool's length (see "Lookups" in the
    /// module docs of `entry`).
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn flush(&self) {
        self.values.flush();
    }

    /// The value in the value pool's slot `slot`.
    ///
    /// # Safety
    /// An entry word naming `slot` was loaded with Acquire while this thread
    /// was protected (a guard, or a one-call read of the value pool) by a
    /// protection that lasts as long as the borrow of `slots`.
    #[inline(always)]
    unsafe fn value(slots: &Storage<V>, slot: u32) -> &V {
        // SAFETY: the entry's Acquire load saw the CAS that stored it, after
        // the value pool published the value in `slot`, so it is
        // initialised; it is removed from the pool only after a CAS took it
        // out of the entry, after our load, and the reader's protection,
        // announced before that load, keeps it from being reclaimed until
        // the borrow ends ("Lookups" in the module docs of `entry`). The
        // storage lives as long as that borrow.
        unsafe { slots.slot(slot).value_ref() }
    }

    /// Whether `handle` resolves.
    #[inline]
    pub(crate) fn contains(&self, handle: Handle) -> bool {
        // Acquire (in `load`) pairs with the insert's Release CAS: a `true`
        // orders this thread after the insert, as a `get` that finds it.
        EntryWord::from_bits(self.table.load(handle.index())).holds(handle)
    }

    /// The value `handle` refers to, protected by `guard`.
    #[inline]
    pub(crate) fn get<'g>(&'g self, handle: Handle, _guard: &'g Guard) -> Option<&'g V> {
        // Acquire (in `load`) pairs with the insert's Release CAS: the value
        // is published before the word names it.
        let word = EntryWord::from_bits(self.table.load(handle.index()));
        if !word.holds(handle) {
            cold_path();
            return None;
        }
        // SAFETY: the word was loaded with Acquire under `guard`, which
        // announced this thread before the load (a `Guard` can only be made
        // by announcing) and lives for `'g`.
        Some(unsafe { Self::value(self.values.storage(), word.value_slot()) })
    }

    /// Calls `f` with the value `handle` refers to, protected for the call
    /// by a one-call read of the value pool.
    #[inline]
    pub(crate) fn with<R>(&self, handle: Handle, f: impl FnOnce(&V) -> R) -> Option<R> {
        self.values.reclaimer().read(|| {
            // Acquire (in `load`): as in `get`.
            let word = EntryWord::from_bits(self.table.load(handle.index()));
            if !word.holds(handle) {
                return None;
            }
            // SAFETY: loaded with Acquire inside the one-call read, which
            // announced before the load and lasts until `f` returns.
            Some(f(unsafe {
                Self::value(self.values.storage(), word.value_slot())
            }))
        })
    }

    /// Stores `value` for `handle`, unless the entry holds a newer
    /// generation; returns whether it did. A value replaced is removed from
    /// the value pool; a value refused is dropped (now, or by reclamation if
    /// it was already in the value pool).
    pub(crate) fn insert(&self, handle: Handle, value: V) -> bool {
        let entry = self.table.find_or_grow(handle.index());
        // Relaxed: a first look, to refuse without publishing the value;
        // the CAS below decides.
        let mut current = EntryWord::from_bits(entry.load(Ordering::Relaxed));
        if current.refuses(handle) {
            return false;
        }
        let stored = self.values.insert_or(value, values_full);
        let new = EntryWord::occupied(handle.generation(), stored.index());
        loop {
            if current.refuses(handle) {
                // A newer generation came in meanwhile. No word named our
                // value, so nobody read it: it goes the way of any removed
                // value.
                let removed = self.values.remove(stored);
                debug_assert!(removed, "a value no entry named was removed");
                return false;
            }
            // Release pairs with the Acquire loads of lookups and with the
            // Acquire of the CAS that takes this word out: our value's
            // publication in the value pool comes before. Acquire pairs with
            // the Release CAS that stored `current`, so that a replaced
            // value's slot word is visible to `retire`.
            match entry.compare_exchange(
                current.to_bits(),
                new.to_bits(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if !current.is_vacant() {
                        self.retire(current.value_slot());
                    }
                    return true;
                }
                Err(actual) => current = EntryWord::from_bits(actual),
            }
        }
    }

    /// Removes the value `handle` refers to; `false` if it was not there.
    pub(crate) fn remove(&self, handle: Handle) -> bool {
        let Some(entry) = self.table.find(handle.index()) else {
            return false;
        };
        // Relaxed: the CAS below decides.
        let mut current = EntryWord::from_bits(entry.load(Ordering::Relaxed));
        while current.holds(handle) {
            // Acquire pairs with the Release CAS that stored `current`: the
            // value's slot word is visible to `retire`.
            match entry.compare_exchange(
                current.to_bits(),
                EntryWord::VACANT.to_bits(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.retire(current.value_slot());
                    return true;
                }
                // Another generation's value, or vacant: the loop ends;
                // the same generation's replacement: again.
                Err(actual) => current = EntryWord::from_bits(actual),
            }
        }
        false
    }

    /// Removes from the value pool the value in `slot`, which this thread
    /// just took out of an entry (its CAS won): it is dropped once no
    /// reader can see it.
    fn retire(&self, slot: u32) {
        let removed = self.values.remove(value_handle(&self.values, slot));
        debug_assert!(removed, "a value taken out of an entry was removed");
    }

    /// The value `handle` refers to, mutably.
    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut V> {
        // Acquire (in `load`) is not needed under `&mut`; it costs nothing
        // beside the exclusive operations' other work.
        let word = EntryWord::from_bits(self.table.load(handle.index()));
        if !word.holds(handle) {
            return None;
        }
        let slot = self.values.storage().slot(word.value_slot());
        // SAFETY: the entry names the slot, so its value is live in the
        // value pool; `&mut self` excludes every other access for the
        // returned lifetime.
        Some(unsafe { slot.value_mut() })
    }

    /// Takes the value `handle` refers to out of the map.
    pub(crate) fn take(&mut self, handle: Handle) -> Option<V> {
        let entry = self.table.find(handle.index())?;
        // Relaxed: `&mut self`.
        let word = EntryWord::from_bits(entry.load(Ordering::Relaxed));
        if !word.holds(handle) {
            return None;
        }
        Some(take_entry(&mut self.values, entry, word))
    }

    /// Keeps the values `keep` says to keep. A panic in `keep` or in a
    /// value's `Drop` leaves the map consistent: the entries visited before
    /// are kept or removed as decided, the others kept.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Handle, &mut V) -> bool) {
        for (index, entry) in self.table.words() {
            // Relaxed: `&mut self`.
            let word = EntryWord::from_bits(entry.load(Ordering::Relaxed));
            if word.is_vacant() {
                continue;
            }
            let slot = self.values.storage().slot(word.value_slot());
            // SAFETY: the entry names the slot, so its value is live; `&mut
            // self` is exclusive, and the reference ends before the value is
            // taken out below.
            let value = unsafe { slot.value_mut() };
            if !keep(Handle::new(index, word.generation()), value) {
                drop(take_entry(&mut self.values, entry, word));
            }
        }
    }

    /// Removes every value, dropping each; the first panic of a value's
    /// `Drop` is raised once every value is dropped and the map is empty.
    pub(crate) fn clear(&mut self) {
        for (_, entry) in self.table.words() {
            // Relaxed: `&mut self`.
            entry.store(EntryWord::VACANT.to_bits(), Ordering::Relaxed);
        }
        // Every value: those the entries named and those awaiting
        // reclamation, in one pass that drops them all whatever their
        // `Drop`s do.
        if let Some(panic) = self.values.reclaim_all(true) {
            std::panic::resume_unwind(panic);
        }
    }

    /// A cursor over the occupied entries (for `iter`, `iter_mut`).
    pub(crate) fn occupied(&self) -> Occupied<'_, V> {
        Occupied {
            words: self.table.words(),
            slots: self.values.storage(),
        }
    }

    /// The map taken apart for a drain: its entry words, and its value
    /// pool mutably.
    pub(crate) fn drained(&mut self) -> Drained<'_, V> {
        Drained {
            words: self.table.words(),
            values: &mut self.values,
        }
    }
}

/// Vacates an `OCCUPIED` entry and takes its value out of the value pool,
/// in that order: an entry never names a value the pool gave up, even if
/// dropping the value then panics. The caller holds `&mut` of the map.
fn take_entry<V>(values: &mut RawPool<V>, entry: &AtomicU64, word: EntryWord) -> V {
    // Relaxed: `&mut`.
    entry.store(EntryWord::VACANT.to_bits(), Ordering::Relaxed);
    let handle = value_handle(values, word.value_slot());
    match values.take(handle) {
        Some(value) => value,
        None => unnamed_value(word.value_slot(), handle.to_bits()),
    }
}

/// The occupied entries of a range of indices, in index order: each as its
/// handle and the value pool's slot holding its value.
pub(crate) struct Occupied<'a, V> {
    words: Words<'a>,
    slots: &'a Storage<V>,
}

impl<'a, V> Iterator for Occupied<'a, V> {
    type Item = (Handle, &'a Slot<V>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        for (index, entry) in &mut self.words {
            // Acquire pairs with the insert's Release CAS, as in `get`.
            let word = EntryWord::from_bits(entry.load(Ordering::Acquire));
            if !word.is_vacant() {
                let handle = Handle::new(index, word.generation());
                return Some((handle, self.slots.slot(word.value_slot())));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.words.size_hint()
    }
}

impl<V> Occupied<'_, V> {
    /// Splits the indices left in two (see `Words::split_off`).
    #[cfg(feature = "rayon")]
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        Some(Occupied {
            words: self.words.split_off()?,
            slots: self.slots,
        })
    }
}

/// A drain's state: the entry words left to visit, and the value pool.
pub(crate) struct Drained<'a, V> {
    words: Words<'a>,
    values: &'a mut RawPool<V>,
}

impl<V> Iterator for Drained<'_, V> {
    type Item = (Handle, V);

    fn next(&mut self) -> Option<Self::Item> {
        for (index, entry) in &mut self.words {
            // Relaxed: the map is borrowed mutably.
            let word = EntryWord::from_bits(entry.load(Ordering::Relaxed));
            if !word.is_vacant() {
                let handle = Handle::new(index, word.generation());
                return Some((handle, take_entry(self.values, entry, word)));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.values.len()))
    }
}

impl<V> Drained<'_, V> {
    /// Vacates every entry left and drops every value still in the value
    /// pool; the first panic of a value's `Drop` is raised once every value
    /// is dropped.
    pub(crate) fn finish(&mut self) {
        for (_, entry) in &mut self.words {
            // Relaxed: the map is borrowed mutably.
            entry.store(EntryWord::VACANT.to_bits(), Ordering::Relaxed);
        }
        if let Some(panic) = self.values.reclaim_all(true) {
            std::panic::resume_unwind(panic);
        }
    }
}
