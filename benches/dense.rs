//! `DensePool` (issue 43): iteration after heavy churn against
//! `DenseSlotMap`, `SlotMap`, `HandlePool` and a `Vec` (the limit), one
//! thread and `par_values_mut`; lookups and churn against `HandlePool` at
//! 1, 2 and the machine's threads.
//!
//! "After heavy churn": a million values inserted, then all but `live` of
//! them removed (a seeded random choice, the same for every container);
//! the dense pool then passes its sync point (`compact`), as a frame loop
//! does, and a row "not compacted" shows what its `&self` iteration costs
//! before that. Each iteration sums the values (a `u64` each).
//!
//! `HANDLE_POOL_BENCH_QUICK=1` shortens it.

use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use handle_pool::{pin, DensePool, Handle, HandlePool};
use rayon::prelude::*;
use slotmap::{DefaultKey, DenseSlotMap, SlotMap};

/// Values inserted before the churn.
const HELD: usize = 1_000_000;

fn quick() -> bool {
    std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0")
}

fn new_group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    let quick = quick();
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(if quick { 100 } else { 500 }));
    group.measurement_time(Duration::from_millis(if quick { 400 } else { 3_000 }));
    group
}

/// xorshift64*, seeded: the same choices for every container.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Which of the `HELD` values stay: `live` of them, chosen at random.
fn survivors(live: usize) -> Vec<bool> {
    let mut keep = vec![false; HELD];
    let mut rng = Rng(0x5eed ^ live as u64);
    let mut kept = 0;
    while kept < live {
        let i = (rng.next() % HELD as u64) as usize;
        if !keep[i] {
            keep[i] = true;
            kept += 1;
        }
    }
    keep
}

/// The containers after the churn, each holding the same `live` values.
struct Churned {
    dense: DensePool<u64>,
    holey: DensePool<u64>,
    dense_slot_map: DenseSlotMap<DefaultKey, u64>,
    slot_map: SlotMap<DefaultKey, u64>,
    pool: HandlePool<u64>,
    vec: Vec<u64>,
}

fn churned(live: usize) -> Churned {
    let keep = survivors(live);
    let dense = DensePool::new();
    let holey = DensePool::new();
    let mut dense_slot_map = DenseSlotMap::new();
    let mut slot_map = SlotMap::new();
    let pool = HandlePool::new();
    let mut handles: Vec<(Handle, Handle, Handle, DefaultKey, DefaultKey)> =
        Vec::with_capacity(HELD);
    for v in 0..HELD as u64 {
        handles.push((
            dense.insert(v),
            holey.insert(v),
            pool.insert(v),
            dense_slot_map.insert(v),
            slot_map.insert(v),
        ));
    }
    let mut vec = Vec::with_capacity(live);
    for (i, &(d, h, p, dk, sk)) in handles.iter().enumerate() {
        if keep[i] {
            vec.push(i as u64);
        } else {
            dense.remove(d);
            holey.remove(h);
            pool.remove(p);
            dense_slot_map.remove(dk);
            slot_map.remove(sk);
        }
    }
    let mut dense = dense;
    dense.compact();
    pool.flush();
    Churned {
        dense,
        holey,
        dense_slot_map,
        slot_map,
        pool,
        vec,
    }
}

fn iteration(c: &mut Criterion) {
    for live in [1_000, 100_000] {
        let mut all = churned(live);
        let expected: u64 = all.vec.iter().sum();
        let mut group = new_group(c, &format!("dense_iter/{live}_of_1M"));
        group.throughput(Throughput::Elements(live as u64));
        let guard = pin();
        group.bench_function("DensePool::values (&self, compacted)", |b| {
            b.iter(|| black_box(all.dense.values(&guard).sum::<u64>()))
        });
        group.bench_function("DensePool::values (&self, not compacted)", |b| {
            b.iter(|| black_box(all.holey.values(&guard).sum::<u64>()))
        });
        group.bench_function("DenseSlotMap::values", |b| {
            b.iter(|| black_box(all.dense_slot_map.values().sum::<u64>()))
        });
        group.bench_function("SlotMap::values", |b| {
            b.iter(|| black_box(all.slot_map.values().sum::<u64>()))
        });
        group.bench_function("HandlePool::values (&self)", |b| {
            b.iter(|| black_box(all.pool.values(&guard).sum::<u64>()))
        });
        drop(guard);
        group.bench_function("DensePool::values_mut", |b| {
            b.iter(|| black_box(all.dense.values_mut().map(|v| *v).sum::<u64>()))
        });
        group.bench_function("Vec", |b| b.iter(|| black_box(all.vec.iter().sum::<u64>())));
        group.finish();
        assert_eq!(all.dense.values_mut().map(|v| *v).sum::<u64>(), expected);
        assert_eq!(all.dense_slot_map.values().sum::<u64>(), expected);

        let threads = thread::available_parallelism().map_or(1, |n| n.get());
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a rayon thread pool");
        let mut group = new_group(c, &format!("dense_par_iter_mut/{live}_of_1M"));
        group.throughput(Throughput::Elements(live as u64));
        let id = |name: &str| BenchmarkId::new(name, format!("{threads}t"));
        group.bench_function(id("DensePool::par_values_mut"), |b| {
            rayon_pool.install(|| b.iter(|| all.dense.par_values_mut().for_each(|v| *v += 1)))
        });
        group.bench_function(id("DensePool::par_iter_mut"), |b| {
            rayon_pool.install(|| b.iter(|| all.dense.par_iter_mut().for_each(|(_, v)| *v += 1)))
        });
        group.bench_function(id("HandlePool::par_values_mut"), |b| {
            rayon_pool.install(|| b.iter(|| all.pool.par_values_mut().for_each(|v| *v += 1)))
        });
        group.bench_function(id("Vec::par_iter_mut"), |b| {
            rayon_pool.install(|| b.iter(|| all.vec.par_iter_mut().for_each(|v| *v += 1)))
        });
        group.finish();
    }
}

