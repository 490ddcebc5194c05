//! `serde` support (feature `serde`).
//!
//! A handle serialises as its 64-bit value ([`Handle::to_bits`]) and
//! deserialising rejects bits no insert could produce. A pool serialises as
//! a struct of two sequences: `live`, its `(handle, value)` pairs, and
//! `vacant`, the `(index, generation)` of every other slot that was ever
//! used. Deserialising builds a pool in which exactly the live handles
//! resolve; the vacant slots keep their generations (and retired slots stay
//! retired), so every handle that was stale before stays stale.

use core::fmt;
use core::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::handle::{Handle, PoolHandle};
use crate::pool::HandlePool;
use crate::slot::{SlotWord, State};
use crate::sync::Ordering;

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

/// Serialises the `live` entries of a pool (pinning while it reads them).
struct Live<'a, T, H>(&'a HandlePool<T, H>);

impl<T: Serialize, H: PoolHandle> Serialize for Live<'_, T, H> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let guard = crate::pin();
        serializer.collect_seq(
            self.0
                .iter(&guard)
                .map(|(handle, value)| (handle.handle(), value)),
        )
    }
}

/// Serialises the `vacant` slots of a pool: every slot ever used that holds
/// no live value, with the generation a stale handle to it may carry.
struct Vacant<'a, T, H>(&'a HandlePool<T, H>);

impl<T, H: PoolHandle> Serialize for Vacant<'_, T, H> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let shared = self.0.shared();
        serializer.collect_seq(shared.storage.slots(shared.used_slots()).filter_map(
            |(index, slot)| {
                let word = SlotWord::from_bits(slot.word.load(Ordering::Relaxed));
                let vacant = word.state() != State::Occupied && word.generation() > 0;
                vacant.then_some((index, word.generation()))
            },
        ))
    }
}

impl<T: Serialize, H: PoolHandle> Serialize for HandlePool<T, H> {
    /// Under concurrent inserts and removes, every live entry written was
    /// live at the moment its slot was read (as for [`HandlePool::iter`]).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("HandlePool", 2)?;
        state.serialize_field("live", &Live(self))?;
        state.serialize_field("vacant", &Vacant(self))?;
        state.end()
    }
}

impl<'de, T: Deserialize<'de>, H: PoolHandle> Deserialize<'de> for HandlePool<T, H> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PoolVisitor<T, H>(PhantomData<fn() -> (T, H)>);

        impl<'de, T: Deserialize<'de>, H: PoolHandle> Visitor<'de> for PoolVisitor<T, H> {
            type Value = HandlePool<T, H>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a handle pool: { live: [(handle, value)], vacant: [(index, generation)] }",
                )
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut live: Option<Vec<(Handle, T)>> = None;
                let mut vacant: Option<Vec<(u32, u32)>> = None;
                while let Some(key) = map.next_key::<&str>()? {
                    match key {
                        "live" if live.is_none() => live = Some(map.next_value()?),
                        "vacant" if vacant.is_none() => vacant = Some(map.next_value()?),
                        "live" | "vacant" => {
                            return Err(de::Error::duplicate_field("live or vacant"))
                        }
                        other => return Err(de::Error::unknown_field(other, &["live", "vacant"])),
                    }
                }
                let live = live.ok_or_else(|| de::Error::missing_field("live"))?;
                let vacant = vacant.unwrap_or_default();
                let mut pool = HandlePool::with_handle_type();
                pool.restore(live, &vacant).map_err(de::Error::custom)?;
                Ok(pool)
            }
        }

        deserializer.deserialize_struct("HandlePool", &["live", "vacant"], PoolVisitor(PhantomData))
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
