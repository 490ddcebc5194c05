//! `SecondaryMap` against the maps a user would reach for instead: lookups
//! on one thread, and inserts from several.
//!
//! `cargo bench -p handle-pool-benches --bench secondary` runs:
//!
//! * `secondary_get/{100k,1M}/{random,sequential}`: one iteration is
//!   [`LOOKUPS`] lookups summed into a `black_box`ed accumulator, the next
//!   window of that many keys (all hits) in a key order shuffled once with
//!   a seeded `fastrand::Rng`, or in insertion order (slot index order).
//!   Throughput is in lookups. Function ids:
//!
//!   | id | call |
//!   |---|---|
//!   | `slotmap` | `slotmap::SecondaryMap<DefaultKey, u64>::get`, keyed by a `SlotMap`'s keys: the single-thread limit |
//!   | `hashmap` | `HashMap<Handle, u64>::get` (std's default hasher) |
//!   | `dashmap` | `DashMap<Handle, u64>::get` (its default hasher; a shard read lock per call) |
//!   | `hp_get` | `SecondaryMap::get(h, &guard)`, one guard held over the window |
//!   | `hp_with` | `SecondaryMap::with(h, \|v\| *v)`: one call, announced in the map's value pool |
//!   | `hp_cloned` | `SecondaryMap::get_cloned(h)` |
//!   | `hp_contains` | `SecondaryMap::contains(h)` (sums the hits) |
//!
//! * `secondary_insert/{threads}`: one iteration inserts [`INSERTS`] values
//!   for distinct handles (a primary pool's, or a `SlotMap`'s keys) into an
//!   empty map, split evenly among 1, 2 and the machine's threads, started
//!   on a barrier; the time runs from the barrier until the last thread is
//!   done (`iter_custom`). Every contender implements [`Inserts`]: the
//!   `SecondaryMap` through `&self`, `DashMap`, and `slotmap::SecondaryMap`
//!   and `HashMap` behind a `Mutex` (and bare, one thread only, as the
//!   limit).
//!
//! Options are criterion's (`-- --quick`, a filter such as
//! `-- secondary_get/1M`); `HANDLE_POOL_BENCH_QUICK=1` shortens the default
//! times, like the other benches.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use dashmap::DashMap;
use handle_pool::{pin, Handle, HandlePool, SecondaryMap};
use slotmap::{DefaultKey, SlotMap};

/// Lookups per criterion iteration.
const LOOKUPS: usize = 100_000;

/// Inserts per criterion iteration, over all threads.
const INSERTS: usize = 100_000;

/// Seed of the shuffled key order.
const SEED: u64 = 0x5eed_5ec0_0042;

/// Map sizes, with their group labels.
const SIZES: [(usize, &str); 2] = [(100_000, "100k"), (1_000_000, "1M")];

/// The same values (value `i` for the `i`-th entity) in every contender,
/// keyed by the `i`-th handle of a primary pool or key of a primary `SlotMap`.
struct Maps {
    slotmap: slotmap::SecondaryMap<DefaultKey, u64>,
    slotmap_keys: Vec<DefaultKey>,
    hashmap: HashMap<Handle, u64>,
    dashmap: DashMap<Handle, u64>,
    hp: SecondaryMap<u64>,
    handles: Vec<Handle>,
}

impl Maps {
    fn new(entries: usize) -> Self {
        let mut primary = SlotMap::with_capacity(entries);
        let slotmap_keys: Vec<DefaultKey> = (0..entries).map(|_| primary.insert(())).collect();
        let entities: HandlePool<()> = HandlePool::new();
        let handles: Vec<Handle> = (0..entries).map(|_| entities.insert(())).collect();

        let mut slotmap = slotmap::SecondaryMap::with_capacity(entries);
        let mut hashmap = HashMap::with_capacity(entries);
        let dashmap = DashMap::with_capacity(entries);
        let hp = SecondaryMap::new();
        for i in 0..entries {
            slotmap.insert(slotmap_keys[i], i as u64);
            hashmap.insert(handles[i], i as u64);
            dashmap.insert(handles[i], i as u64);
            hp.insert(handles[i], i as u64);
        }
        Maps {
            slotmap,
            slotmap_keys,
            hashmap,
            dashmap,
            hp,
            handles,
        }
    }
}

/// Positions in visiting order: `0..entries`, or those shuffled with [`SEED`].
fn order(entries: usize, random: bool) -> Vec<u32> {
    let mut order: Vec<u32> = (0..entries as u32).collect();
    if random {
        fastrand::Rng::with_seed(SEED).shuffle(&mut order);
    }
    order
}

