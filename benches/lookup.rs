//! Single-threaded lookup microbenchmark: what one `get` costs in
//! `handle_pool` against the unsynchronised `SlotMap` (the limit) and
//! concurrent-slotmap, and what each of `handle_pool`'s lookup calls costs.
//!
//! `cargo bench -p handle-pool-benches --bench lookup` runs one group per
//! table size (100k, 1M `u64` values) and key order:
//!
//! * `random`: the keys in an order shuffled once with a seeded
//!   `fastrand::Rng` (the same permutation for every contender);
//! * `sequential`: the keys in insertion order (for each table here, that is
//!   slot index order);
//! * `half_stale` (100k only): the random order, after half the values
//!   (the same ones, picked with a seeded `fastrand::Rng`) were removed from
//!   every table, so half the lookups miss at random. A lookup that branches
//!   on its answer pays a mispredicted branch for most misses; one that
//!   computes its answer without a branch does not. `contains` answers
//!   without one, like `SlotMap::contains_key` and concurrent-slotmap's
//!   `get(..).is_some()`: this group keeps it so (`docs/perf/0033`).
//!
//! Each group has one function id per contender, so their ratios read side by
//! side:
//!
//! | id            | call                                                        |
//! |---------------|-------------------------------------------------------------|
//! | `slotmap`     | `SlotMap<DefaultKey, u64>::get`, no synchronisation: the limit |
//! | `cs_guard`    | concurrent-slotmap `get`, one guard held over the iteration |
//! | `slotmap_contains` | `SlotMap::contains_key`, no synchronisation          |
//! | `cs_guard_contains` | concurrent-slotmap `get(..).is_some()`, one guard held (it has no `contains`) |
//! | `cs_pin`      | concurrent-slotmap `get`, pinning per call                  |
//! | `hp_get`      | `HandlePool::get(h, &guard)`, one `handle_pool::pin()` guard held over the iteration |
//! | `hp_contains` | `HandlePool::contains(h)` (sums the hits)                   |
//! | `hp_reader_get` | `Reader::get(h)`: one `pool.reader()` per iteration, as `hp_get`'s guard |
//! | `hp_reader_contains` | `Reader::contains(h)`, through the same kind of reader |
//! | `hp_cloned`   | `HandlePool::get_cloned(h)` (pins per call)                 |
//! | `hp_with`     | `HandlePool::with(h, \|v\| *v)` (pins per call)              |
//!
//! One iteration is [`LOOKUPS`] lookups (all hits but in `half_stale`), summed into a
//! `black_box`ed accumulator: the next window of that many keys in the
//! contender's key order. At 100k entries a window is a whole pass; at 1M
//! the windows take turns, so the iterations together still visit the whole
//! table. Every contender starts at the first window and sees the same
//! windows in the same order. Throughput is in lookups.
//!
//! Options are criterion's: `-- --quick`, `-- --warm-up-time 1
//! --measurement-time 3`, a filter such as `-- lookup/1M/random`.
//! `HANDLE_POOL_BENCH_QUICK=1` shortens the default times, like the other
//! benches. Instruction counts of the same loops, under callgrind: the
//! `lookup_icount` binary.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use handle_pool::{Handle, HandlePool, Reader};
use slotmap::{DefaultKey, SlotMap};

type CsMap = concurrent_slotmap::SlotMap<concurrent_slotmap::SlotId, u64>;
type CsKey = concurrent_slotmap::SlotId;

/// Lookups per criterion iteration.
const LOOKUPS: usize = 100_000;

/// Seed of the shuffled key order.
const SEED: u64 = 0x5eed_1007_c0de;

/// Table sizes, with their group labels.
const SIZES: [(usize, &str); 2] = [(100_000, "100k"), (1_000_000, "1M")];