/// The pools the lookup and churn groups compare.
trait Shared: Sync {
    const NAME: &'static str;
    fn new() -> Self;
    fn insert(&self, value: u64) -> Handle;
    fn remove(&self, handle: Handle) -> bool;
    /// Looks up every handle under one guard, summing the values.
    fn sum(&self, handles: &[Handle]) -> u64;
    /// The pool's sync point between samples (the dense pool compacts).
    fn settle(&mut self);
}

impl Shared for DensePool<u64> {
    const NAME: &'static str = "DensePool";
    fn new() -> Self {
        DensePool::new()
    }
    fn insert(&self, value: u64) -> Handle {
        DensePool::insert(self, value)
    }
    fn remove(&self, handle: Handle) -> bool {
        DensePool::remove(self, handle)
    }
    fn sum(&self, handles: &[Handle]) -> u64 {
        let guard = pin();
        handles.iter().filter_map(|&h| self.get(h, &guard)).sum()
    }
    fn settle(&mut self) {
        self.compact();
    }
}

impl Shared for HandlePool<u64> {
    const NAME: &'static str = "HandlePool";
    fn new() -> Self {
        HandlePool::new()
    }
    fn insert(&self, value: u64) -> Handle {
        HandlePool::insert(self, value)
    }
    fn remove(&self, handle: Handle) -> bool {
        HandlePool::remove(self, handle)
    }
    fn sum(&self, handles: &[Handle]) -> u64 {
        let guard = pin();
        handles.iter().filter_map(|&h| self.get(h, &guard)).sum()
    }
    fn settle(&mut self) {}
}

/// Runs `work(thread)` on `threads` threads started on a barrier; returns
/// the time from the first start to the last end.
fn timed(threads: usize, work: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    work(t);
                    (start, Instant::now())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let start = spans.iter().map(|s| s.0).min().unwrap();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    end - start
}

fn thread_counts() -> Vec<usize> {
    let n = thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, n];
    counts.dedup();
    counts
}

/// Lookups of 100k live values (after churn: 100k of 1M) in a random
/// order, each thread all of them, under one guard per pass of 1,024.
fn lookups<P: Shared>(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let keep = survivors(100_000);
    let mut pool = P::new();
    let all: Vec<Handle> = (0..HELD as u64).map(|v| pool.insert(v)).collect();
    let mut live = Vec::with_capacity(100_000);
    for (i, &h) in all.iter().enumerate() {
        if keep[i] {
            live.push(h);
        } else {
            pool.remove(h);
        }
    }
    pool.settle();
    let mut rng = Rng(7);
    for i in (1..live.len()).rev() {
        live.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    for threads in thread_counts() {
        group.throughput(Throughput::Elements((live.len() * threads) as u64));
        group.bench_function(BenchmarkId::new(P::NAME, format!("{threads}t")), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += timed(threads, |_| {
                        for chunk in live.chunks(1024) {
                            black_box(pool.sum(chunk));
                        }
                    });
                }
                total
            })
        });
    }
}

/// Insert and remove pairs, each thread keeping a window of 64 of its own
/// values; the pools pass their sync point between samples.
fn churn<P: Shared>(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    const PAIRS: usize = 100_000;
    let mut pool = P::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements((PAIRS * threads) as u64));
        group.bench_function(BenchmarkId::new(P::NAME, format!("{threads}t")), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += timed(threads, |t| {
                        let mut window = std::collections::VecDeque::with_capacity(64);
                        for i in 0..PAIRS as u64 {
                            window.push_back(pool.insert(i ^ t as u64));
                            if window.len() == 64 {
                                pool.remove(window.pop_front().unwrap());
                            }
                        }
                        for h in window {
                            pool.remove(h);
                        }
                    });
                    pool.settle();
                }
                total
            })
        });
    }
}

fn lookup_and_churn(c: &mut Criterion) {
    let mut group = new_group(c, "dense_lookup/100k_of_1M");
    lookups::<DensePool<u64>>(&mut group);
    lookups::<HandlePool<u64>>(&mut group);
    group.finish();
    let mut group = new_group(c, "dense_churn/pairs");
    churn::<DensePool<u64>>(&mut group);
    churn::<HandlePool<u64>>(&mut group);
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    iteration(&mut criterion);
    lookup_and_churn(&mut criterion);
    criterion.final_summary();
}