/// `keys` in visiting order.
fn arrange<K: Copy>(keys: &[K], order: &[u32]) -> Vec<K> {
    order.iter().map(|&i| keys[i as usize]).collect()
}

/// A contender's pass over a window of keys: pin with `pin` (or not: `()`),
/// sum `lookup` over the keys, unpin.
#[inline(always)]
fn pass<K: Copy, G>(
    mut pin: impl FnMut() -> G,
    mut lookup: impl FnMut(&G, K) -> u64,
) -> impl FnMut(&[K]) -> u64 {
    move |window| {
        let guard = pin();
        let mut sum = 0u64;
        for &k in black_box(window) {
            sum = sum.wrapping_add(lookup(&guard, k));
        }
        drop(guard);
        sum
    }
}

/// Checks that a pass over all the keys sums to `expected`, then benches
/// `pass` as `id`: each iteration is one pass over the next window of
/// [`LOOKUPS`] keys.
fn bench<K: Copy>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    keys: &[K],
    expected: u64,
    mut pass: impl FnMut(&[K]) -> u64,
) {
    assert_eq!(keys.len() % LOOKUPS, 0, "whole windows only");
    assert_eq!(
        pass(keys),
        expected,
        "{id}: a lookup missed or read a wrong value"
    );
    let mut next = 0;
    group.bench_function(id, |b| {
        b.iter(|| {
            let window = &keys[next..next + LOOKUPS];
            next = (next + LOOKUPS) % keys.len();
            black_box(pass(window))
        })
    });
}

fn lookup_group(c: &mut Criterion, maps: &Maps, label: &str, kind: &str, order: &[u32]) {
    let slotmap_keys = arrange(&maps.slotmap_keys, order);
    let handles = arrange(&maps.handles, order);
    let entries = order.len() as u64;
    let value_sum = entries * (entries - 1) / 2;

    let mut group = c.benchmark_group(format!("secondary_get/{label}/{kind}"));
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(LOOKUPS as u64));

    let Maps {
        slotmap,
        hashmap,
        dashmap,
        hp,
        ..
    } = maps;
    bench(
        &mut group,
        "slotmap",
        &slotmap_keys,
        value_sum,
        pass(|| (), |_, k| slotmap.get(k).map_or(0, |&v| v)),
    );
    bench(
        &mut group,
        "hashmap",
        &handles,
        value_sum,
        pass(|| (), |_, h| hashmap.get(&h).map_or(0, |&v| v)),
    );
    bench(
        &mut group,
        "dashmap",
        &handles,
        value_sum,
        pass(|| (), |_, h| dashmap.get(&h).map_or(0, |v| *v)),
    );
    bench(
        &mut group,
        "hp_get",
        &handles,
        value_sum,
        pass(pin, |guard, h| hp.get(h, guard).map_or(0, |&v| v)),
    );
    bench(
        &mut group,
        "hp_with",
        &handles,
        value_sum,
        pass(|| (), |_, h| hp.with(h, |v| *v).unwrap_or(0)),
    );
    bench(
        &mut group,
        "hp_cloned",
        &handles,
        value_sum,
        pass(|| (), |_, h| hp.get_cloned(h).unwrap_or(0)),
    );
    bench(
        &mut group,
        "hp_contains",
        &handles,
        entries,
        pass(|| (), |_, h| u64::from(hp.contains(h))),
    );
    group.finish();
}

/// A map that many threads insert into at once.
trait Inserts: Sync {
    type Key: Copy + Send + Sync;
    fn new() -> Self;
    fn insert(&self, key: Self::Key, value: u64);
    fn len(&self) -> usize;
}

impl Inserts for SecondaryMap<u64> {
    type Key = Handle;
    fn new() -> Self {
        SecondaryMap::new()
    }
    fn insert(&self, key: Handle, value: u64) {
        SecondaryMap::insert(self, key, value);
    }
    fn len(&self) -> usize {
        SecondaryMap::len(self)
    }
}

impl Inserts for DashMap<Handle, u64> {
    type Key = Handle;
    fn new() -> Self {
        DashMap::new()
    }
    fn insert(&self, key: Handle, value: u64) {
        DashMap::insert(self, key, value);
    }
    fn len(&self) -> usize {
        DashMap::len(self)
    }
}

impl Inserts for Mutex<slotmap::SecondaryMap<DefaultKey, u64>> {
    type Key = DefaultKey;
    fn new() -> Self {
        Mutex::new(slotmap::SecondaryMap::new())
    }
    fn insert(&self, key: DefaultKey, value: u64) {
        self.lock().unwrap().insert(key, value);
    }
    fn len(&self) -> usize {
        self.lock().unwrap().len()
    }
}

