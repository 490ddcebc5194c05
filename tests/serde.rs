//! serde: round trips through self-describing and binary formats, hostile
//! documents, and serializing a pool other threads are changing.
#![cfg(feature = "serde")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use handle_pool::{new_handle_type, pin, Handle, HandlePool, PoolHandle, MAX_GENERATION};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

mod common;
use common::Lock;

// `SecondaryMap` with serde lives in `tests/serde/` (a crate root's modules
// would be looked for next to it, in `tests/`).
#[path = "serde/secondary.rs"]
mod secondary;

// Compact documents, runs of vacant slots as one entry: `tests/serde/`.
#[path = "serde/compact.rs"]
mod compact;

// ---------------------------------------------------------------------------
// Allocation accounting, per thread (tests run on threads of their own).

struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    let _ = ALLOCATED.try_with(|total| total.set(total.get() + size));
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the bookkeeping touches only const-initialised thread-locals,
// which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller's contract for `alloc_zeroed` is `System`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: the caller's contract for `realloc` is `System`'s, and
        // `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`; returns its result, the bytes this thread allocated meanwhile
/// (reallocations count their new size) and the largest single allocation.
fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    let before = ALLOCATED.with(Cell::get);
    LARGEST.with(|largest| largest.set(0));
    let result = f();
    let total = ALLOCATED.with(Cell::get) - before;
    (result, total, LARGEST.with(Cell::get))
}

/// What deserializing a small hostile document may allocate in all: the
/// empty pool's stripes, a few pages of preallocated entries, error strings.
const SMALL: usize = 256 * 1024;

// ---------------------------------------------------------------------------
// Formats.

type Codec<T, H> = fn(&HandlePool<T, H>) -> HandlePool<T, H>;

fn json_string<T: Serialize + DeserializeOwned, H: PoolHandle>(
    pool: &HandlePool<T, H>,
) -> HandlePool<T, H> {
    serde_json::from_str(&serde_json::to_string(pool).unwrap()).unwrap()
}

fn json_reader<T: Serialize + DeserializeOwned, H: PoolHandle>(
    pool: &HandlePool<T, H>,
) -> HandlePool<T, H> {
    let mut bytes = Vec::new();
    serde_json::to_writer(&mut bytes, pool).unwrap();
    serde_json::from_reader(std::io::Cursor::new(bytes)).unwrap()
}

fn json_value<T: Serialize + DeserializeOwned, H: PoolHandle>(
    pool: &HandlePool<T, H>,
) -> HandlePool<T, H> {
    serde_json::from_value(serde_json::to_value(pool).unwrap()).unwrap()
}

/// The struct given as a sequence: `[[entries…]]` instead of `{"slots": […]}`.
fn json_sequence<T: Serialize + DeserializeOwned, H: PoolHandle>(
    pool: &HandlePool<T, H>,
) -> HandlePool<T, H> {
    let Value::Object(mut map) = serde_json::to_value(pool).unwrap() else {
        panic!("a pool serializes as a JSON object");
    };
    let slots = map.remove("slots").expect("the field `slots`");
    serde_json::from_value(Value::Array(vec![slots])).unwrap()
}

fn bincode<T: Serialize + DeserializeOwned, H: PoolHandle>(
    pool: &HandlePool<T, H>,
) -> HandlePool<T, H> {
    bincode::deserialize(&bincode::serialize(pool).unwrap()).unwrap()
}

fn postcard<T: Serialize + DeserializeOwned, H: PoolHandle>(
    pool: &HandlePool<T, H>,
) -> HandlePool<T, H> {
    postcard::from_bytes(&postcard::to_stdvec(pool).unwrap()).unwrap()
}

