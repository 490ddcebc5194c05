//! Memory under churn: each of T threads keeps a window of 64 live values
//! and does insert→remove pairs (one-call operations, no guard held by the
//! caller); after each run we read the pool's capacity (slots allocated) and
//! compare it with the bound `4 × peak live + 1024`.
//!
//! Usage: `cargo run --release -p handle-pool-benches --bin churn_capacity --
//! [--runs N] [--pairs N] [--threads 1,2,8]` (defaults: 20 runs, 1,000,000
//! pairs per thread, threads 1, 2 and 8). Prints one table row per thread
//! count: capacity and slots used (min / median / max over the runs), how
//! many runs exceeded the bound, and the churn rate.

use std::collections::VecDeque;
use std::thread;
use std::time::Instant;

use handle_pool::HandlePool;

const WINDOW: usize = 64;

struct Args {
    runs: usize,
    pairs: u64,
    threads: Vec<usize>,
}

fn parse_args() -> Args {
    let mut args = Args {
        runs: 20,
        pairs: 1_000_000,
        threads: vec![1, 2, 8],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => args.runs = value.parse().expect("--runs takes a number"),
            "--pairs" => args.pairs = value.parse().expect("--pairs takes a number"),
            "--threads" => {
                args.threads = value
                    .split(',')
                    .map(|t| t.parse().expect("--threads takes numbers, comma-separated"))
                    .collect()
            }
            other => panic!("unknown option {other} (--runs, --pairs, --threads)"),
        }
    }
    args
}

/// One run: returns (capacity, slots used, seconds).
fn run(threads: usize, pairs: u64) -> (usize, usize, f64) {
    let pool: HandlePool<u64> = HandlePool::new();
    let start = Instant::now();
    thread::scope(|s| {
        for t in 0..threads {
            let pool = &pool;
            s.spawn(move || {
                let mut window = VecDeque::with_capacity(WINDOW);
                for i in 0..pairs {
                    if window.len() == WINDOW {
                        assert!(pool.remove(window.pop_front().unwrap()));
                    }
                    window.push_back(pool.insert(t as u64 ^ i));
                }
                for h in window {
                    assert!(pool.remove(h));
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    (pool.capacity(), pool.slots_used(), secs)
}

fn main() {
    let args = parse_args();
    println!(
        "| threads | runs | pairs per thread | bound | capacity min / median / max | slots used min / median / max | runs over bound | Mpairs/s (median) |"
    );
    println!("|---:|---:|---:|---:|---|---|---:|---:|");
    for &threads in &args.threads {
        let bound = 4 * WINDOW * threads + 1024;
        let mut capacity = Vec::new();
        let mut used = Vec::new();
        let mut rate = Vec::new();
        for _ in 0..args.runs {
            let (c, u, secs) = run(threads, args.pairs);
            capacity.push(c);
            used.push(u);
            rate.push((args.pairs * threads as u64) as f64 / secs / 1e6);
        }
        capacity.sort_unstable();
        used.sort_unstable();
        rate.sort_by(f64::total_cmp);
        let mid = args.runs / 2;
        let over = capacity.iter().filter(|&&c| c > bound).count();
        println!(
            "| {threads} | {} | {} | {bound} | {} / {} / {} | {} / {} / {} | {over} | {:.1} |",
            args.runs,
            args.pairs,
            capacity[0],
            capacity[mid],
            capacity[args.runs - 1],
            used[0],
            used[mid],
            used[args.runs - 1],
            rate[mid],
        );
    }
}
