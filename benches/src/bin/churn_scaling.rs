//! Does churn scale with threads inside one pool? Each of T threads does
//! insert→remove pairs (window 1: remove at once; window 64: keep 64 live),
//! first all on one shared pool, then each on a pool of its own, the two
//! alternating for several rounds in one process. Separate pools share
//! nothing but the epoch collector, so their rate is what the shared pool
//! could reach if its threads never touched each other's stripes and slots;
//! the ratio shared / separate is the cost of sharing.
//!
//! Usage: `cargo run --release -p handle-pool-benches --bin churn_scaling --
//! [--rounds N] [--pairs N] [--threads 2]` (defaults: 5 rounds, 2,000,000
//! pairs per thread, 2 threads). Prints, per round and window, million
//! pairs per second for both layouts, their ratio, and the shared pool's
//! capacity at the end of the run.

use std::collections::VecDeque;
use std::sync::Barrier;
use std::thread;
use std::time::Instant;

use handle_pool::HandlePool;

struct Args {
    rounds: usize,
    pairs: u64,
    threads: usize,
}

const USAGE: &str = "\
usage: churn_scaling [--rounds N] [--pairs N] [--threads N] [--help]

  --rounds N   rounds, each running both layouts (default 5)
  --pairs N    insert+remove pairs per thread and run (default 2000000)
  --threads N  threads (default 2)
  -h, --help   print this message";

fn parse_args() -> Args {
    read_args().unwrap_or_else(|error| {
        eprintln!("churn_scaling: {error}\n\n{USAGE}");
        std::process::exit(2)
    })
}

fn read_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;

    let mut args = Args {
        rounds: 5,
        pairs: 2_000_000,
        threads: 2,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("rounds") => args.rounds = parser.value()?.parse()?,
            Long("pairs") => args.pairs = parser.value()?.parse()?,
            Long("threads") => args.threads = parser.value()?.parse()?,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.rounds == 0 || args.threads == 0 || args.pairs == 0 {
        return Err("--rounds, --pairs and --threads must be at least 1".into());
    }
    Ok(args)
}

/// One run on `pools` (one shared pool, or one per thread): returns
/// million pairs per second and the first pool's capacity at the end.
fn run(pools: &[HandlePool<u64>], threads: usize, pairs: u64, window: usize) -> (f64, usize) {
    // The workers and this thread: the clock starts when all are ready.
    let barrier = Barrier::new(threads + 1);
    let start = thread::scope(|s| {
        for t in 0..threads {
            let pool = &pools[t % pools.len()];
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                let mut live = VecDeque::with_capacity(window);
                for i in 0..pairs {
                    if live.len() == window {
                        pool.remove(live.pop_front().expect("the window is full"));
                    }
                    live.push_back(pool.insert(i ^ t as u64));
                }
            });
        }
        barrier.wait();
        Instant::now()
    });
    let seconds = start.elapsed().as_secs_f64();
    let rate = (threads as u64 * pairs) as f64 / seconds / 1e6;
    (rate, pools[0].capacity())
}

fn main() {
    let args = parse_args();
    println!(
        "{} threads, {} pairs per thread; million pairs per second",
        args.threads, args.pairs
    );
    println!("| round | window | shared pool | a pool per thread | shared / separate | shared capacity |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for round in 1..=args.rounds {
        for window in [1, 64] {
            let shared = [HandlePool::new()];
            let (shared_rate, capacity) = run(&shared, args.threads, args.pairs, window);
            let separate: Vec<HandlePool<u64>> =
                (0..args.threads).map(|_| HandlePool::new()).collect();
            let (separate_rate, _) = run(&separate, args.threads, args.pairs, window);
            println!(
                "| {round} | {window} | {shared_rate:.1} | {separate_rate:.1} | {:.2} | {capacity} |",
                shared_rate / separate_rate
            );
        }
    }
}