/// The same values, inserted in the same order (value `i` is the `i`-th
/// insert), in each contender's table.
struct Tables {
    slotmap: SlotMap<DefaultKey, u64>,
    slotmap_keys: Vec<DefaultKey>,
    cs: CsMap,
    cs_keys: Vec<CsKey>,
    hp: HandlePool<u64>,
    hp_keys: Vec<Handle>,
}

impl Tables {
    /// Removes the values at `positions` (insert numbers) from every table.
    fn remove(&mut self, positions: &[u32]) {
        let guard = self.cs.pin();
        for &i in positions {
            let i = i as usize;
            assert!(self.slotmap.remove(self.slotmap_keys[i]).is_some());
            assert!(self.cs.remove(self.cs_keys[i], &guard).is_some());
            assert!(self.hp.remove(self.hp_keys[i]));
        }
    }

    fn new(entries: usize) -> Self {
        let mut slotmap = SlotMap::with_capacity(entries);
        let slotmap_keys: Vec<DefaultKey> =
            (0..entries as u64).map(|v| slotmap.insert(v)).collect();

        // As `cs_new` in `workloads/adapters.rs`: its capacity is fixed at
        // construction (a reservation committed as it grows).
        let cs = CsMap::new((entries.max(1024) as u64 * 2).min(u32::MAX as u64 / 2) as u32);
        let cs_keys: Vec<CsKey> = {
            let guard = cs.pin();
            (0..entries as u64).map(|v| cs.insert(v, &guard)).collect()
        };

        let hp = HandlePool::new();
        let hp_keys: Vec<Handle> = (0..entries as u64).map(|v| hp.insert(v)).collect();

        Tables {
            slotmap,
            slotmap_keys,
            cs,
            cs_keys,
            hp,
            hp_keys,
        }
    }
}

/// Positions (insert numbers) in visiting order: `0..entries`, or those
/// shuffled with [`SEED`].
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

/// A contender's pass over a window of keys, as one criterion iteration
/// does it: pin with `pin` (or not: `()`), sum `lookup` over the keys, unpin.
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

/// [`pass`] for lookups through a [`Reader`]: make the reader (it pins),
/// sum `lookup` over the keys, drop it.
#[inline(always)]
fn reader_pass<'p>(
    pool: &'p HandlePool<u64>,
    lookup: impl Fn(&Reader<'_, u64>, Handle) -> u64 + 'p,
) -> impl FnMut(&[Handle]) -> u64 + 'p {
    move |window| {
        let reader = pool.reader();
        let mut sum = 0u64;
        for &k in black_box(window) {
            sum = sum.wrapping_add(lookup(&reader, k));
        }
        sum
    }
}

/// Checks that one pass over all the keys sums to `expected` (every lookup
/// hits and reads the right value), then benches `pass` as `id` in `group`:
/// each iteration is one pass over the next window of [`LOOKUPS`] keys.
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

/// What a pass over all the keys of a table sums to: the number of values
/// in it and their sum (value `i` is the `i`-th insert, so neither depends
/// on the order).
struct Expected {
    hits: u64,
    value_sum: u64,
}

impl Expected {
    /// Every value of `0..entries` but those at `removed`.
    fn without(entries: usize, removed: &[u32]) -> Self {
        let all = (entries as u64) * (entries as u64 - 1) / 2;
        Expected {
            hits: (entries - removed.len()) as u64,
            value_sum: all - removed.iter().map(|&i| u64::from(i)).sum::<u64>(),
        }
    }
}

