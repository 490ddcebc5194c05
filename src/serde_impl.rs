//! `serde` support (feature `serde`).
//!
//! # Handles
//!
//! A handle serializes as its 64-bit value ([`Handle::to_bits`]), and
//! deserializing rejects bits no insert could produce. Handle types made
//! with [`new_handle_type!`](crate::new_handle_type) do the same.
//!
//! # Pools
//!
//! A pool serializes as a struct `HandlePool` with one field, `slots`: a
//! sequence of entries that describe, in index order, every slot the pool
//! has handed out. An entry is an enum with three variants:
//!
//! - `Vacant(generation)`: one slot with no value; `generation` is that of
//!   the slot's last occupant (0 if it never had one);
//! - `Live(generation, value)`: one slot, where the handle
//!   `(index, generation)` resolves to `value`;
//! - `VacantRun(generation, count)`: `count` consecutive vacant slots (2 to
//!   65,536 of them) whose last occupants all had `generation`.
//!
//! So a sparse pool serializes in proportion to its live values plus its
//! vacant runs: a million slots holding ten values is a few hundred bytes
//! of JSON. In JSON, a pool with `"a"` and `"c"` live, the value between
//! them removed and three fresh slots after them reads
//! `{"slots":[{"Live":[1,"a"]},{"Vacant":1},{"Live":[1,"c"]},{"VacantRun":[0,3]}]}`.
//! Binary formats (bincode, postcard) get the struct as a one-element tuple
//! and the sequence with its length up front. Documents written before
//! runs existed (every vacant slot a `Vacant` entry) load unchanged.
//!
//! Deserializing gives a pool with exactly these slots: the live handles
//! resolve, every vacant slot keeps its generation (a slot at the
//! generation limit stays retired), so a handle that was stale in the
//! serialized pool stays stale in the restored one, and later inserts never
//! hand it out again.
//!
//! ## What a document may cost
//!
//! The position of a slot in the sequence is its index, so a document
//! cannot list a slot twice, cannot leave one out, and cannot name an index
//! it does not pay for with an entry. The entries are read one by one (a
//! length the input announces preallocates at most 4096 of them, and at
//! most 64 KiB) and kept until every one is checked: a 4-byte tag per
//! entry (two per run) and the live entries' values. A document that is
//! rejected therefore costs a small multiple of the entries it actually
//! contains. A document that loads becomes a pool of the slots it
//! describes: at most `2 * slots + 64` of them are allocated, a slot per
//! `Vacant` or `Live` entry and up to 65,536 per `VacantRun`, each holding
//! room for a value (`size_of::<T>()` and 8 bytes, rounded to `T`'s
//! alignment), as in any slot map: the pool gives each index its slot. A
//! program that loads untrusted documents should bound their size
//! accordingly.
//! Generations out of range, runs of 0 or more than 65,536 slots, more than
//! `MAX_INDEX + 1` slots, unknown, repeated or missing fields are errors
//! that name the problem.
//!
//! ## Serializing a pool other threads are changing
//!
//! Serializing reads `slots_used` once, then reads the slots twice: the
//! first pass finds the vacant runs, the second writes them as they were
//! then, and reads each other slot again, once, for its entry, under a
//! guard that keeps every value it shows alive until it is written, even
//! if another thread removes it meanwhile (repinned every few dozen slots,
//! so that a long serialization does not hold reclamation back
//! throughout). Each slot is thus described by a state it actually had
//! during the call, and a handle removed before the call began cannot
//! resolve in the restored pool. Different slots may be read at different
//! moments, as with [`HandlePool::iter`]. The runs are held between the
//! passes: 12 bytes per run.

use core::fmt;
use core::marker::PhantomData;

use core::convert::Infallible;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde::ser::{SerializeSeq, SerializeStruct, SerializeTupleVariant, Serializer};
use serde::{Deserialize, Serialize};

use crate::handle::{Handle, PoolHandle};
use crate::pool::HandlePool;
use crate::raw::{RawPool, ReadEntries, SlotEntry};

/// The name of the pool struct in the serde data model.
const POOL: &str = "HandlePool";
/// Its one field.
const FIELDS: &[&str] = &["slots"];
/// The name of the entry enum in the serde data model.
const ENTRY: &str = "Slot";
/// Its variants, in variant-index order.
const VARIANTS: &[&str] = &["Vacant", "Live", "VacantRun"];
/// The most slots one `VacantRun` entry describes: a longer run is written
/// as several entries, and a document with a longer one is refused.
const MAX_RUN: u32 = 1 << 16;
/// The most entries a length announced by the input may preallocate.
const MAX_PREALLOCATED_ENTRIES: usize = 4096;
/// The most bytes a length announced by the input may preallocate.
const MAX_PREALLOCATED_BYTES: usize = 64 * 1024;

