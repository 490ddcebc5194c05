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
//! `dense_get/{100k,1M}/{random,sequential}`: single-thread lookups of
//! every handle of a table of that many values (inserted in order, none
//! removed), in an order shuffled once with a seeded `fastrand::Rng` or in
//! insertion order, against `DenseSlotMap::get` (two dependent loads, the
//! floor for a dense layout) and `HandlePool` (one load); one iteration is a
//! window of [`LOOKUPS`] lookups summed into a `black_box`ed accumulator.
//!
//! `HANDLE_POOL_BENCH_QUICK=1` shortens it.
//!
//! Two modes without criterion, for noisy shared machines and for
//! instruction counts:
//!
//! * `DENSE_PASSES=n cargo bench -p handle-pool-benches --bench dense`
//!   runs every lookup and iteration contender `n` times, interleaved (one
//!   pass of each in turn), and prints each one's minimum time per element
//!   and its ratio to the references.
//! * `DENSE_ICOUNT=<contender> [DENSE_ENTRIES=100000] [DENSE_ROUNDS=10]`
//!   runs that lookup contender's loop `DENSE_ROUNDS` times over a table of
//!   `DENSE_ENTRIES`, in random order, and exits: under callgrind, the run
//!   minus a `DENSE_ROUNDS=0` run, over `rounds × entries`, is instructions
//!   per lookup (see `benches/src/bin/lookup_icount.rs`).

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

/// Lookups per criterion iteration of `dense_get`.
const LOOKUPS: usize = 100_000;

/// Seed of the shuffled lookup order.
const SEED: u64 = 0x5eed_de05_e043;

/// The lookup contenders, each holding `entries` values (value `i` for the
/// `i`-th inserted), with their keys in visiting order.
struct Tables {
    dense: DensePool<u64>,
    dense_handles: Vec<Handle>,
    pool: HandlePool<u64>,
    pool_handles: Vec<Handle>,
    dense_slot_map: DenseSlotMap<DefaultKey, u64>,
    dsm_keys: Vec<DefaultKey>,
    /// The sum of every value: what a pass of `get` returns.
    sum: u64,
}

impl Tables {
    fn new(entries: usize, random: bool) -> Self {
        let dense = DensePool::new();
        let pool = HandlePool::new();
        let mut dense_slot_map = DenseSlotMap::new();
        let mut dense_handles = Vec::with_capacity(entries);
        let mut pool_handles = Vec::with_capacity(entries);
        let mut dsm_keys = Vec::with_capacity(entries);
        for v in 0..entries as u64 {
            dense_handles.push(dense.insert(v));
            pool_handles.push(pool.insert(v));
            dsm_keys.push(dense_slot_map.insert(v));
        }
        if random {
            let mut order: Vec<usize> = (0..entries).collect();
            fastrand::Rng::with_seed(SEED).shuffle(&mut order);
            dense_handles = order.iter().map(|&i| dense_handles[i]).collect();
            pool_handles = order.iter().map(|&i| pool_handles[i]).collect();
            dsm_keys = order.iter().map(|&i| dsm_keys[i]).collect();
        }
        let entries = entries as u64;
        Tables {
            dense,
            dense_handles,
            pool,
            pool_handles,
            dense_slot_map,
            dsm_keys,
            sum: entries * (entries - 1) / 2,
        }
    }
}

/// The lookup contenders' names, in the order the modes run them.
const LOOKUP_CONTENDERS: [&str; 8] = [
    "DenseSlotMap::get",
    "HandlePool::get",
    "HandlePool::contains",
    "HandlePool::with",
    "DensePool::get",
    "DensePool::with",
    "DensePool::contains",
    "DensePool::position",
];

/// One pass of contender `which` over `range` of the keys: the sum of the
/// values found (or of the hits, for `contains`). Not inlined, so that each
/// contender's loop is compiled on its own and is one symbol for callgrind.
#[inline(never)]
fn lookup_pass(tables: &Tables, which: usize, range: std::ops::Range<usize>) -> u64 {
    let mut sum = 0u64;
    match which {
        0 => {
            let map = &tables.dense_slot_map;
            for &k in black_box(&tables.dsm_keys[range]) {
                sum = sum.wrapping_add(map.get(k).map_or(0, |&v| v));
            }
        }
        1 => {
            let guard = pin();
            for &h in black_box(&tables.pool_handles[range]) {
                sum = sum.wrapping_add(tables.pool.get(h, &guard).map_or(0, |&v| v));
            }
        }
        2 => {
            for &h in black_box(&tables.pool_handles[range]) {
                sum = sum.wrapping_add(u64::from(tables.pool.contains(h)));
            }
        }
        3 => {
            for &h in black_box(&tables.pool_handles[range]) {
                sum = sum.wrapping_add(tables.pool.with(h, |&v| v).unwrap_or(0));
            }
        }
        4 => {
            let guard = pin();
            for &h in black_box(&tables.dense_handles[range]) {
                sum = sum.wrapping_add(tables.dense.get(h, &guard).map_or(0, |&v| v));
            }
        }
        5 => {
            for &h in black_box(&tables.dense_handles[range]) {
                sum = sum.wrapping_add(tables.dense.with(h, |&v| v).unwrap_or(0));
            }
        }
        6 => {
            for &h in black_box(&tables.dense_handles[range]) {
                sum = sum.wrapping_add(u64::from(tables.dense.contains(h)));
            }
        }
        _ => {
            for &h in black_box(&tables.dense_handles[range]) {
                sum = sum.wrapping_add(tables.dense.position(h).map_or(0, |p| p as u64 + 1));
            }
        }
    }
    black_box(sum)
}

