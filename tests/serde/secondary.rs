//! `SecondaryMap` with serde: round trips in every format keep each
//! handle's meaning (the exact generation resolves, stale handles stay
//! stale), the documented form, malformed documents rejected with the
//! problem named, and a hostile document allocating in proportion to its
//! pairs, whatever indices they name.

use handle_pool::{
    new_handle_type, pin, Handle, HandlePool, SecondaryMap, MAX_GENERATION, MAX_INDEX,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::measure;

fn handle(index: u32, generation: u32) -> Handle {
    Handle::from_bits((u64::from(generation) << 32) | u64::from(index)).unwrap()
}

/// The map through every format.
fn round_trips<V, H>(map: &SecondaryMap<V, H>) -> Vec<(&'static str, SecondaryMap<V, H>)>
where
    V: Serialize + DeserializeOwned,
    H: handle_pool::PoolHandle,
{
    vec![
        (
            "serde_json",
            serde_json::from_str(&serde_json::to_string(map).unwrap()).unwrap(),
        ),
        (
            "serde_json value",
            serde_json::from_value(serde_json::to_value(map).unwrap()).unwrap(),
        ),
        (
            "bincode",
            bincode::deserialize(&bincode::serialize(map).unwrap()).unwrap(),
        ),
        (
            "postcard",
            postcard::from_bytes(&postcard::to_stdvec(map).unwrap()).unwrap(),
        ),
    ]
}

#[test]
fn round_trips_keep_every_handles_meaning_in_every_format() {
    let map = SecondaryMap::new();
    let live = [
        handle(0, 1),
        handle(7, 3),
        handle(300, 2),
        handle(70_000, 9),
        handle(MAX_INDEX, MAX_GENERATION),
    ];
    for (i, &h) in live.iter().enumerate() {
        map.insert(h, format!("value {i}"));
    }
    let stale = [handle(7, 2), handle(300, 1), handle(0, 2), handle(5, 1)];
    map.insert(handle(5, 1), String::from("removed"));
    map.remove(handle(5, 1));
    for (format, copy) in round_trips(&map) {
        assert_eq!(copy.len(), live.len(), "{format}");
        for (i, &h) in live.iter().enumerate() {
            assert_eq!(copy.get_cloned(h), Some(format!("value {i}")), "{format}");
        }
        for h in stale {
            assert!(!copy.contains(h), "{format}: {h:?} stays stale");
        }
        // The generation rules go on: an older insert is refused.
        assert!(!copy.insert(handle(7, 2), String::new()), "{format}");
    }
}

#[test]
fn typed_handles_round_trip() {
    new_handle_type! {
        struct Entity;
    }
    let entities: HandlePool<(), Entity> = HandlePool::with_handle_type();
    let names: SecondaryMap<String, Entity> = SecondaryMap::with_handle_type();
    let e = entities.insert(());
    names.insert(e, String::from("Ada"));
    for (format, copy) in round_trips(&names) {
        assert_eq!(copy.get_cloned(e).as_deref(), Some("Ada"), "{format}");
    }
}

#[test]
fn the_serialized_form_is_a_sequence_of_pairs_in_index_order() {
    let map = SecondaryMap::new();
    map.insert(handle(300, 1), "c");
    map.insert(handle(7, 1), "Ada");
    map.insert(handle(8, 2), "b");
    assert_eq!(
        serde_json::to_string(&map).unwrap(),
        r#"[[4294967303,"Ada"],[8589934600,"b"],[4294967596,"c"]]"#
    );
    let empty: SecondaryMap<u8> = SecondaryMap::new();
    assert_eq!(serde_json::to_string(&empty).unwrap(), "[]");
}

fn rejects(doc: &str, needle: &str) {
    let error = serde_json::from_str::<SecondaryMap<u8>>(doc)
        .err()
        .unwrap_or_else(|| panic!("{doc} loaded"));
    assert!(error.to_string().contains(needle), "{doc}: {error}");
}

#[test]
fn malformed_documents_are_rejected_with_the_problem_named() {
    rejects(
        r#"[[4294967303,1],[4294967303,2]]"#,
        "index 7 after index 7",
    );
    rejects(
        r#"[[4294967303,1],[8589934599,2]]"#,
        "index 7 after index 7",
    );
    rejects(
        r#"[[4294967304,1],[4294967303,2]]"#,
        "index 7 after index 8",
    );
    rejects(r#"[[0,1]]"#, "not a valid handle");
    rejects(r#"[[18446744073709551615,1]]"#, "not a valid handle");
    rejects(
        &format!("[[{},1]]", Handle::null().to_bits()),
        "the null handle is no secondary map key",
    );
    rejects(r#"[[4294967303]]"#, "invalid length");
    rejects(r#"{"slots":[]}"#, "a sequence of (handle, value) pairs");
}

#[test]
fn a_hostile_document_allocates_in_proportion_to_its_pairs() {
    // 64 pairs spread over the whole index space, the last at the highest
    // index: a table leaf and two nodes each, never a table up to an index.
    let pairs: Vec<String> = (0..64u64)
        .map(|i| {
            let index = if i == 63 {
                u64::from(MAX_INDEX)
            } else {
                i * 67_108_859
            };
            format!("[{},{}]", (1 << 32) | index, i)
        })
        .collect();
    let doc = format!("[{}]", pairs.join(","));
    let (map, total, largest) = measure(|| serde_json::from_str::<SecondaryMap<u8>>(&doc).unwrap());
    assert_eq!(map.len(), 64);
    assert!(map.capacity() <= 64 * 128 + 128, "{}", map.capacity());
    assert!(largest <= 64 * 1024, "largest allocation {largest}");
    assert!(
        total <= 64 * 6 * 1024 + crate::SMALL,
        "{total} bytes for 64 pairs"
    );
    assert_eq!(
        map.values(&pin()).map(|v| u32::from(*v)).sum::<u32>(),
        (0..64u32).sum::<u32>()
    );
}
