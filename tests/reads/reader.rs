//! `Reader`: the pool's lookups with its storage read once. It must answer
//! as `get` and `contains` do, for every handle, including those whose
//! slots were committed after the reader was made.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use handle_pool::{new_handle_type, Config, Handle, HandlePool};

use crate::common::{self, Alive, Rng};

/// The storages a reader must read: the default flat region, a small region
/// whose later slots live in buckets, and buckets alone.
fn configs() -> [(&'static str, Config); 3] {
    [
        ("default", Config::default()),
        (
            "16 flat slots",
            Config {
                flat_slots: 16,
                ..Config::default()
            },
        ),
        (
            "no flat region",
            Config {
                flat_slots: 0,
                ..Config::default()
            },
        ),
    ]
}

#[test]
fn a_reader_answers_as_the_pool_does() {
    for (name, config) in configs() {
        let pool = HandlePool::with_config(config);
        let handles: Vec<Handle> = (0..3000u64).map(|v| pool.insert(v)).collect();
        for h in handles.iter().step_by(3) {
            assert!(pool.remove(*h));
        }
        pool.flush();
        // Reused slots: the removed handles are stale, the new ones live.
        let reused: Vec<Handle> = (0..500u64).map(|v| pool.insert(10_000 + v)).collect();

        let mut probes: Vec<Handle> = handles.iter().chain(&reused).copied().collect();
        let mut rng = Rng::new(7);
        for &h in handles.iter().take(200) {
            // The same slot under other generations, and the slots next to it.
            for g in [0, 1, 2, h.generation() + 1, handle_pool::MAX_GENERATION] {
                probes.extend(Handle::from_bits(u64::from(g) << 32 | u64::from(h.index())));
            }
            probes.extend(Handle::from_bits(h.to_bits() + 1));
        }
        // Any bits at all, and indices far past the end.
        probes.extend((0..2000).filter_map(|_| Handle::from_bits(rng.next())));
        probes
            .extend((0..64).filter_map(|i| Handle::from_bits(1 << 32 | (u64::from(u32::MAX) - i))));

        let reader = pool.reader();
        let guard = reader.guard();
        let (mut hits, mut misses) = (0, 0);
        for &h in &probes {
            let expected = pool.get(h, guard);
            assert_eq!(reader.get(h), expected, "{name}: get({h:?})");
            assert_eq!(
                reader.contains(h),
                pool.contains(h),
                "{name}: contains({h:?})"
            );
            if expected.is_some() {
                hits += 1;
            } else {
                misses += 1;
            }
        }
        assert!(
            hits >= 2000 + 500,
            "{name}: every live handle found ({hits})"
        );
        assert!(
            misses >= 1000,
            "{name}: the probes include misses ({misses})"
        );
    }
}

#[test]
fn a_reader_finds_values_inserted_after_it_was_made() {
    // The reader sees an empty storage; every value below goes into slots
    // committed (flat region) or allocated (buckets) after it was made.
    for (name, config) in configs() {
        let pool = HandlePool::with_config(config);
        let reader = pool.reader();
        let handles: Vec<(Handle, u64)> = (0..100_000u64).map(|v| (pool.insert(v), v)).collect();
        for &(h, v) in &handles {
            assert_eq!(reader.get(h), Some(&v), "{name}: {h:?} inserted later");
            assert!(reader.contains(h), "{name}: {h:?} inserted later");
        }
    }
}

#[test]
fn a_readers_references_outlive_removal_until_it_repins() {
    let alive = Alive::new();
    let pool = HandlePool::new();
    let handles: Vec<Handle> = alive.values(100).map(|v| pool.insert(v)).collect();
    let mut reader = pool.reader();
    let held: Vec<_> = handles.iter().map(|&h| reader.get(h).unwrap()).collect();
    for &h in &handles {
        assert!(pool.remove(h));
        assert!(reader.get(h).is_none(), "stale at once");
        assert!(!reader.contains(h));
    }
    pool.flush();
    assert_eq!(
        alive.count(),
        100,
        "no value dropped while the reader holds them"
    );
    assert_eq!(held.len(), 100);
    drop(held);
    reader.repin();
    wait_until_dropped(&pool, &alive);
    assert_eq!(alive.count(), 0, "dropped once the reader repinned");
    drop(reader);

    // And once it is dropped.
    let more: Vec<Handle> = alive.values(100).map(|v| pool.insert(v)).collect();
    let reader = pool.reader();
    assert!(more.iter().all(|&h| reader.get(h).is_some()));
    for &h in &more {
        assert!(pool.remove(h));
    }
    pool.flush();
    assert_eq!(
        alive.count(),
        100,
        "no value dropped while the reader lives"
    );
    drop(reader);
    wait_until_dropped(&pool, &alive);
    assert_eq!(alive.count(), 0, "dropped once the reader is gone");
}

#[test]
fn a_nested_reader_keeps_the_outer_pin_until_it_repins() {
    // A reader made while another guard of the thread lives shares that
    // guard's pin (as documented on `Guard::repin`), also after it is
    // dropped: a value removed before the inner reader was made waits for
    // the inner reader's repin.
    let alive = Alive::new();
    let pool = HandlePool::new();
    let h = pool.insert(alive.value());
    let outer = pool.reader();
    assert!(pool.remove(h));
    let mut inner = pool.reader();
    drop(outer);
    pool.flush();
    assert_eq!(alive.count(), 1, "the inner reader holds the outer pin");
    inner.repin();
    wait_until_dropped(&pool, &alive);
    assert_eq!(alive.count(), 0, "dropped once the inner reader repinned");
}

/// Flushes until every value is dropped, for up to 5 s: guards are
/// process-wide, so another test's may hold the values back a while
/// longer (this binary's racing test holds a reader throughout).
fn wait_until_dropped(pool: &HandlePool<common::Counted>, alive: &Alive) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive.count() > 0 && Instant::now() < deadline {
        pool.flush();
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_reader_made_before_the_pool_grows_finds_the_new_slots_after_a_repin() {
    // After a repin the reader reads the storage again: the same answers.
    let pool = HandlePool::new();
    let mut reader = pool.reader();
    let first: Vec<(Handle, u64)> = (0..1000u64).map(|v| (pool.insert(v), v)).collect();
    reader.repin();
    let later: Vec<(Handle, u64)> = (1000..200_000u64).map(|v| (pool.insert(v), v)).collect();
    for &(h, v) in first.iter().chain(&later) {
        assert_eq!(reader.get(h), Some(&v));
    }
    reader.repin();
    for &(h, v) in first.iter().chain(&later) {
        assert_eq!(reader.get(h), Some(&v));
    }
}

new_handle_type! {
    /// A typed handle for the test below.
    struct Entity;
}

#[test]
fn a_reader_takes_the_pools_handle_type() {
    let pool: HandlePool<&str, Entity> = HandlePool::with_handle_type();
    let e = pool.insert("e");
    let reader = pool.reader();
    assert_eq!(reader.get(e), Some(&"e"));
    assert!(reader.contains(e));
    assert_eq!(pool.get(e, reader.guard()), Some(&"e"));
    assert_eq!(format!("{reader:?}"), "Reader { .. }");
}

/// One thread inserts (growing the pool past what the reader saw) and
/// removes; another looks up through one reader made before: it finds
/// every value published to it that was not removed, and never a value
/// other than the handle's own. The handles travel through atomics, not a
/// lock: std's locks are invisible to ThreadSanitizer (`.ci/tsan.supp`).
#[test]
fn a_reader_racing_inserts_and_removals() {
    const VALUES: usize = 50_000;
    for (name, config) in configs() {
        let pool: HandlePool<u64> = HandlePool::with_config(config);
        // Value `v`'s handle, published before `published` counts it.
        let handles: Vec<AtomicU64> = (0..VALUES).map(|_| AtomicU64::new(0)).collect();
        let published = AtomicUsize::new(0);
        // Joined explicitly: the scope's own wait synchronises inside
        // uninstrumented std, so ThreadSanitizer would not see the threads'
        // reads ordered before the pool's drop.
        common::scope(|s| {
            let writer = s.spawn(|| {
                for (v, bits) in handles.iter().enumerate() {
                    let h = pool.insert(v as u64);
                    // Every fourth value is removed again at once.
                    if v % 4 == 3 {
                        assert!(pool.remove(h));
                    }
                    bits.store(h.to_bits(), Ordering::Relaxed);
                    // Release pairs with the reader's Acquire load below.
                    published.store(v + 1, Ordering::Release);
                }
            });
            let reading = s.spawn(|| {
                let reader = pool.reader();
                let mut checked = 0;
                while checked < VALUES {
                    let end = published.load(Ordering::Acquire);
                    for (v, bits) in handles.iter().enumerate().take(end).skip(checked) {
                        let h = Handle::from_bits(bits.load(Ordering::Relaxed)).unwrap();
                        match reader.get(h) {
                            Some(&found) => assert_eq!(found, v as u64, "{name}: {h:?}"),
                            None => assert_eq!(v % 4, 3, "{name}: {h:?} ({v}) not found"),
                        }
                        assert_eq!(reader.contains(h), v % 4 != 3, "{name}: {h:?}");
                    }
                    checked = end;
                    std::hint::spin_loop();
                }
            });
            writer.join().unwrap();
            reading.join().unwrap();
        });
        assert_eq!(pool.len(), VALUES - VALUES / 4);
    }
}