impl Serialize for Handle {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.to_bits())
    }
}

impl<'de> Deserialize<'de> for Handle {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bits = u64::deserialize(deserializer)?;
        Handle::from_bits(bits)
            .ok_or_else(|| de::Error::custom(format_args!("{bits:#x} is not a valid handle")))
    }
}

impl<T: Serialize, H: PoolHandle> Serialize for HandlePool<T, H> {
    /// Every slot handed out, each described by one read of it: under
    /// concurrent inserts and removes, every entry is a state its slots
    /// had during the call, so a handle removed before the call cannot
    /// resolve in the restored pool.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = self.raw();
        // At most `max_slots`, a `u32`.
        let len = raw.slots_used() as u32;
        let mut state = serializer.serialize_struct(POOL, FIELDS.len())?;
        state.serialize_field(FIELDS[0], &SerializedSlots { raw, len })?;
        state.end()
    }
}

/// The `slots` sequence of a pool being serialized: its first `len` slots.
struct SerializedSlots<'a, T> {
    raw: &'a RawPool<T>,
    len: u32,
}

impl<T: Serialize> Serialize for SerializedSlots<'_, T> {
    /// The vacant runs found by a first pass, each as one entry, and every
    /// other slot read once more, for an entry of its own: the sequence's
    /// length, which binary formats write first, is known before the
    /// second pass, whatever other threads change meanwhile.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let runs = vacant_runs(self.raw, self.len);
        let in_runs: u32 = runs.iter().map(|run| run.count).sum();
        let entries = (self.len - in_runs) as usize + runs.len();
        let mut seq = serializer.serialize_seq(Some(entries))?;
        let mut runs_left = runs.iter().peekable();
        // The indices `read_slots` reads, to know which one each entry is.
        let mut indices = Outside::new(&runs, self.len);
        self.raw
            .read_slots(Outside::new(&runs, self.len), |entry| {
                let index = indices.next().expect("the same indices, in order");
                while let Some(run) = runs_left.next_if(|run| run.start < index) {
                    seq.serialize_element(run)?;
                }
                seq.serialize_element(&entry)
            })?;
        for run in runs_left {
            seq.serialize_element(run)?;
        }
        seq.end()
    }
}

/// Consecutive vacant slots whose last occupants had one generation, as a
/// `VacantRun` entry describes them.
struct VacantRun {
    start: u32,
    count: u32,
    generation: u32,
}

/// The vacant runs of 2 to [`MAX_RUN`] slots among the first `len` slots of
/// `raw`, in index order, from one read of each slot.
fn vacant_runs<T>(raw: &RawPool<T>, len: u32) -> Vec<VacantRun> {
    /// Keeps `open` if it is a run (2 slots or more).
    fn close(open: Option<VacantRun>, runs: &mut Vec<VacantRun>) {
        runs.extend(open.filter(|run| run.count >= 2));
    }
    let mut runs = Vec::new();
    let mut open: Option<VacantRun> = None;
    let mut index = 0;
    let read: Result<(), Infallible> = raw.read_slots(0..len, |entry| {
        match (entry, &mut open) {
            (SlotEntry::Vacant(generation), Some(run))
                if run.generation == generation && run.count < MAX_RUN =>
            {
                run.count += 1;
            }
            (SlotEntry::Vacant(generation), _) => {
                close(open.take(), &mut runs);
                open = Some(VacantRun {
                    start: index,
                    count: 1,
                    generation,
                });
            }
            (SlotEntry::Live(..), _) => close(open.take(), &mut runs),
        }
        index += 1;
        Ok(())
    });
    let Ok(()) = read;
    close(open, &mut runs);
    runs
}

/// The indices `0..end` outside `runs` (sorted, disjoint), in order.
struct Outside<'a> {
    runs: &'a [VacantRun],
    next: u32,
    end: u32,
}

impl<'a> Outside<'a> {
    fn new(runs: &'a [VacantRun], end: u32) -> Self {
        Outside { runs, next: 0, end }
    }
}

impl Iterator for Outside<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while let Some((run, rest)) = self.runs.split_first() {
            if self.next < run.start {
                break;
            }
            self.next = self.next.max(run.start + run.count);
            self.runs = rest;
        }
        let index = self.next;
        (index < self.end).then(|| {
            self.next += 1;
            index
        })
    }
}

