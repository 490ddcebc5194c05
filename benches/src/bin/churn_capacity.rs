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

const USAGE: &str = "\
usage: churn_capacity [--runs N] [--pairs N] [--threads 1,2,8] [--help]

  --runs N        runs per thread count (default 20)
  --pairs N       insert+remove pairs per thread and run (default 1000000)
  --threads LIST  thread counts, comma-separated (default 1,2,8)
  -h, --help      print this message";

fn parse_args() -> Args {
    read_args().unwrap_or_else(|error| {
        eprintln!("churn_capacity: {error}\n\n{USAGE}");
        std::process::exit(2)
    })
}

fn read_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;

    let mut args = Args {
        runs: 20,
        pairs: 1_000_000,
        threads: vec![1, 2, 8],
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("runs") => args.runs = parser.value()?.parse()?,
            Long("pairs") => args.pairs = parser.value()?.parse()?,
            Long("threads") => {
                args.threads = parser
                    .value()?
                    .parse_with(|list| list.split(',').map(str::parse).collect())?
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.runs == 0 || args.threads.contains(&0) {
        return Err("--runs and every thread count must be at least 1".into());
    }
    Ok(args)
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