fn codecs<T: Serialize + DeserializeOwned, H: PoolHandle>() -> [(&'static str, Codec<T, H>); 6] {
    [
        ("serde_json to_string/from_str", json_string),
        ("serde_json to_writer/from_reader", json_reader),
        ("serde_json to_value/from_value", json_value),
        ("serde_json struct as a sequence", json_sequence),
        ("bincode", bincode),
        ("postcard", postcard),
    ]
}

// ---------------------------------------------------------------------------
// Round trips.

/// A pool with live values, removed values (reclaimed and still pending),
/// a reused slot, and slot 0 retired at the generation limit.
struct Scenario<H> {
    pool: HandlePool<String, H>,
    live: Vec<(H, String)>,
    stale: Vec<H>,
}

fn scenario<H: PoolHandle>() -> Scenario<H> {
    // Only a document can start a slot at the generation limit.
    let limit_doc = json!({ "slots": [{ "Live": [MAX_GENERATION, "limit"] }] });
    let mut pool: HandlePool<String, H> = serde_json::from_value(limit_doc).unwrap();
    let limit = H::from_handle(Handle::from_bits((MAX_GENERATION as u64) << 32).unwrap());
    assert_eq!(pool.get_cloned(limit).as_deref(), Some("limit"));
    let handles: Vec<H> = (0..6).map(|i| pool.insert(format!("v{i}"))).collect();
    assert!(pool.remove(limit));
    assert!(pool.remove(handles[1]));
    assert!(pool.remove(handles[3]));
    pool.reclaim();
    let short_lived = pool.insert("short-lived".to_string());
    assert!(pool.remove(short_lived));
    assert!(pool.remove(handles[5]));
    let kept = pool.insert("kept".to_string());
    let live = vec![
        (handles[0], "v0".to_string()),
        (handles[2], "v2".to_string()),
        (handles[4], "v4".to_string()),
        (kept, "kept".to_string()),
    ];
    let stale = vec![limit, handles[1], handles[3], handles[5], short_lived];
    Scenario { pool, live, stale }
}

/// The restored pool has the live values, keeps the stale handles stale,
/// keeps slot 0 retired, and allocates no more than the entries need.
fn check_scenario<H: PoolHandle>(
    what: &str,
    scenario: &Scenario<H>,
    restored: &HandlePool<String, H>,
) {
    let entries = scenario.pool.slots_used();
    assert_eq!(restored.slots_used(), entries, "{what}: one slot per entry");
    assert!(
        restored.capacity() <= 2 * entries + 64,
        "{what}: capacity {} for {entries} entries",
        restored.capacity()
    );
    assert_eq!(restored.len(), scenario.live.len(), "{what}: len");
    for (handle, value) in &scenario.live {
        assert_eq!(restored.get_cloned(*handle).as_ref(), Some(value), "{what}");
    }
    for handle in &scenario.stale {
        assert!(
            !restored.contains(*handle),
            "{what}: {handle:?} resolves again"
        );
    }
    let stale: HashSet<H> = scenario.stale.iter().copied().collect();
    for i in 0..2 * entries + 10 {
        let handle = restored.insert(format!("new{i}"));
        assert!(
            !stale.contains(&handle),
            "{what}: insert gave stale {handle:?}"
        );
        assert_ne!(
            handle.handle().index(),
            0,
            "{what}: a retired slot was reused"
        );
    }
    for handle in &scenario.stale {
        assert!(
            !restored.contains(*handle),
            "{what}: {handle:?} resolves again"
        );
    }
}

#[test]
fn round_trip_keeps_live_handles_and_stale_ones_stale_in_every_format() {
    let scenario = scenario::<Handle>();
    for (what, codec) in codecs::<String, Handle>() {
        let restored = codec(&scenario.pool);
        check_scenario(what, &scenario, &restored);
    }
}

new_handle_type! {
    /// A typed handle for the serde tests.
    struct Entity;
}

#[test]
fn round_trip_with_a_typed_handle_in_every_format() {
    let scenario = scenario::<Entity>();
    for (what, codec) in codecs::<String, Entity>() {
        let restored = codec(&scenario.pool);
        check_scenario(what, &scenario, &restored);
    }
}

#[test]
fn round_trip_tells_a_none_value_from_a_vacant_slot() {
    let pool: HandlePool<Option<u32>> = HandlePool::new();
    let none = pool.insert(None);
    let some = pool.insert(Some(7));
    let removed = pool.insert(None);
    let other = pool.insert(Some(0));
    assert!(pool.remove(removed));
    assert!(pool.remove(other));
    for (what, codec) in codecs::<Option<u32>, Handle>() {
        let restored = codec(&pool);
        assert_eq!(restored.len(), 2, "{what}");
        assert_eq!(restored.get_cloned(none), Some(None), "{what}");
        assert_eq!(restored.get_cloned(some), Some(Some(7)), "{what}");
        assert_eq!(restored.get_cloned(removed), None, "{what}");
        assert_eq!(restored.get_cloned(other), None, "{what}");
    }
}

#[test]
fn serialized_form_is_one_entry_per_live_or_lone_vacant_slot_and_per_vacant_run() {
    let pool = HandlePool::new();
    let a = pool.insert("a");
    let b = pool.insert("b");
    pool.insert("c");
    assert!(pool.remove(b));
    let json = serde_json::to_value(&pool).unwrap();
    let slots = json["slots"].as_array().unwrap().clone();
    // The fresh slots the inserts took past the third are one run.
    let fresh = pool.slots_used() - 3;
    let mut expected = vec![
        json!({ "Live": [1, "a"] }),
        json!({ "Vacant": 1 }),
        json!({ "Live": [1, "c"] }),
    ];
    match fresh {
        0 => {}
        1 => expected.push(json!({ "Vacant": 0 })),
        n => expected.push(json!({ "VacantRun": [0, n] })),
    }
    assert_eq!(slots, expected);
    assert_eq!(a.index(), 0);
    let empty: HandlePool<u8> = HandlePool::new();
    assert_eq!(serde_json::to_string(&empty).unwrap(), r#"{"slots":[]}"#);
    let restored: HandlePool<u8> = serde_json::from_str(r#"{"slots":[]}"#).unwrap();
    assert!(restored.is_empty());
    assert_eq!(restored.capacity(), 0);
}

#[test]
fn handles_round_trip_in_every_format_and_invalid_bits_are_rejected() {
    let pool: HandlePool<u8, Entity> = HandlePool::with_handle_type();
    let entity = pool.insert(1);
    let handle = entity.handle();
    let text = serde_json::to_string(&handle).unwrap();
    assert_eq!(text, handle.to_bits().to_string());
    assert_eq!(serde_json::from_str::<Handle>(&text).unwrap(), handle);
    assert_eq!(serde_json::from_str::<Entity>(&text).unwrap(), entity);
    assert_eq!(
        serde_json::from_reader::<_, Entity>(text.as_bytes()).unwrap(),
        entity
    );
    assert_eq!(
        serde_json::from_value::<Entity>(serde_json::to_value(entity).unwrap()).unwrap(),
        entity
    );
    assert_eq!(
        bincode::deserialize::<Entity>(&bincode::serialize(&entity).unwrap()).unwrap(),
        entity
    );
    assert_eq!(
        postcard::from_bytes::<Entity>(&postcard::to_stdvec(&entity).unwrap()).unwrap(),
        entity
    );
    let invalid = [
        0u64,
        (1 << 32) | u32::MAX as u64,
        (MAX_GENERATION as u64 + 1) << 32,
    ];
    for bits in invalid {
        assert!(serde_json::from_str::<Handle>(&bits.to_string()).is_err());
        assert!(serde_json::from_value::<Entity>(json!(bits)).is_err());
        assert!(bincode::deserialize::<Handle>(&bincode::serialize(&bits).unwrap()).is_err());
        assert!(postcard::from_bytes::<Entity>(&postcard::to_stdvec(&bits).unwrap()).is_err());
    }
}

// ---------------------------------------------------------------------------
// Hostile documents.

/// Deserializes `doc` as a pool of `u8`, expecting an error that mentions
/// `needle`, within `SMALL` bytes of allocation.
fn rejects(doc: &str, needle: &str) {
    let (result, total, _) = measure(|| serde_json::from_str::<HandlePool<u8>>(doc));
    let error = match result {
        Ok(_) => panic!("accepted {doc}"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains(needle),
        "{doc}: error {error:?} does not mention {needle:?}"
    );
    assert!(total < SMALL, "{doc}: allocated {total} bytes");
}

#[test]
fn old_format_with_a_huge_index_is_rejected_without_allocating_for_it() {
    // Used to allocate 67M slots (765 MiB); an index near u32::MAX aborted.
    rejects(
        r#"{"live":[],"vacant":[[50000000,1]]}"#,
        "unknown field `live`",
    );
    rejects(
        r#"{"live":[],"vacant":[[4294967294,1]]}"#,
        "unknown field `live`",
    );
    rejects(
        r#"{"live":[[4294967297,1],[4294967297,2]],"vacant":[]}"#,
        "unknown field `live`",
    );
}

#[test]
fn generations_out_of_range_are_rejected() {
    rejects(
        r#"{"slots":[{"Live":[0,1]}]}"#,
        "slot 0: live entry with generation 0",
    );
    rejects(
        &format!(
            r#"{{"slots":[{{"Vacant":0}},{{"Live":[{},1]}}]}}"#,
            MAX_GENERATION + 1
        ),
        "slot 1: live entry with generation 1073741824",
    );
    rejects(
        &format!(r#"{{"slots":[{{"Vacant":{}}}]}}"#, MAX_GENERATION + 1),
        "slot 0: vacant entry with generation 1073741824",
    );
    rejects(
        r#"{"slots":[{"Vacant":4294967295}]}"#,
        "vacant entry with generation 4294967295",
    );
    rejects(r#"{"slots":[{"Vacant":4294967296}]}"#, "u32");
    rejects(r#"{"slots":[{"Live":[18446744073709551615,1]}]}"#, "u32");
    rejects(r#"{"slots":[{"Live":[-1,1]}]}"#, "u32");
}

#[test]
fn unknown_duplicate_and_missing_fields_are_rejected() {
    rejects(
        r#"{"slots":[],"extra":1}"#,
        "unknown field `extra`, expected `slots`",
    );
    rejects(r#"{"slots":[],"slots":[]}"#, "duplicate field `slots`");
    rejects(r#"{}"#, "missing field `slots`");
    rejects(r#"[]"#, "invalid length 0");
    rejects(r#"[[],[]]"#, "invalid length 2");
    rejects(
        r#"{"slots":[{"Free":1}]}"#,
        "unknown variant `Free`, expected one of `Vacant`, `Live`, `VacantRun`",
    );
    rejects(r#"{"slots":[{"Live":[1]}]}"#, "invalid length 1");
    rejects(r#"{"slots":[{"Live":1}]}"#, "a live entry");
    rejects(r#"{"slots":{}}"#, "a sequence of slot entries");
    // The same through `from_value`, whose keys are owned strings.
    let value = json!({ "slots": [], "other": [] });
    let error = serde_json::from_value::<HandlePool<u8>>(value)
        .err()
        .unwrap();
    assert!(
        error.to_string().contains("unknown field `other`"),
        "{error}"
    );
}

#[test]
fn hostile_documents_that_load_allocate_in_proportion_to_their_entries() {
    let doc = format!(
        r#"{{"slots":[{{"Vacant":{MAX_GENERATION}}},{{"Vacant":3}},{{"Live":[{MAX_GENERATION},7]}}]}}"#
    );
    let (pool, total, _) = measure(|| serde_json::from_str::<HandlePool<u8>>(&doc).unwrap());
    assert!(total < SMALL, "allocated {total} bytes");
    assert!(pool.capacity() <= 2 * 3 + 64);
    let live = Handle::from_bits(((MAX_GENERATION as u64) << 32) | 2).unwrap();
    assert_eq!(pool.get_cloned(live), Some(7));
    // Slot 0 is retired; slot 1 resumes after generation 3.
    let next = pool.insert(1);
    assert_eq!((next.index(), next.generation()), (1, 4));
    assert!(pool.insert(2).index() >= 3);
}

#[test]
fn vacant_entries_are_held_as_tags_not_values_until_checked() {
    // postcard: the length as a varint, then per entry its variant and
    // generation, one byte each: a vacant entry is two bytes.
    const ENTRIES: usize = 50_000;
    let mut doc = Vec::new();
    let mut n = ENTRIES;
    while n >= 0x80 {
        doc.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    doc.push(n as u8);
    doc.extend(std::iter::repeat_n([0u8, 1], ENTRIES).flatten());
    type Big = [[u64; 32]; 2];
    let (pool, total, _) = measure(|| postcard::from_bytes::<HandlePool<Big>>(&doc).unwrap());
    assert_eq!((pool.len(), pool.slots_used()), (0, ENTRIES));
    // The slots come from the flat region's mapping, not the allocator:
    // what is counted is the entries held until checked, 4 bytes each
    // (a vector doubling to 64 Ki tags allocates under 512 KiB in all),
    // where a `Vec` of entries would hold a 520-byte entry each.
    assert!(total < SMALL + 8 * ENTRIES, "allocated {total} bytes");
    let h = pool.insert([[7; 32]; 2]);
    assert_eq!((h.index(), h.generation()), (0, 2));
}

/// A bincode pool document of `count` vacant entries whose length prefix
/// claims `claimed` entries. (Their generations differ, so that they
/// serialize as one entry each, not as a run.)
fn lying_bincode(claimed: u64, count: usize) -> Vec<u8> {
    let slots: Vec<Value> = (0..count).map(|g| json!({ "Vacant": g + 1 })).collect();
    let doc = json!({ "slots": slots });
    let pool: HandlePool<u32> = serde_json::from_value(doc).unwrap();
    let mut bytes = bincode::serialize(&pool).unwrap();
    assert_eq!(bytes.len(), 8 + 8 * count);
    bytes[..8].copy_from_slice(&claimed.to_le_bytes());
    bytes
}

#[test]
fn length_prefix_claiming_2_pow_60_entries_fails_fast_without_allocating() {
    let bytes = lying_bincode(1 << 60, 3);
    let start = Instant::now();
    let (result, total, largest) = measure(|| bincode::deserialize::<HandlePool<u32>>(&bytes));
    assert!(result.is_err());
    assert!(total < SMALL, "allocated {total} bytes");
    assert!(largest <= 64 * 1024, "one allocation of {largest} bytes");
    assert!(start.elapsed() < Duration::from_secs(1));

    // The same lie in postcard (a varint length).
    let mut bytes = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10];
    bytes.extend_from_slice(&[0, 1, 0, 1, 1, 2, 7]);
    let (result, total, _) = measure(|| postcard::from_bytes::<HandlePool<u32>>(&bytes));
    assert!(result.is_err());
    assert!(total < SMALL, "allocated {total} bytes");

    // An honest prefix loads.
    let pool: HandlePool<u32> = bincode::deserialize(&lying_bincode(3, 3)).unwrap();
    assert_eq!(pool.slots_used(), 3);
    assert!(pool.capacity() <= 2 * 3 + 64);
}

// ---------------------------------------------------------------------------
// Properties.

/// Checks a pool restored from a document of `entries`
/// (`(live, generation, value)`), or from an unknown document of
/// `doc_len` bytes when `entries` is `None`.
fn check_restored(
    pool: &HandlePool<u8>,
    entries: Option<&[(bool, u64, u8)]>,
    doc_len: usize,
) -> Result<(), TestCaseError> {
    // Every entry takes a byte at least, and describes one slot, or up to
    // 65,536 for a run of vacant slots.
    let slots = pool.slots_used();
    prop_assert!(
        slots <= doc_len * 65_536,
        "{} slots from {} bytes",
        slots,
        doc_len
    );
    prop_assert!(pool.capacity() <= 2 * slots + 64);
    let guard = pin();
    let live: Vec<(Handle, u8)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
    drop(guard);
    prop_assert_eq!(pool.len(), live.len());
    let indices: HashSet<u32> = live.iter().map(|(h, _)| h.index()).collect();
    prop_assert_eq!(indices.len(), live.len(), "two live handles share an index");
    // The generation each slot had: no insert may hand out one at or below it.
    let mut floor = vec![0u64; slots];
    if let Some(entries) = entries {
        prop_assert_eq!(slots, entries.len());
        let expected: Vec<(Handle, u8)> = entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.0)
            .map(|(i, &(_, g, v))| (Handle::from_bits((g << 32) | i as u64).unwrap(), v))
            .collect();
        prop_assert_eq!(pool.len(), expected.len());
        for &(handle, value) in &expected {
            prop_assert_eq!(pool.get_cloned(handle), Some(value));
        }
        for (i, &(_, g, _)) in entries.iter().enumerate() {
            floor[i] = g;
        }
    } else {
        for &(handle, value) in &live {
            prop_assert_eq!(pool.get_cloned(handle), Some(value));
        }
        for (handle, _) in &live {
            floor[handle.index() as usize] = handle.generation() as u64;
        }
    }
    for _ in 0..slots + 8 {
        let handle = pool.insert(0);
        if let Some(&g) = floor.get(handle.index() as usize) {
            prop_assert!(
                (handle.generation() as u64) > g,
                "insert gave {:?}, at or below the document's generation {}",
                handle,
                g
            );
        }
    }
    Ok(())
}

fn generation() -> impl Strategy<Value = u64> {
    let max = MAX_GENERATION as u64;
    prop_oneof![
        4 => 0..4u64,
        2 => (max - 2)..=(max + 2),
        1 => any::<u32>().prop_map(u64::from),
        1 => any::<u64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random bytes in any format: an error, or a consistent pool no larger
    /// than the input.
    #[test]
    fn random_bytes_give_an_error_or_a_consistent_small_pool(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        if let Ok(pool) = serde_json::from_slice::<HandlePool<u8>>(&bytes) {
            check_restored(&pool, None, bytes.len())?;
        }
        if let Ok(pool) = bincode::deserialize::<HandlePool<u8>>(&bytes) {
            check_restored(&pool, None, bytes.len())?;
        }
        if let Ok(pool) = postcard::from_bytes::<HandlePool<u8>>(&bytes) {
            check_restored(&pool, None, bytes.len())?;
        }
    }

    /// Structured documents with arbitrary generations: an error exactly
    /// when a generation is out of range; otherwise the pool the entries say.
    #[test]
    fn random_documents_give_an_error_or_exactly_their_pool(
        entries in proptest::collection::vec((any::<bool>(), generation(), any::<u8>()), 0..100),
        as_sequence in any::<bool>(),
    ) {
        let slots: Vec<Value> = entries
            .iter()
            .map(|&(live, g, v)| if live { json!({ "Live": [g, v] }) } else { json!({ "Vacant": g }) })
            .collect();
        let doc = if as_sequence { json!([slots]) } else { json!({ "slots": slots }) };
        let text = doc.to_string();
        let valid = entries.iter().all(|&(live, g, _)| {
            g <= MAX_GENERATION as u64 && (!live || g >= 1)
        });
        let (result, total, _) = measure(|| serde_json::from_str::<HandlePool<u8>>(&text));
        prop_assert!(total < SMALL + 64 * entries.len(), "allocated {} bytes", total);
        match result {
            Ok(pool) => {
                prop_assert!(valid, "accepted {}", text);
                check_restored(&pool, Some(&entries), text.len())?;
            }
            Err(error) => prop_assert!(!valid, "rejected {}: {}", text, error),
        }
        // The value path agrees.
        prop_assert_eq!(serde_json::from_value::<HandlePool<u8>>(doc).is_ok(), valid);
    }
}

// ---------------------------------------------------------------------------
// Serializing while other threads insert and remove.

/// Operations the churning writer has done (only one test uses these two).
static WRITER_OPS: AtomicU64 = AtomicU64::new(0);
/// Operations the writer may do so far: the test grants some every round.
static WRITER_BUDGET: AtomicU64 = AtomicU64::new(0);

/// A value whose serialization waits (briefly) for the writer to do one
/// more operation, so that serializing a pool interleaves with the churn
/// however the threads are scheduled.
struct Paced(u64);

impl Serialize for Paced {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let seen = WRITER_OPS.load(Ordering::Relaxed);
        let start = Instant::now();
        let mut spins = 0u32;
        while WRITER_OPS.load(Ordering::Relaxed) == seen
            && seen < WRITER_BUDGET.load(Ordering::Relaxed)
            && start.elapsed() < Duration::from_millis(10)
        {
            if spins < 1000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Paced {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        u64::deserialize(deserializer).map(Paced)
    }
}

#[test]
fn serializing_under_churn_never_lists_a_slot_twice_or_revives_a_stale_handle() {
    let pool: Arc<HandlePool<Paced>> = Arc::new(HandlePool::new());
    // A `Lock`, not an std `Mutex`: ThreadSanitizer sees its hand-over
    // (see `common::Lock`).
    let removed: Arc<Lock<Vec<Handle>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (pool, removed, stop) = (pool.clone(), removed.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut live: Vec<Handle> = Vec::new();
            let mut old: Vec<Handle> = Vec::new();
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            while !stop.load(Ordering::Relaxed) {
                if WRITER_OPS.load(Ordering::Relaxed) >= WRITER_BUDGET.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                    continue;
                }
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                match rng % 8 {
                    0..=3 if live.len() < 150 => {
                        live.push(pool.insert_with(|h: Handle| Paced(h.to_bits())));
                    }
                    0..=6 if !live.is_empty() => {
                        let handle = live.swap_remove((rng >> 8) as usize % live.len());
                        assert!(pool.remove(handle));
                        old.push(handle);
                        removed.lock().push(handle);
                    }
                    _ if !old.is_empty() => {
                        let stale = old[(rng >> 8) as usize % old.len()];
                        assert!(!pool.remove(stale));
                    }
                    _ => {}
                }
                WRITER_OPS.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    for round in 0..20 {
        // Enough operations to churn all through the serialization; wait
        // for the first hundred, so the pool is never found idle.
        let budget = WRITER_BUDGET.fetch_add(400, Ordering::Relaxed) + 400;
        while WRITER_OPS.load(Ordering::Relaxed) < budget - 300 {
            std::thread::yield_now();
        }
        let stale_before: HashSet<Handle> = removed.lock().iter().copied().collect();
        let json = serde_json::to_string(&*pool).unwrap();
        let restored: HandlePool<Paced> = serde_json::from_str(&json)
            .unwrap_or_else(|error| panic!("round {round}: the document does not load: {error}"));
        let guard = pin();
        for (handle, value) in restored.iter(&guard) {
            assert_eq!(
                value.0,
                handle.to_bits(),
                "round {round}: a value under the wrong handle"
            );
        }
        drop(guard);
        for handle in &stale_before {
            assert!(
                !restored.contains(*handle),
                "round {round}: {handle:?} resolves again"
            );
        }
        for _ in 0..restored.slots_used() + 16 {
            let handle = restored.insert(Paced(0));
            assert!(
                !stale_before.contains(&handle),
                "round {round}: insert gave stale {handle:?}"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(!removed.lock().is_empty(), "the writer churned");
}

// ---------------------------------------------------------------------------
// Drops.

thread_local! {
    static MADE: Cell<usize> = const { Cell::new(0) };
    static DROPPED: Cell<usize> = const { Cell::new(0) };
}

/// A value that counts, on this thread, how many were deserialized and dropped.
struct Counted(#[allow(dead_code)] u32);

impl<'de> Deserialize<'de> for Counted {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = u32::deserialize(deserializer)?;
        MADE.with(|made| made.set(made.get() + 1));
        Ok(Counted(value))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.with(|dropped| dropped.set(dropped.get() + 1));
    }
}

fn counts() -> (usize, usize) {
    (MADE.with(Cell::get), DROPPED.with(Cell::get))
}

#[test]
fn a_rejected_document_drops_every_value_it_read_exactly_once() {
    let failing = [
        r#"{"slots":[{"Live":[1,1]},{"Vacant":0},{"Live":[1,2]},{"Live":[0,3]}]}"#,
        r#"{"slots":[{"Live":[1,1]},{"Live":[1,2]},{"Vacant":4294967295}]}"#,
        r#"{"slots":[{"Live":[1,1]},{"Live":[1,2]},{"Live":[1,"x"]}]}"#,
        r#"{"slots":[{"Live":[1,1]},{"Live":[1,2]}],"slots":[{"Live":[1,3]}]}"#,
        r#"{"slots":[{"Live":[1,1]},{"Live":[1,2]}],"other":1}"#,
        r#"[[{"Live":[1,1]},{"Live":[1,2]}],[]]"#,
        r#"{"slots":[{"Live":[1,1]},{"Live":[1,2]}"#,
    ];
    for doc in failing {
        let before = counts();
        assert!(
            serde_json::from_str::<HandlePool<Counted>>(doc).is_err(),
            "{doc}"
        );
        let (made, dropped) = counts();
        assert!(made - before.0 >= 2, "{doc}");
        assert_eq!(made - before.0, dropped - before.1, "{doc}");
    }
    // A document that loads: its values are dropped with the pool, once.
    let before = counts();
    let pool: HandlePool<Counted> =
        serde_json::from_str(r#"{"slots":[{"Live":[1,1]},{"Vacant":2},{"Live":[5,2]}]}"#).unwrap();
    assert_eq!(counts(), (before.0 + 2, before.1));
    drop(pool);
    assert_eq!(counts(), (before.0 + 2, before.1 + 2));
}

/// A value whose serialization runs `hook` with how many values were
/// serialized before it.
struct Hooked {
    hook: Arc<dyn Fn(u64) + Send + Sync>,
    written: Arc<AtomicU64>,
}

impl Serialize for Hooked {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.hook)(self.written.fetch_add(1, Ordering::SeqCst));
        serializer.serialize_u8(0)
    }
}

/// A long serialization does not hold reclamation back for its whole
/// length: a value removed (and its batch sealed) early in the call is
/// dropped by a flush later in the same call, once the serializer's guard
/// has been repinned.
#[test]
fn a_long_serialization_lets_reclamation_go_on() {
    let other: Arc<HandlePool<Arc<()>>> = Arc::new(HandlePool::new());
    let witness = Arc::new(());
    let victim = other.insert(Arc::clone(&witness));
    let gone = Arc::downgrade(&witness);
    drop(witness);
    let dropped_during_call = Arc::new(AtomicBool::new(false));
    let hook = {
        let (other, dropped) = (Arc::clone(&other), Arc::clone(&dropped_during_call));
        move |n: u64| {
            if n == 10 {
                assert!(other.remove(victim));
                other.flush();
            }
            if n == 200 {
                // Other tests' guards (any thread's) may hold it back for a
                // moment; this call's own guard, pinned since, must not.
                let deadline = Instant::now() + Duration::from_secs(5);
                while gone.strong_count() != 0 && Instant::now() < deadline {
                    other.flush();
                    std::thread::yield_now();
                }
                dropped.store(gone.strong_count() == 0, Ordering::SeqCst);
            }
        }
    };
    let hook: Arc<dyn Fn(u64) + Send + Sync> = Arc::new(hook);
    let written = Arc::new(AtomicU64::new(0));
    let pool = HandlePool::new();
    for _ in 0..300 {
        pool.insert(Hooked {
            hook: Arc::clone(&hook),
            written: Arc::clone(&written),
        });
    }
    let json = serde_json::to_string(&pool).unwrap();
    assert_eq!(written.load(Ordering::SeqCst), 300);
    assert!(json.starts_with("{\"slots\":[{\"Live\":[1,0]}"));
    assert!(
        dropped_during_call.load(Ordering::SeqCst),
        "the removed value waited for the whole serialization"
    );
}