/// What a full pass of contender `which` returns.
fn expected_pass(tables: &Tables, which: usize) -> u64 {
    let entries = tables.dense_handles.len() as u64;
    match which {
        2 | 6 => entries,
        // Positions 0.. in insertion order, plus one each.
        7 => entries * (entries + 1) / 2,
        _ => tables.sum,
    }
}

/// The lookup layouts: label, entries, random order.
const LAYOUTS: [(&str, usize, bool); 4] = [
    ("100k/random", 100_000, true),
    ("100k/sequential", 100_000, false),
    ("1M/random", 1_000_000, true),
    ("1M/sequential", 1_000_000, false),
];

fn get_groups(c: &mut Criterion) {
    for (label, entries, random) in LAYOUTS {
        let tables = Tables::new(entries, random);
        let mut group = new_group(c, &format!("dense_get/{label}"));
        group.throughput(Throughput::Elements(LOOKUPS as u64));
        for (which, name) in LOOKUP_CONTENDERS.iter().enumerate() {
            assert_eq!(
                lookup_pass(&tables, which, 0..entries),
                expected_pass(&tables, which),
                "{name}: a lookup missed or read a wrong value"
            );
            let mut next = 0;
            group.bench_function(*name, |b| {
                b.iter(|| {
                    let start = next;
                    next = (next + LOOKUPS) % entries;
                    lookup_pass(&tables, which, start..start + LOOKUPS)
                })
            });
        }
        group.finish();
    }
}

/// A named pass that returns a checksum.
type Contender<'a> = (&'static str, Box<dyn FnMut() -> u64 + 'a>);

/// The minimum of `passes` interleaved timings of each of `contenders`
/// (each timed call returns a checksum, compared with the first pass's),
/// in nanoseconds per element.
fn interleaved(passes: usize, elements: usize, contenders: &mut [Contender<'_>]) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; contenders.len()];
    let mut sums = vec![None; contenders.len()];
    for _ in 0..passes {
        for (i, (name, run)) in contenders.iter_mut().enumerate() {
            let start = Instant::now();
            let sum = run();
            let ns = start.elapsed().as_nanos() as f64 / elements as f64;
            assert_eq!(*sums[i].get_or_insert(sum), sum, "{name}: a different sum");
            best[i] = best[i].min(ns);
        }
    }
    best
}

/// `DENSE_PASSES` mode: lookups and iterations, interleaved, minimum of
/// `passes`, with ratios (a ratio is the reference's time over the
/// contender's: above 1 is faster than the reference).
fn passes_mode(passes: usize) {
    println!("lookups: ns per lookup, min of {passes} interleaved passes over every key");
    for (label, entries, random) in LAYOUTS {
        let tables = Tables::new(entries, random);
        let mut contenders: Vec<Contender<'_>> = Vec::new();
        for (which, name) in LOOKUP_CONTENDERS.iter().enumerate() {
            assert_eq!(
                lookup_pass(&tables, which, 0..entries),
                expected_pass(&tables, which)
            );
            let tables = &tables;
            contenders.push((
                name,
                Box::new(move || lookup_pass(tables, which, 0..entries)),
            ));
        }
        let best = interleaved(passes, entries, &mut contenders);
        let (dsm, hp) = (best[0], best[1]);
        for (i, (name, _)) in contenders.iter().enumerate() {
            println!(
                "  {label:16} {name:22} {:7.2} ns   vs HandlePool::get {:5.2}x   vs DenseSlotMap::get {:5.2}x",
                best[i],
                hp / best[i],
                dsm / best[i]
            );
        }
    }
    println!("iteration: ns per live value, min of {passes} interleaved passes");
    for live in [1_000, 100_000] {
        let mut all = churned(live);
        let reps = 1_000_000 / live;
        let guard = pin();
        let (dense, holey, dsm, vec) = (&all.dense, &all.holey, &all.dense_slot_map, &all.vec);
        let mut contenders: Vec<Contender<'_>> = vec![
            (
                "DenseSlotMap::values",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(dsm).values().sum::<u64>())
                        .sum()
                }),
            ),
            (
                "DensePool::values (&self, compacted)",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(dense).values(&guard).sum::<u64>())
                        .sum()
                }),
            ),
            (
                "DenseSlotMap::iter",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(dsm).iter().map(|(_, v)| *v).sum::<u64>())
                        .sum()
                }),
            ),
            (
                "DensePool::iter (&self, compacted)",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(dense).iter(&guard).map(|(_, v)| *v).sum::<u64>())
                        .sum()
                }),
            ),
            (
                "Vec",
                Box::new(|| (0..reps).map(|_| black_box(vec).iter().sum::<u64>()).sum()),
            ),
        ];
        let best = interleaved(passes, reps * live, &mut contenders);
        for (i, (name, _)) in contenders.iter().enumerate() {
            println!(
                "  {live:>7}_of_1M {name:42} {:7.3} ns   vs DenseSlotMap::values {:5.2}x",
                best[i],
                best[0] / best[i]
            );
        }
        drop(contenders);
        // A million positions, mostly holes: apart, so that its misses do
        // not spill into the others' passes.
        let mut contenders: Vec<Contender<'_>> = vec![
            (
                "DenseSlotMap::values",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(dsm).values().sum::<u64>())
                        .sum()
                }),
            ),
            (
                "DensePool::values (&self, not compacted)",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(holey).values(&guard).sum::<u64>())
                        .sum()
                }),
            ),
        ];
        let best = interleaved(passes, reps * live, &mut contenders);
        for (i, (name, _)) in contenders.iter().enumerate() {
            println!(
                "  {live:>7}_of_1M {name:42} {:7.3} ns   vs DenseSlotMap::values {:5.2}x",
                best[i],
                best[0] / best[i]
            );
        }
        drop(contenders);
        drop(guard);
        // `values_mut` needs the pool mutably: its own interleaving, with
        // the slot map's and the Vec's loops again.
        let Churned {
            dense,
            dense_slot_map,
            vec,
            ..
        } = &mut all;
        let mut contenders: Vec<Contender<'_>> = vec![
            (
                "DenseSlotMap::values",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(&*dense_slot_map).values().sum::<u64>())
                        .sum()
                }),
            ),
            (
                "DensePool::values_mut",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(&mut *dense).values_mut().map(|v| *v).sum::<u64>())
                        .sum()
                }),
            ),
            (
                "Vec",
                Box::new(|| {
                    (0..reps)
                        .map(|_| black_box(&*vec).iter().sum::<u64>())
                        .sum()
                }),
            ),
        ];
        let best = interleaved(passes, reps * live, &mut contenders);
        for (i, (name, _)) in contenders.iter().enumerate() {
            println!(
                "  {live:>7}_of_1M {name:42} {:7.3} ns   vs DenseSlotMap::values {:5.2}x",
                best[i],
                best[0] / best[i]
            );
        }
    }
}

