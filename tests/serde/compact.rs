//! Compact documents: a run of vacant slots is one `VacantRun` entry, so a
//! sparse pool serializes in proportion to its live values and its runs;
//! generations survive, older documents (one entry per slot) still load,
//! and a run cannot make a document describe more than 65,536 slots per
//! entry.

use handle_pool::{Handle, HandlePool, MAX_GENERATION};
use serde_json::{json, Value};

use crate::{measure, rejects, SMALL};

/// The most slots one run entry describes.
const MAX_RUN: usize = 1 << 16;

/// A pool of a million slots with ten live values spread across it.
fn sparse() -> (HandlePool<u64>, Vec<Handle>, Vec<Handle>) {
    let pool: HandlePool<u64> = HandlePool::with_capacity(1 << 20);
    let handles = pool.insert_many(0..1_000_000);
    let keep: Vec<Handle> = (0..10).map(|i| handles[i * 99_991 + 7]).collect();
    let gone: Vec<Handle> = handles
        .iter()
        .copied()
        .filter(|h| !keep.contains(h))
        .collect();
    assert_eq!(pool.remove_many(&gone), gone.len());
    (pool, keep, gone)
}

#[test]
fn a_million_slots_with_ten_live_values_serialize_under_2_kib() {
    let (pool, keep, gone) = sparse();
    let slots = pool.slots_used();
    assert!(slots >= 1_000_000);
    let text = serde_json::to_string(&pool).unwrap();
    assert!(text.len() < 2048, "{} bytes of JSON", text.len());
    let bytes = postcard::to_stdvec(&pool).unwrap();
    assert!(bytes.len() < 512, "{} bytes of postcard", bytes.len());

    let restored: HandlePool<u64> = serde_json::from_str(&text).unwrap();
    assert_eq!(restored.slots_used(), slots, "every slot, at its index");
    assert_eq!(restored.len(), 10);
    for &h in &keep {
        assert_eq!(restored.get_cloned(h), pool.get_cloned(h));
    }
    // Stale handles stay stale, also once their slots are reused.
    for &h in gone.iter().step_by(1_000) {
        assert!(!restored.contains(h));
    }
    let again = restored.insert(7);
    assert!(
        again.generation() >= 2,
        "a reused slot's generation grows: {again:?}"
    );
    let from_postcard: HandlePool<u64> = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(from_postcard.slots_used(), slots);
    assert_eq!(from_postcard.len(), 10);
}

#[test]
fn runs_break_where_generations_differ_and_keep_them() {
    let pool: HandlePool<u32> = HandlePool::new();
    let handles = pool.insert_many(0..12);
    // Slots 2..5 reused once (generation 2 once vacant again); 5..9 once
    // removed (generation 1); 9..12 live; 0 and 1 live.
    pool.remove_many(&handles[2..9]);
    let mut pool = pool;
    pool.reclaim();
    let mut reused = Vec::new();
    for _ in 0..3 {
        reused.push(pool.insert(100));
    }
    pool.remove_many(&reused);
    pool.reclaim();
    let doc = serde_json::to_value(&pool).unwrap();
    let slots = doc["slots"].as_array().unwrap();
    let vacant_slots: usize = slots
        .iter()
        .map(|entry| match entry {
            Value::Object(map) if map.contains_key("VacantRun") => {
                map["VacantRun"][1].as_u64().unwrap() as usize
            }
            Value::Object(map) if map.contains_key("Vacant") => 1,
            _ => 0,
        })
        .sum();
    assert_eq!(vacant_slots, pool.slots_used() - pool.len());
    assert!(
        slots.len() < pool.slots_used(),
        "runs are shorter than one entry per slot: {doc}"
    );
    let restored: HandlePool<u32> = serde_json::from_value(doc).unwrap();
    assert_eq!(restored.slots_used(), pool.slots_used());
    let guard = handle_pool::pin();
    let live: Vec<(Handle, u32)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
    let back: Vec<(Handle, u32)> = restored.iter(&guard).map(|(h, v)| (h, *v)).collect();
    assert_eq!(back, live);
    drop(guard);
    for h in handles[2..9].iter().chain(&reused) {
        assert!(!restored.contains(*h), "{h:?} resolves again");
    }
    // Every slot's next generation is past the one it had.
    for _ in 0..restored.slots_used() {
        let h = restored.insert(0);
        assert!(!handles[2..9].contains(&h) && !reused.contains(&h), "{h:?}");
    }
}

#[test]
fn documents_with_one_entry_per_slot_still_load() {
    let old = json!({ "slots": [
        { "Live": [1, 10] },
        { "Vacant": 3 },
        { "Vacant": 3 },
        { "Vacant": 3 },
        { "Live": [2, 20] },
        { "Vacant": 0 },
    ]});
    let pool: HandlePool<u32> = serde_json::from_value(old).unwrap();
    assert_eq!((pool.len(), pool.slots_used()), (2, 6));
    let (a, b) = (
        Handle::from_bits(1 << 32).unwrap(),
        Handle::from_bits((2 << 32) | 4).unwrap(),
    );
    assert_eq!(
        (pool.get_cloned(a), pool.get_cloned(b)),
        (Some(10), Some(20))
    );
    // Written back, the three vacant slots of generation 3 are one run.
    let again = serde_json::to_value(&pool).unwrap();
    assert_eq!(again["slots"][1], json!({ "VacantRun": [3, 3] }));
    assert_eq!(again["slots"].as_array().unwrap().len(), 4);
    // A run and its slots one by one give the same pool.
    let mixed = json!({ "slots": [
        { "Live": [1, 10] },
        { "VacantRun": [3, 2] },
        { "Vacant": 3 },
        { "Live": [2, 20] },
        { "Vacant": 0 },
    ]});
    let same: HandlePool<u32> = serde_json::from_value(mixed).unwrap();
    assert_eq!(serde_json::to_value(&same).unwrap(), again);
}