impl Inserts for Mutex<HashMap<Handle, u64>> {
    type Key = Handle;
    fn new() -> Self {
        Mutex::new(HashMap::new())
    }
    fn insert(&self, key: Handle, value: u64) {
        self.lock().unwrap().insert(key, value);
    }
    fn len(&self) -> usize {
        self.lock().unwrap().len()
    }
}

/// Inserts `keys` (value `i` for the `i`-th) into a fresh `M`, split among
/// `threads` started on a barrier; returns the time from the barrier until
/// the last is done. The map is made before and dropped after the timing.
fn timed_inserts<M: Inserts>(keys: &[M::Key], threads: usize) -> Duration {
    let map = M::new();
    let barrier = Barrier::new(threads + 1);
    let chunk = keys.len().div_ceil(threads);
    let elapsed = thread::scope(|s| {
        for (part, keys) in keys.chunks(chunk).enumerate() {
            let (map, barrier) = (&map, &barrier);
            s.spawn(move || {
                barrier.wait();
                for (i, &key) in keys.iter().enumerate() {
                    map.insert(key, (part * chunk + i) as u64);
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every thread before it returns.
        start
    })
    .elapsed();
    assert_eq!(map.len(), keys.len());
    drop(black_box(map));
    elapsed
}

/// The bare single-thread limits: `slotmap::SecondaryMap` and `HashMap`
/// through `&mut`, no lock.
fn timed_unsync_inserts<K: Copy, M>(
    keys: &[K],
    mut map: M,
    insert: impl Fn(&mut M, K, u64),
) -> Duration {
    let start = Instant::now();
    for (i, &key) in keys.iter().enumerate() {
        insert(&mut map, key, i as u64);
    }
    let elapsed = start.elapsed();
    drop(black_box(map));
    elapsed
}

fn insert_groups(c: &mut Criterion) {
    let mut primary = SlotMap::with_capacity(INSERTS);
    let keys: Vec<DefaultKey> = (0..INSERTS).map(|_| primary.insert(())).collect();
    let entities: HandlePool<()> = HandlePool::new();
    let handles: Vec<Handle> = (0..INSERTS).map(|_| entities.insert(())).collect();

    let machine = thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, machine];
    counts.dedup();
    counts.sort_unstable();
    counts.dedup();

    let mut group = c.benchmark_group("secondary_insert");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(INSERTS as u64));
    for &threads in &counts {
        group.bench_function(BenchmarkId::new("hp", threads), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| timed_inserts::<SecondaryMap<u64>>(&handles, threads))
                    .sum()
            })
        });
        group.bench_function(BenchmarkId::new("dashmap", threads), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| timed_inserts::<DashMap<Handle, u64>>(&handles, threads))
                    .sum()
            })
        });
        group.bench_function(BenchmarkId::new("mutex_slotmap", threads), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        timed_inserts::<Mutex<slotmap::SecondaryMap<DefaultKey, u64>>>(
                            &keys, threads,
                        )
                    })
                    .sum()
            })
        });
        group.bench_function(BenchmarkId::new("mutex_hashmap", threads), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| timed_inserts::<Mutex<HashMap<Handle, u64>>>(&handles, threads))
                    .sum()
            })
        });
    }
    group.bench_function(BenchmarkId::new("slotmap", 1), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    timed_unsync_inserts(&keys, slotmap::SecondaryMap::new(), |m, k, v| {
                        m.insert(k, v);
                    })
                })
                .sum()
        })
    });
    group.bench_function(BenchmarkId::new("hashmap", 1), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    timed_unsync_inserts(&handles, HashMap::new(), |m, k, v| {
                        m.insert(k, v);
                    })
                })
                .sum()
        })
    });
    group.finish();
}

fn main() {
    let quick = std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0");
    let (warm_up, measurement) = if quick {
        (Duration::from_millis(200), Duration::from_millis(500))
    } else {
        (Duration::from_secs(1), Duration::from_secs(3))
    };
    let mut c = Criterion::default()
        .warm_up_time(warm_up)
        .measurement_time(measurement)
        .sample_size(20)
        .configure_from_args();
    for (entries, label) in SIZES {
        let maps = Maps::new(entries);
        for (kind, random) in [("random", true), ("sequential", false)] {
            lookup_group(&mut c, &maps, label, kind, &order(entries, random));
        }
    }
    insert_groups(&mut c);
    c.final_summary();
}
