//! What making and dropping a pool costs: `HandlePool::<u64>::new()`, then
//! `values` inserts, then the drop, in a loop on each of `threads` threads
//! started together, and the memory mappings a pool holds meanwhile.
//!
//! ```text
//! cargo run --release -p handle-pool-benches --bin pool_cost -- [threads] [values] [pools]
//! ```
//!
//! Defaults: 1 thread, 0 values, 20,000 pools per thread. Prints the wall
//! time per pool (the whole run divided by the pools made on all threads,
//! so at 8 threads on fewer cores it is what the process's throughput
//! allows, not one pool's latency), the median of 5 rounds, and how many
//! mappings (`/proc/self/maps` lines, Linux) 1,000 such pools held at once
//! add. A pool past 64 values reserves its flat region
//! (`docs/storage.md`): `values` 100 measures that; 0 and 1 measure pools
//! that reserve nothing.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use handle_pool::HandlePool;

const ROUNDS: usize = 5;

fn main() {
    let mut args = std::env::args().skip(1).map(|arg| {
        arg.parse::<usize>()
            .expect("threads, values and pools are numbers")
    });
    let threads = args.next().unwrap_or(1).max(1);
    let values = args.next().unwrap_or(0);
    let pools = args.next().unwrap_or(20_000).max(1);
    let mut times: Vec<Duration> = (0..ROUNDS).map(|_| round(threads, values, pools)).collect();
    times.sort_unstable();
    let per_pool = times[ROUNDS / 2].as_secs_f64() * 1e6 / (threads * pools) as f64;
    let mappings = mappings_held(values);
    println!(
        "{threads} thread(s), {values} value(s) per pool: {per_pool:.2} µs per pool \
         (median of {ROUNDS} rounds of {pools} pools per thread); \
         1,000 pools held at once add {} mappings",
        mappings.map_or_else(|| "an unknown number of".to_string(), |n| n.to_string())
    );
}

/// One round: every thread makes, fills and drops `pools` pools.
fn round(threads: usize, values: usize, pools: usize) -> Duration {
    let start = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                start.wait();
                for _ in 0..pools {
                    let pool = HandlePool::<u64>::new();
                    for value in 0..values as u64 {
                        black_box(pool.insert(value));
                    }
                    drop(black_box(pool));
                }
            });
        }
        start.wait();
        let began = Instant::now();
        // The scope joins the threads before it returns.
        began
    })
    .elapsed()
}

/// How many mappings 1,000 pools of `values` values add while they live.
fn mappings_held(values: usize) -> Option<isize> {
    let before = mappings()?;
    let pools: Vec<HandlePool<u64>> = (0..1_000)
        .map(|_| {
            let pool = HandlePool::new();
            for value in 0..values as u64 {
                pool.insert(value);
            }
            pool
        })
        .collect();
    let held = mappings()?;
    drop(pools);
    Some(held as isize - before as isize)
}

/// The process's memory mappings now, on Linux.
fn mappings() -> Option<usize> {
    std::fs::read_to_string("/proc/self/maps")
        .ok()
        .map(|maps| maps.lines().count())
}