/// The group `lookup/{label}/{kind}` over `tables`' keys in `order`.
fn lookup_group(
    c: &mut Criterion,
    tables: &Tables,
    label: &str,
    kind: &str,
    order: &[u32],
    expected: &Expected,
) {
    let slotmap_keys = arrange(&tables.slotmap_keys, order);
    let cs_keys = arrange(&tables.cs_keys, order);
    let hp_keys = arrange(&tables.hp_keys, order);
    let Expected { hits, value_sum } = *expected;

    let mut group = c.benchmark_group(format!("lookup/{label}/{kind}"));
    // One iteration is LOOKUPS lookups (up to milliseconds when they miss
    // the cache): flat sampling keeps the runs to the measurement time.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(LOOKUPS as u64));

    let (sm, cs, hp) = (&tables.slotmap, &tables.cs, &tables.hp);
    bench(
        &mut group,
        "slotmap",
        &slotmap_keys,
        value_sum,
        pass(|| (), |_, k| sm.get(k).map_or(0, |&v| v)),
    );
    bench(
        &mut group,
        "cs_guard",
        &cs_keys,
        value_sum,
        pass(|| cs.pin(), |guard, k| cs.get(k, guard).map_or(0, |&v| v)),
    );
    // Membership tests, to set against `hp_contains` like for like:
    // `SlotMap`'s own, and concurrent-slotmap's `get` with its value unread
    // (it has no `contains`).
    bench(
        &mut group,
        "slotmap_contains",
        &slotmap_keys,
        hits,
        pass(|| (), |_, k| u64::from(sm.contains_key(k))),
    );
    bench(
        &mut group,
        "cs_guard_contains",
        &cs_keys,
        hits,
        pass(
            || cs.pin(),
            |guard, k| u64::from(cs.get(k, guard).is_some()),
        ),
    );
    bench(
        &mut group,
        "cs_pin",
        &cs_keys,
        value_sum,
        pass(|| (), |_, k| cs.get(k, &cs.pin()).map_or(0, |&v| v)),
    );
    bench(
        &mut group,
        "hp_get",
        &hp_keys,
        value_sum,
        pass(handle_pool::pin, |guard, k| {
            hp.get(k, guard).map_or(0, |&v| v)
        }),
    );
    bench(
        &mut group,
        "hp_contains",
        &hp_keys,
        hits,
        pass(|| (), |_, k| u64::from(hp.contains(k))),
    );
    // A reader per pass, as `hp_get`'s guard: the pool's storage is read
    // once per pass, where `hp_get` and `hp_contains` read it per lookup.
    bench(
        &mut group,
        "hp_reader_get",
        &hp_keys,
        value_sum,
        reader_pass(hp, |reader, k| reader.get(k).map_or(0, |&v| v)),
    );
    bench(
        &mut group,
        "hp_reader_contains",
        &hp_keys,
        hits,
        reader_pass(hp, |reader, k| u64::from(reader.contains(k))),
    );
    bench(
        &mut group,
        "hp_cloned",
        &hp_keys,
        value_sum,
        pass(|| (), |_, k| hp.get_cloned(k).unwrap_or(0)),
    );
    bench(
        &mut group,
        "hp_with",
        &hp_keys,
        value_sum,
        pass(|| (), |_, k| hp.with(k, |v| *v).unwrap_or(0)),
    );
    group.finish();
}

fn main() {
    let quick = std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0");
    let (warm_up, measurement) = if quick {
        (Duration::from_millis(200), Duration::from_millis(500))
    } else {
        (Duration::from_secs(1), Duration::from_secs(3))
    };
    // Defaults only: the command line overrides them.
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(warm_up)
        .measurement_time(measurement)
        .configure_from_args();
    for (entries, label) in SIZES {
        let mut tables = Tables::new(entries);
        let all = Expected::without(entries, &[]);
        for (kind, random) in [("random", true), ("sequential", false)] {
            lookup_group(&mut c, &tables, label, kind, &order(entries, random), &all);
        }
        if entries == 100_000 {
            let mut rng = fastrand::Rng::with_seed(SEED ^ 0x57a1e);
            let removed: Vec<u32> = (0..entries as u32).filter(|_| rng.bool()).collect();
            tables.remove(&removed);
            let expected = Expected::without(entries, &removed);
            lookup_group(
                &mut c,
                &tables,
                label,
                "half_stale",
                &order(entries, true),
                &expected,
            );
        }
    }
    c.final_summary();
}
