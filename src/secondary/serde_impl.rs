//! `serde` support for secondary maps (feature `serde`).
//!
//! A map serializes as a sequence of `(handle, value)` pairs, one per
//! value, in slot index order; a handle is its 64-bit value, as everywhere
//! in this crate. In JSON, a map holding `"Ada"` for the handle of slot 7,
//! generation 1 reads `[[4294967303,"Ada"]]`.
//!
//! Deserializing inserts the pairs in order into a new map. Indices must
//! strictly increase, so a document cannot list an entry twice; a pair out
//! of order is an error that names both indices, and a pair keyed by the
//! null handle (which `insert` refuses) is an error too. A hostile document costs
//! what its pairs cost: a value and at most a leaf and two nodes each, whatever
//! the indices (see [`SecondaryMap`]'s "Bad input"); nothing is
//! preallocated from a length the input announces.
//!
//! Serializing collects a reference to every value under one guard, then
//! writes them: the sequence's length is known before it is written, as
//! formats such as bincode need, and each pair is an entry the map held
//! during the call (under concurrency, as [`SecondaryMap::iter`]). The guard
//! holds back the reclamation of values removed meanwhile until the call
//! returns.

use core::fmt;
use core::marker::PhantomData;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use crate::guard::pin;
use crate::handle::{Handle, PoolHandle};

use super::SecondaryMap;

impl<V: Serialize, H: PoolHandle> Serialize for SecondaryMap<V, H> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let guard = pin();
        let pairs: Vec<(Handle, &V)> = self
            .raw
            .occupied()
            // SAFETY: the cursor loaded each word with Acquire under
            // `guard`, which lives until the pairs are written below.
            .map(|(handle, found)| (handle, unsafe { found.value_ref() }))
            .collect();
        let mut seq = serializer.serialize_seq(Some(pairs.len()))?;
        for pair in &pairs {
            seq.serialize_element(pair)?;
        }
        let done = seq.end();
        drop(pairs);
        drop(guard);
        done
    }
}

impl<'de, V: Deserialize<'de>, H: PoolHandle> Deserialize<'de> for SecondaryMap<V, H> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(PairsVisitor(PhantomData))
    }
}

/// Reads the pairs into a new map.
struct PairsVisitor<V, H>(PhantomData<fn() -> (V, H)>);

impl<'de, V: Deserialize<'de>, H: PoolHandle> Visitor<'de> for PairsVisitor<V, H> {
    type Value = SecondaryMap<V, H>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (handle, value) pairs in slot index order")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut pairs: A) -> Result<Self::Value, A::Error> {
        let map = SecondaryMap::<V, H>::with_handle_type();
        let mut last: Option<u32> = None;
        while let Some((handle, value)) = pairs.next_element::<(Handle, V)>()? {
            if handle.is_null() {
                // `insert` would refuse it; a document naming it is malformed.
                return Err(de::Error::custom("the null handle is no secondary map key"));
            }
            if let Some(last) = last.filter(|&last| handle.index() <= last) {
                return Err(de::Error::custom(format_args!(
                    "secondary map entries out of slot index order: index {} after index {last}",
                    handle.index()
                )));
            }
            last = Some(handle.index());
            // A fresh index and not the null handle: the insert is never
            // refused.
            map.raw.insert(handle, value);
        }
        Ok(map)
    }
}
