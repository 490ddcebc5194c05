//! `Clone` of a whole pool against `SlotMap::clone`, the unsynchronised
//! limit, and dropping such a clone against dropping the `SlotMap`'s: 100k
//! and 1M entries, `u64` and `String` values, with every slot live and
//! with a seeded half removed (every handle keeps its meaning in either
//! clone, stale ones included). Throughput is in slots. The clone rows time
//! a clone and its drop (timing the clone alone keeps every clone alive
//! until the end, and then page faults on fresh memory are most of what it
//! measures); the drop rows time the drop alone.
//! `HANDLE_POOL_BENCH_QUICK=1` shortens it.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use handle_pool::HandlePool;
use slotmap::SlotMap;

/// Seed of the half removed.
const SEED: u64 = 0xc1_0e5;

/// Both tables with `entries` values made by `value`, and the same half of
/// them removed if `half_removed` (reclaimed, so the pool's slots are free).
fn tables<V>(
    entries: usize,
    half_removed: bool,
    value: impl Fn(u64) -> V,
) -> (HandlePool<V>, SlotMap<slotmap::DefaultKey, V>) {
    let mut pool = HandlePool::new();
    let mut map = SlotMap::new();
    let pairs: Vec<_> = (0..entries as u64)
        .map(|v| (pool.insert(value(v)), map.insert(value(v))))
        .collect();
    if half_removed {
        let mut rng = fastrand::Rng::with_seed(SEED);
        for (h, k) in pairs {
            if rng.bool() {
                assert!(pool.remove(h));
                map.remove(k);
            }
        }
        pool.reclaim();
    }
    assert_eq!(pool.len(), map.len());
    (pool, map)
}

fn group<V: Clone>(c: &mut Criterion, name: &str, value: impl Fn(u64) -> V + Copy) {
    let quick = std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0");
    let mut group = c.benchmark_group(format!("clone/{name}"));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(if quick { 50 } else { 500 }));
    group.measurement_time(Duration::from_millis(if quick { 300 } else { 3_000 }));
    for entries in [100_000usize, 1_000_000] {
        for half_removed in [false, true] {
            let (pool, map) = tables(entries, half_removed, value);
            let shape = format!(
                "{}k{}",
                entries / 1000,
                if half_removed { "_half_removed" } else { "" }
            );
            group.throughput(Throughput::Elements(entries as u64));
            group.bench_function(BenchmarkId::new("slotmap", &shape), |b| {
                b.iter(|| black_box(map.clone()))
            });
            group.bench_function(BenchmarkId::new("handle_pool", &shape), |b| {
                b.iter(|| black_box(pool.clone()))
            });
            group.bench_function(BenchmarkId::new("slotmap_drop", &shape), |b| {
                b.iter_batched(|| map.clone(), drop, BatchSize::LargeInput)
            });
            group.bench_function(BenchmarkId::new("handle_pool_drop", &shape), |b| {
                b.iter_batched(|| pool.clone(), drop, BatchSize::LargeInput)
            });
        }
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    group(&mut criterion, "u64", |v| v);
    group(&mut criterion, "string", |v| v.to_string());
    criterion.final_summary();
}