/// `DENSE_ICOUNT` mode: one lookup contender's loop, `rounds` times.
fn icount_mode(which: &str) {
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .map_or(default, |v| v.parse().expect("a count"))
    };
    let entries = var("DENSE_ENTRIES", 100_000);
    let rounds = var("DENSE_ROUNDS", 10);
    if let Some(which) = which.strip_prefix("iter:") {
        return iteration_icount(which, var("DENSE_LIVE", 1_000), rounds);
    }
    let which = LOOKUP_CONTENDERS
        .iter()
        .position(|&name| name == which)
        .unwrap_or_else(|| panic!("DENSE_ICOUNT: one of {LOOKUP_CONTENDERS:?}, or iter:<name>"));
    let tables = Tables::new(entries, true);
    let mut sum = 0u64;
    for _ in 0..rounds {
        sum = sum.wrapping_add(lookup_pass(&tables, which, 0..entries));
    }
    println!("{sum}");
}

/// `DENSE_ICOUNT=iter:<name>` mode: `rounds` sums over the values of the
/// containers after churn (`live` of 1M), by `name`: `values`, `iter` and
/// `values_mut` (the compacted dense pool), `holey` (its `values` before
/// compaction), `dsm_values`, `dsm_iter`.
fn iteration_icount(which: &str, live: usize, rounds: usize) {
    let mut all = churned(live);
    let guard = pin();
    let mut sum = 0u64;
    for _ in 0..rounds {
        sum = sum.wrapping_add(match which {
            "values" => black_box(&all.dense).values(&guard).sum::<u64>(),
            "iter" => black_box(&all.dense).iter(&guard).map(|(_, v)| *v).sum(),
            "values_mut" => black_box(&mut all.dense).values_mut().map(|v| *v).sum(),
            "holey" => black_box(&all.holey).values(&guard).sum(),
            "dsm_values" => black_box(&all.dense_slot_map).values().sum(),
            "dsm_iter" => black_box(&all.dense_slot_map).iter().map(|(_, v)| *v).sum(),
            _ => panic!("DENSE_ICOUNT=iter:<values|iter|values_mut|holey|dsm_values|dsm_iter>"),
        });
    }
    println!("{sum}");
}

fn main() {
    if let Ok(which) = std::env::var("DENSE_ICOUNT") {
        return icount_mode(&which);
    }
    if let Some(passes) = std::env::var("DENSE_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return passes_mode(passes);
    }
    let mut criterion = Criterion::default().configure_from_args();
    get_groups(&mut criterion);
    iteration(&mut criterion);
    lookup_and_churn(&mut criterion);
    criterion.final_summary();
}