#[test]
fn a_run_over_the_limit_of_a_long_vacant_stretch_is_split() {
    let mut pool: HandlePool<u8> = HandlePool::new();
    let handles = pool.insert_many(std::iter::repeat_n(0, 3 * MAX_RUN + 5));
    pool.remove_many(&handles);
    pool.reclaim();
    let doc = serde_json::to_value(&pool).unwrap();
    let slots = doc["slots"].as_array().unwrap();
    for entry in slots {
        if let Some(run) = entry.get("VacantRun") {
            assert!(run[1].as_u64().unwrap() as usize <= MAX_RUN, "{entry}");
        }
    }
    assert!(
        slots.len() <= pool.slots_used().div_ceil(MAX_RUN) + 2,
        "{} entries",
        slots.len()
    );
    let restored: HandlePool<u8> = serde_json::from_value(doc).unwrap();
    assert_eq!(restored.slots_used(), pool.slots_used());
    assert!(restored.is_empty());
    for h in handles.iter().step_by(977) {
        assert!(!restored.contains(*h));
    }
}

#[test]
fn bad_runs_are_rejected_with_their_slot() {
    rejects(
        r#"{"slots":[{"Live":[1,1]},{"VacantRun":[1,0]}]}"#,
        "slot 1: a vacant run of 0 slots (runs have 1 to 65536)",
    );
    rejects(
        r#"{"slots":[{"VacantRun":[1,65537]}]}"#,
        "slot 0: a vacant run of 65537 slots",
    );
    rejects(
        &format!(
            r#"{{"slots":[{{"VacantRun":[{},2]}}]}}"#,
            MAX_GENERATION + 1
        ),
        "slot 0: vacant entry with generation 1073741824",
    );
    rejects(r#"{"slots":[{"VacantRun":[1]}]}"#, "invalid length 1");
    rejects(r#"{"slots":[{"VacantRun":[1,4294967296]}]}"#, "u32");
    rejects(r#"{"slots":[{"VacantRun":3}]}"#, "a vacant run");
}

#[test]
fn a_rejected_document_of_runs_costs_its_entries_not_their_slots() {
    // 2,000 runs of the longest kind describe 131 million slots; the bad
    // entry at the end is found before any of them is allocated.
    let mut doc = String::from(r#"{"slots":["#);
    for _ in 0..2_000 {
        doc.push_str(r#"{"VacantRun":[1,65536]},"#);
    }
    doc.push_str(r#"{"Live":[0,1]}]}"#);
    let (result, total, largest) = measure(|| serde_json::from_str::<HandlePool<u8>>(&doc));
    let Err(error) = result else {
        panic!("accepted a live entry of generation 0");
    };
    let error = error.to_string();
    assert!(
        error.contains("slot 131072000: live entry with generation 0"),
        "{error}"
    );
    assert!(total < SMALL, "allocated {total} bytes");
    assert!(largest <= 64 * 1024, "one allocation of {largest} bytes");
}

#[test]
fn a_document_that_loads_costs_the_slots_it_describes() {
    let doc = r#"{"slots":[{"VacantRun":[4,65536]},{"Live":[1,9]}]}"#;
    let (pool, total, _) = measure(|| serde_json::from_str::<HandlePool<u8>>(doc).unwrap());
    assert_eq!((pool.slots_used(), pool.len()), (MAX_RUN + 1, 1));
    assert!(pool.capacity() <= 2 * (MAX_RUN + 1) + 64);
    // The entries are held as three tags until checked; the slots come from
    // the pool's storage (the flat region's mapping, not the allocator).
    assert!(total < SMALL, "allocated {total} bytes");
    let h = pool.insert(1);
    assert!(h.generation() == 5 && h.index() < MAX_RUN as u32, "{h:?}");
}

#[test]
fn the_null_handle_round_trips_and_stays_null() {
    // A field that refers to nothing yet, written and read back.
    let field = (Handle::default(), 7u8);
    assert!(field.0.is_null());
    let text = serde_json::to_string(&field).unwrap();
    assert_eq!(serde_json::from_str::<(Handle, u8)>(&text).unwrap(), field);
    let bytes = postcard::to_stdvec(&field).unwrap();
    assert_eq!(postcard::from_bytes::<(Handle, u8)>(&bytes).unwrap(), field);
    let pool: HandlePool<u8> = serde_json::from_str(r#"{"slots":[{"Live":[1,1]}]}"#).unwrap();
    assert!(!pool.contains(field.0));
}