impl Serialize for VacantRun {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut variant = serializer.serialize_tuple_variant(ENTRY, 2, VARIANTS[2], 2)?;
        variant.serialize_field(&self.generation)?;
        variant.serialize_field(&self.count)?;
        variant.end()
    }
}

impl<V: Serialize> Serialize for SlotEntry<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SlotEntry::Vacant(generation) => {
                serializer.serialize_newtype_variant(ENTRY, 0, VARIANTS[0], generation)
            }
            SlotEntry::Live(generation, value) => {
                let mut variant = serializer.serialize_tuple_variant(ENTRY, 1, VARIANTS[1], 2)?;
                variant.serialize_field(generation)?;
                variant.serialize_field(value)?;
                variant.end()
            }
        }
    }
}

impl<'de, T: Deserialize<'de>, H: PoolHandle> Deserialize<'de> for HandlePool<T, H> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct(POOL, FIELDS, PoolVisitor(PhantomData))
    }
}

/// Reads the pool struct, as a map (self-describing formats) or as a
/// one-element sequence (bincode, postcard, or any format given a tuple).
struct PoolVisitor<T, H>(PhantomData<fn() -> (T, H)>);

impl<'de, T: Deserialize<'de>, H: PoolHandle> Visitor<'de> for PoolVisitor<T, H> {
    type Value = HandlePool<T, H>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a handle pool: struct HandlePool { slots: [Vacant(generation), Live(generation, value) or VacantRun(generation, count)] }")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut pool = HandlePool::with_handle_type();
        let mut entries = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Slots if entries.is_some() => {
                    return Err(de::Error::duplicate_field(FIELDS[0]))
                }
                Field::Slots => entries = Some(map.next_value_seed(SlotsSeed(&pool))?),
            }
        }
        let entries = entries.ok_or_else(|| de::Error::missing_field(FIELDS[0]))?;
        pool.raw_mut().restore(entries).map_err(de::Error::custom)?;
        Ok(pool)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut pool = HandlePool::with_handle_type();
        let entries = seq
            .next_element_seed(SlotsSeed(&pool))?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(2, &self));
        }
        pool.raw_mut().restore(entries).map_err(de::Error::custom)?;
        Ok(pool)
    }
}

/// The pool struct's field names.
enum Field {
    Slots,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

struct FieldVisitor;

impl Visitor<'_> for FieldVisitor {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the field `slots`")
    }

    fn visit_u64<E: de::Error>(self, index: u64) -> Result<Field, E> {
        match index {
            0 => Ok(Field::Slots),
            _ => Err(de::Error::invalid_value(
                de::Unexpected::Unsigned(index),
                &"field index 0",
            )),
        }
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Field, E> {
        match name {
            "slots" => Ok(Field::Slots),
            _ => Err(de::Error::unknown_field(name, FIELDS)),
        }
    }

    fn visit_bytes<E: de::Error>(self, name: &[u8]) -> Result<Field, E> {
        match name {
            b"slots" => Ok(Field::Slots),
            _ => Err(de::Error::unknown_field(
                &String::from_utf8_lossy(name),
                FIELDS,
            )),
        }
    }
}

/// Reads the `slots` sequence entry by entry, checking each against the
/// pool it is for as soon as it is read.
struct SlotsSeed<'a, T, H>(&'a HandlePool<T, H>);

impl<'de, T: Deserialize<'de>, H: PoolHandle> DeserializeSeed<'de> for SlotsSeed<'_, T, H> {
    type Value = ReadEntries<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>, H: PoolHandle> Visitor<'de> for SlotsSeed<'_, T, H> {
    type Value = ReadEntries<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of slot entries")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let raw = self.0.raw();
        // Never trust an announced length: it only saves a few reallocations.
        let mut entries = ReadEntries::with_capacity(cautious_capacity::<u32>(seq.size_hint()));
        while let Some(entry) = seq.next_element::<ReadEntry<T>>()? {
            let index = entries.len();
            match entry {
                ReadEntry::Slot(entry) => {
                    raw.check_entry(index, &entry).map_err(de::Error::custom)?;
                    entries.push(entry);
                }
                ReadEntry::Run(generation, count) => {
                    if !(1..=MAX_RUN).contains(&count) {
                        return Err(de::Error::custom(format_args!(
                            "slot {index}: a vacant run of {count} slots (runs have 1 to {MAX_RUN})"
                        )));
                    }
                    let last = index + (count - 1) as usize;
                    for at in [index, last] {
                        raw.check_entry(at, &SlotEntry::<T>::Vacant(generation))
                            .map_err(de::Error::custom)?;
                    }
                    entries.push_run(generation, count);
                }
            }
        }
        Ok(entries)
    }
}

