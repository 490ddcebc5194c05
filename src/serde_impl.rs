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
//! sequence with one entry for every slot the pool has handed out, in index
//! order, so that entry `i` is slot `i`. An entry is an enum with two
//! variants:
//!
//! - `Vacant(generation)`: no value; `generation` is that of the slot's last
//!   occupant (0 if it never had one);
//! - `Live(generation, value)`: the handle `(i, generation)` resolves to
//!   `value`.
//!
//! In JSON, a pool with `"a"` and `"c"` live and the value between them
//! removed reads `{"slots":[{"Live":[1,"a"]},{"Vacant":1},{"Live":[1,"c"]}]}`.
//! Binary formats (bincode, postcard) get the struct as a one-element tuple
//! and the sequence with its length up front.
//!
//! Deserializing gives a pool with exactly these slots: the live handles
//! resolve, every vacant slot keeps its generation (a slot at the
//! generation limit stays retired), so a handle that was stale in the
//! serialized pool stays stale in the restored one, and later inserts never
//! hand it out again.
//!
//! ## Why one entry per slot
//!
//! The position of an entry is its index, so a document cannot list a slot
//! twice, cannot leave one out, and cannot name an index it does not pay
//! for with an entry. A hostile document therefore costs at most a small
//! multiple of the number of entries it actually contains: the entries are
//! read one by one (a length the input announces preallocates at most 4096
//! of them, and at most 64 KiB), kept until every one is checked (a 4-byte
//! tag per entry, and the live entries' values), and the pool then
//! allocates at most `2 * entries + 64` slots. A slot holds room for a
//! value, so a vacant entry, two bytes in a compact format, still costs a
//! slot (`size_of::<T>()` and 8 bytes, rounded to `T`'s alignment), as
//! in any slot map: the pool gives each index its slot.
//! Generations out of range, more than `MAX_INDEX + 1` entries, unknown,
//! repeated or missing fields are errors that name the problem.
//!
//! ## Serializing a pool other threads are changing
//!
//! Serializing reads `slots_used` once, then each slot's word exactly once,
//! under a guard that keeps every value it shows alive until it is written,
//! even if another thread removes it meanwhile (repinned every few dozen
//! slots, so that a long serialization does not hold reclamation back
//! throughout). Each entry is thus a state its slot actually had during the
//! call, and a handle removed before the call began cannot resolve in the
//! restored pool. Different slots may be read at different moments, as
//! with [`HandlePool::iter`].

use core::fmt;
use core::marker::PhantomData;

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
const VARIANTS: &[&str] = &["Vacant", "Live"];
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
    /// One entry per slot handed out, each from one read of its slot: under
    /// concurrent inserts and removes, every entry is a state its slot had
    /// during the call, so a handle removed before the call cannot resolve
    /// in the restored pool.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = self.raw();
        // At most `max_slots`, a `u32`.
        let len = raw.slots_used() as u32;
        let mut state = serializer.serialize_struct(POOL, FIELDS.len())?;
        state.serialize_field(FIELDS[0], &SerializedSlots { raw, len })?;
        state.end()
    }
}

/// The `slots` sequence of a pool being serialized: exactly `len` entries.
struct SerializedSlots<'a, T> {
    raw: &'a RawPool<T>,
    len: u32,
}

impl<T: Serialize> Serialize for SerializedSlots<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len as usize))?;
        self.raw
            .read_slots(0..self.len, |entry| seq.serialize_element(&entry))?;
        seq.end()
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
        f.write_str("a handle pool: struct HandlePool { slots: [Vacant(generation) or Live(generation, value)] }")
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
        while let Some(entry) = seq.next_element::<SlotEntry<T>>()? {
            raw.check_entry(entries.len(), &entry)
                .map_err(de::Error::custom)?;
            entries.push(entry);
        }
        Ok(entries)
    }
}

/// How many `E`s to preallocate for a sequence whose length the input
/// claims: never more than a few pages, whatever it claims.
fn cautious_capacity<E>(hint: Option<usize>) -> usize {
    let by_size = MAX_PREALLOCATED_BYTES / core::mem::size_of::<E>().max(1);
    hint.unwrap_or(0).min(MAX_PREALLOCATED_ENTRIES).min(by_size)
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for SlotEntry<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_enum(ENTRY, VARIANTS, EntryVisitor(PhantomData))
    }
}

struct EntryVisitor<V>(PhantomData<fn() -> V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for EntryVisitor<V> {
    type Value = SlotEntry<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a slot entry: Vacant(generation) or Live(generation, value)")
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        match data.variant::<Variant>()? {
            (Variant::Vacant, access) => Ok(SlotEntry::Vacant(access.newtype_variant()?)),
            (Variant::Live, access) => access.tuple_variant(2, LiveVisitor(PhantomData)),
        }
    }
}

/// The entry enum's variant names.
enum Variant {
    Vacant,
    Live,
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
        f.write_str("`Vacant` or `Live`")
    }

    fn visit_u64<E: de::Error>(self, index: u64) -> Result<Variant, E> {
        match index {
            0 => Ok(Variant::Vacant),
            1 => Ok(Variant::Live),
            _ => Err(de::Error::invalid_value(
                de::Unexpected::Unsigned(index),
                &"variant index 0 or 1",
            )),
        }
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Variant, E> {
        match name {
            "Vacant" => Ok(Variant::Vacant),
            "Live" => Ok(Variant::Live),
            _ => Err(de::Error::unknown_variant(name, VARIANTS)),
        }
    }

    fn visit_bytes<E: de::Error>(self, name: &[u8]) -> Result<Variant, E> {
        match name {
            b"Vacant" => Ok(Variant::Vacant),
            b"Live" => Ok(Variant::Live),
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
