//! Batch operations against the single operations in a loop (issue 5):
//! `insert_many` + `remove_many` of a batch of values, versus `insert` and
//! `remove` called once per value, on 1 and 2 threads. Throughput is in
//! values inserted and removed. `HANDLE_POOL_BENCH_QUICK=1` shortens it.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use handle_pool::{Handle, HandlePool};

const ROUNDS: usize = 2_000;

fn run(threads: usize, batch: usize, batched: bool, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let pool: HandlePool<u64> = HandlePool::new();
        let barrier = Barrier::new(threads);
        let elapsed = thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    let (pool, barrier) = (&pool, &barrier);
                    s.spawn(move || {
                        let mut handles: Vec<Handle> = Vec::with_capacity(batch);
                        barrier.wait();
                        let start = Instant::now();
                        for round in 0..ROUNDS {
                            handles.clear();
                            let values = (0..batch as u64).map(|i| i ^ round as u64);
                            if batched {
                                pool.insert_many_into(values, &mut handles);
                                assert_eq!(pool.remove_many(&handles), batch);
                            } else {
                                handles.extend(values.map(|v| pool.insert(v)));
                                for &h in &handles {
                                    assert!(pool.remove(h));
                                }
                            }
                        }
                        start.elapsed()
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap())
                .max()
                .unwrap()
        });
        total += elapsed;
    }
    total
}

fn batch_vs_loop(c: &mut Criterion) {
    let quick = std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0");
    let mut group = c.benchmark_group("batch");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(if quick { 50 } else { 500 }));
    group.measurement_time(Duration::from_millis(if quick { 300 } else { 3_000 }));
    for threads in [1, 2] {
        for batch in [16usize, 256] {
            group.throughput(Throughput::Elements((threads * batch * ROUNDS) as u64));
            for (name, batched) in [
                ("insert_many+remove_many", true),
                ("insert+remove loop", false),
            ] {
                let id = BenchmarkId::new(format!("{name}/batch{batch}"), format!("{threads}t"));
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| run(threads, batch, batched, iters))
                });
            }
        }
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    batch_vs_loop(&mut criterion);
    criterion.final_summary();
}
