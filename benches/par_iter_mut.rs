//! Parallel mutation of every value (issue "A job system's first hour"):
//! `HandlePool::par_iter_mut` against the sequential `HandlePool::iter_mut`
//! and against `Vec<u64>::par_iter_mut`, the limit, each adding 1 to each
//! of 1M values, in a rayon pool of 1 and of 2 threads. Throughput is in
//! values. `HANDLE_POOL_BENCH_QUICK=1` shortens it.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use handle_pool::HandlePool;
use rayon::prelude::*;

const VALUES: usize = 1_000_000;

fn par_iter_mut(c: &mut Criterion) {
    let quick = std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0");
    let mut group = c.benchmark_group("par_iter_mut");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(if quick { 50 } else { 500 }));
    group.measurement_time(Duration::from_millis(if quick { 300 } else { 3_000 }));
    group.throughput(Throughput::Elements(VALUES as u64));
    let mut pool: HandlePool<u64> = (0..VALUES as u64).collect();
    let mut vec: Vec<u64> = (0..VALUES as u64).collect();
    for threads in [1, 2] {
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a rayon thread pool");
        let id = |name: &str| BenchmarkId::new(name, format!("{threads}t"));
        group.bench_function(id("HandlePool::par_iter_mut"), |b| {
            rayon_pool.install(|| {
                b.iter(|| pool.par_iter_mut().for_each(|(_, v)| *v += 1));
            })
        });
        // Sequential: the rayon pool's size does not matter to it; measured
        // under both for the table.
        group.bench_function(id("HandlePool::iter_mut"), |b| {
            rayon_pool.install(|| {
                b.iter(|| pool.iter_mut().for_each(|(_, v)| *v += 1));
            })
        });
        group.bench_function(id("Vec::par_iter_mut"), |b| {
            rayon_pool.install(|| {
                b.iter(|| vec.par_iter_mut().for_each(|v| *v += 1));
            })
        });
    }
    group.finish();
    black_box((pool.len(), vec.len()));
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    par_iter_mut(&mut criterion);
    criterion.final_summary();
}
