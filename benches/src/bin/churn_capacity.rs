//! Memory under churn: each of T threads keeps a window of 64 live values
//! and does insert→remove pairs (one-call operations, no guard held by the
//! caller); after each run we read the pool's capacity (slots allocated) and
//! compare it with the bound `4 × peak live + 1024`.
//!
//! With `--guard`, each thread instead holds a guard across its operations
//! and re-pins it every 256 (the benchmark report's "guard held" session),
//! and the table adds the longest time a thread stayed pinned (`P`) and
//! what the documented bound's `R × P` term makes of it (`R` the run's
//! removal rate): a thread preempted while pinned holds the epoch back for
//! as long as it is off the CPU.
//!
//! Usage: `cargo run --release -p handle-pool-benches --bin churn_capacity --
//! [--runs N] [--pairs N] [--threads 1,2,8] [--guard]` (defaults: 20 runs,
//! 1,000,000 pairs per thread, threads 1, 2 and 8). Prints one table row
//! per thread count: capacity and slots used (min / median / max over the
//! runs), how many runs exceeded the bound, and the churn rate.

use std::collections::VecDeque;
use std::thread;
use std::time::{Duration, Instant};

use handle_pool::{Guard, HandlePool};

const WINDOW: usize = 64;

/// With `--guard`: operations between re-pins (as `REPIN_EVERY` in the
/// benchmark report's adapters).
const REPIN_EVERY: u32 = 256;

struct Args {
    runs: usize,
    pairs: u64,
    threads: Vec<usize>,
    guard: bool,
}

const USAGE: &str = "\
usage: churn_capacity [--runs N] [--pairs N] [--threads 1,2,8] [--guard] [--help]

  --runs N        runs per thread count (default 20)
  --pairs N       insert+remove pairs per thread and run (default 1000000)
  --threads LIST  thread counts, comma-separated (default 1,2,8)
  --guard         hold a guard, re-pinned every 256 operations
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
        guard: false,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("runs") => args.runs = parser.value()?.parse()?,
            Long("pairs") => args.pairs = parser.value()?.parse()?,
            Long("guard") => args.guard = true,
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

/// A guard held across operations and re-pinned every [`REPIN_EVERY`],
/// timing the longest pinned stretch.
struct HeldGuard {
    guard: Guard,
    ops: u32,
    pinned_at: Instant,
    longest: Duration,
}

impl HeldGuard {
    fn new() -> Self {
        HeldGuard {
            guard: handle_pool::pin(),
            ops: 0,
            pinned_at: Instant::now(),
            longest: Duration::ZERO,
        }
    }

    fn tick(&mut self) {
        self.ops += 1;
        if self.ops == REPIN_EVERY {
            self.ops = 0;
            self.guard.repin();
            let now = Instant::now();
            self.longest = self.longest.max(now - self.pinned_at);
            self.pinned_at = now;
        }
    }
}

/// One run's readings.
struct Run {
    capacity: usize,
    used: usize,
    secs: f64,
    /// The longest any thread stayed pinned (zero without `--guard`).
    longest_pin: Duration,
}

fn run(threads: usize, pairs: u64, guard: bool) -> Run {
    let pool: HandlePool<u64> = HandlePool::new();
    let start = Instant::now();
    let longest_pin = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    let mut held = guard.then(HeldGuard::new);
                    let mut tick = || held.as_mut().map(HeldGuard::tick);
                    let mut window = VecDeque::with_capacity(WINDOW);
                    for i in 0..pairs {
                        if window.len() == WINDOW {
                            tick();
                            assert!(pool.remove(window.pop_front().unwrap()));
                        }
                        tick();
                        window.push_back(pool.insert(t as u64 ^ i));
                    }
                    for h in window {
                        assert!(pool.remove(h));
                    }
                    held.map_or(Duration::ZERO, |held| held.longest)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).max()
    });
    Run {
        capacity: pool.capacity(),
        used: pool.slots_used(),
        secs: start.elapsed().as_secs_f64(),
        longest_pin: longest_pin.unwrap_or_default(),
    }
}

fn main() {
    let args = parse_args();
    let guard_columns = if args.guard {
        (
            " longest pinned, ms (max) | R × P, slots (max) |",
            "---:|---:|",
        )
    } else {
        ("", "")
    };
    println!(
        "| threads | runs | pairs per thread | bound | capacity min / median / max | slots used min / median / max | runs over bound | Mpairs/s (median) |{}",
        guard_columns.0
    );
    println!("|---:|---:|---:|---:|---|---|---:|---:|{}", guard_columns.1);
    for &threads in &args.threads {
        let bound = 4 * WINDOW * threads + 1024;
        let mut capacity = Vec::new();
        let mut used = Vec::new();
        let mut rate = Vec::new();
        let mut longest_pin = Duration::ZERO;
        let mut rate_times_pin: f64 = 0.0;
        for _ in 0..args.runs {
            let run = run(threads, args.pairs, args.guard);
            let removals_per_sec = (args.pairs * threads as u64) as f64 / run.secs;
            capacity.push(run.capacity);
            used.push(run.used);
            rate.push(removals_per_sec / 1e6);
            longest_pin = longest_pin.max(run.longest_pin);
            rate_times_pin = rate_times_pin.max(removals_per_sec * run.longest_pin.as_secs_f64());
        }
        capacity.sort_unstable();
        used.sort_unstable();
        rate.sort_by(f64::total_cmp);
        let mid = args.runs / 2;
        let over = capacity.iter().filter(|&&c| c > bound).count();
        let guard_cells = if args.guard {
            format!(
                " {:.2} | {:.0} |",
                longest_pin.as_secs_f64() * 1e3,
                rate_times_pin
            )
        } else {
            String::new()
        };
        println!(
            "| {threads} | {} | {} | {bound} | {} / {} / {} | {} / {} / {} | {over} | {:.1} |{guard_cells}",
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