/// An entry as read: one slot, or a run of vacant slots.
enum ReadEntry<V> {
    Slot(SlotEntry<V>),
    /// `VacantRun(generation, count)`, not checked yet.
    Run(u32, u32),
}

/// How many `E`s to preallocate for a sequence whose length the input
/// claims: never more than a few pages, whatever it claims.
fn cautious_capacity<E>(hint: Option<usize>) -> usize {
    let by_size = MAX_PREALLOCATED_BYTES / core::mem::size_of::<E>().max(1);
    hint.unwrap_or(0).min(MAX_PREALLOCATED_ENTRIES).min(by_size)
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for ReadEntry<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_enum(ENTRY, VARIANTS, EntryVisitor(PhantomData))
    }
}

struct EntryVisitor<V>(PhantomData<fn() -> V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for EntryVisitor<V> {
    type Value = ReadEntry<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a slot entry: Vacant(generation), Live(generation, value) or VacantRun(generation, count)")
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        match data.variant::<Variant>()? {
            (Variant::Vacant, access) => Ok(ReadEntry::Slot(SlotEntry::Vacant(
                access.newtype_variant()?,
            ))),
            (Variant::Live, access) => access
                .tuple_variant(2, LiveVisitor(PhantomData))
                .map(ReadEntry::Slot),
            (Variant::VacantRun, access) => access.tuple_variant(2, RunVisitor(PhantomData)),
        }
    }
}

/// The entry enum's variant names.
enum Variant {
    Vacant,
    Live,
    VacantRun,
}

impl<'de> Deserialize<'de> for Variant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(VariantVisitor)
    }
}

struct VariantVisitor;

impl Visitor<'_> for VariantVisitor {
    type Value = Variant;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`Vacant`, `Live` or `VacantRun`")
    }

    fn visit_u64<E: de::Error>(self, index: u64) -> Result<Variant, E> {
        match index {
            0 => Ok(Variant::Vacant),
            1 => Ok(Variant::Live),
            2 => Ok(Variant::VacantRun),
            _ => Err(de::Error::invalid_value(
                de::Unexpected::Unsigned(index),
                &"variant index 0, 1 or 2",
            )),
        }
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Variant, E> {
        match name {
            "Vacant" => Ok(Variant::Vacant),
            "Live" => Ok(Variant::Live),
            "VacantRun" => Ok(Variant::VacantRun),
            _ => Err(de::Error::unknown_variant(name, VARIANTS)),
        }
    }

    fn visit_bytes<E: de::Error>(self, name: &[u8]) -> Result<Variant, E> {
        match name {
            b"Vacant" => Ok(Variant::Vacant),
            b"Live" => Ok(Variant::Live),
            b"VacantRun" => Ok(Variant::VacantRun),
            _ => Err(de::Error::unknown_variant(
                &String::from_utf8_lossy(name),
                VARIANTS,
            )),
        }
    }
}

/// The fields of a `Live` entry: generation, then value.
struct LiveVisitor<V>(PhantomData<fn() -> V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for LiveVisitor<V> {
    type Value = SlotEntry<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a live entry: (generation, value)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let generation = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let value = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(SlotEntry::Live(generation, value))
    }
}

/// The fields of a `VacantRun` entry: generation, then count.
struct RunVisitor<V>(PhantomData<fn() -> V>);

impl<'de, V> Visitor<'de> for RunVisitor<V> {
    type Value = ReadEntry<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a vacant run: (generation, count)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let generation = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let count = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok(ReadEntry::Run(generation, count))
    }
}

/// Serde impls for handle types made by [`new_handle_type!`](crate::new_handle_type).
#[doc(hidden)]
#[macro_export]
macro_rules! __serde_handle {
    ($name:ident) => {
        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                $crate::__serde::Serialize::serialize(
                    &$crate::PoolHandle::handle(*self),
                    serializer,
                )
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                let handle: $crate::Handle =
                    $crate::__serde::Deserialize::deserialize(deserializer)?;
                ::core::result::Result::Ok(<$name as $crate::PoolHandle>::from_handle(handle))
            }
        }
    };
}
