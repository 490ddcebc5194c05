//! Slow-path events per million insert+remove pairs on one shared pool, at
//! 1, 2, 4, 8 and 16 threads: sweeps, visits to other stripes, magazine
//! revocations and heavy fences, back-pressure rounds, yields, naps, growth
//! and seals (see `Event`). Oversubscribed threads still count events, so
//! a rate that grows with the thread count is a scaling bug on any machine,
//! two cores included; the rates, not the times, are the point here.
//!
//! Usage: `cargo run --release --example event_counts -- [--pairs N]
//! [--threads 1,2,4,8,16] [--stripes S]` (defaults: 200,000 pairs per
//! thread; the pool's default stripes, 4 per core: `--stripes 64` gives a
//! 2-core machine a 16-core machine's pool, magazine for every thread). It needs
//! the `testing` feature, which this crate's examples get from its
//! dev-dependency on itself.

use handle_pool::{event_counts, pin, Config, Event, HandlePool};
use std::time::Instant;

/// How the threads churn.
#[derive(Clone, Copy)]
enum Mode {
    /// Insert, then remove at once.
    Window1,
    /// Keep 64 values live per thread.
    Window64,
    /// Window 1 while holding a guard, re-pinned every 256 operations.
    Guard,
    /// Window 1 while holding one guard across the whole run.
    GuardHeld,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Window1 => "window 1",
            Mode::Window64 => "window 64",
            Mode::Guard => "window 1, guard held (re-pinned every 256)",
            Mode::GuardHeld => "window 1, one guard held across the whole run",
        }
    }
}

fn churn(pool: &HandlePool<u64>, mode: Mode, pairs: u64) {
    let window = match mode {
        Mode::Window64 => 64,
        _ => 1,
    };
    let mut live = std::collections::VecDeque::with_capacity(window);
    let mut guard = matches!(mode, Mode::Guard | Mode::GuardHeld).then(pin);
    let repin = matches!(mode, Mode::Guard);
    for i in 0..pairs {
        live.push_back(pool.insert(i));
        if live.len() >= window {
            pool.remove(live.pop_front().unwrap());
        }
        if let Some(guard) = guard.as_mut() {
            if repin && i % 128 == 127 {
                guard.repin();
            }
        }
    }
    for handle in live {
        pool.remove(handle);
    }
}

fn main() {
    let mut pairs: u64 = 200_000;
    let mut threads: Vec<usize> = vec![1, 2, 4, 8, 16];
    let mut stripes: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--pairs" => pairs = value.parse().expect("--pairs N"),
            "--stripes" => stripes = Some(value.parse().expect("--stripes S")),
            "--threads" => {
                threads = value
                    .split(',')
                    .map(|t| t.parse().expect("--threads 1,2,4"))
                    .collect()
            }
            _ => panic!("usage: event_counts [--pairs N] [--threads 1,2,4,8,16] [--stripes S]"),
        }
    }
    println!(
        "cores: {}; stripes: {}; {pairs} insert+remove pairs per thread; events per million pairs",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        stripes.map_or("default".to_string(), |s| s.to_string())
    );
    for mode in [Mode::Window1, Mode::Window64, Mode::Guard, Mode::GuardHeld] {
        println!("\n## {}\n", mode.name());
        print!("| threads | M pairs/s | slots used |");
        for event in Event::ALL {
            print!(" {} |", event.name());
        }
        println!();
        print!("|---:|---:|---:|");
        for _ in Event::ALL {
            print!("---:|");
        }
        println!();
        for &t in &threads {
            let pool = match stripes {
                Some(stripes) => HandlePool::with_config(Config {
                    stripes,
                    ..Config::default()
                }),
                None => HandlePool::new(),
            };
            let before = event_counts();
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..t {
                    s.spawn(|| churn(&pool, mode, pairs));
                }
            });
            let seconds = start.elapsed().as_secs_f64();
            let after = event_counts();
            let total = (pairs * t as u64) as f64;
            print!(
                "| {t} | {:.1} | {} |",
                total / seconds / 1e6,
                pool.slots_used()
            );
            for (b, a) in before.iter().zip(after) {
                print!(" {:.1} |", (a - b) as f64 * 1e6 / total);
            }
            println!();
        }
    }
    slow_owner(stripes);
}

/// A thread churns 1M values, then inserts once per millisecond while
/// another thread inserts 500k: how much the pool grows, and how long the
/// inserts take, with magazines and without.
fn slow_owner(stripes: Option<usize>) {
    use std::sync::mpsc;
    const FREED: u64 = 1_000_000;
    const INSERTS: u64 = 500_000;
    println!("\n## a slow magazine owner\n");
    println!("| magazines | slots grown | inserts' time (ms) |\n|---|---:|---:|");
    for magazines in [true, false] {
        let pool: HandlePool<u64> = HandlePool::with_config(Config {
            stripes: stripes.unwrap_or(0),
            magazines,
            ..Config::default()
        });
        let (ready, wait_ready) = mpsc::channel();
        let (done, wait_done) = mpsc::channel::<()>();
        let pool = &pool;
        std::thread::scope(|s| {
            s.spawn(move || {
                let handles: Vec<_> = (0..FREED).map(|i| pool.insert(i)).collect();
                for handle in handles {
                    pool.remove(handle);
                }
                pool.flush();
                pool.remove(pool.insert(0));
                ready.send(()).unwrap();
                while wait_done.try_recv().is_err() {
                    pool.remove(pool.insert(0));
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
            wait_ready.recv().unwrap();
            let before = pool.slots_used();
            let start = Instant::now();
            let handles: Vec<_> = (0..INSERTS).map(|i| pool.insert(i)).collect();
            let elapsed = start.elapsed();
            let grown = pool.slots_used() - before;
            done.send(()).unwrap();
            drop(handles);
            println!(
                "| {magazines} | {grown} | {:.2} |",
                elapsed.as_secs_f64() * 1e3
            );
        });
    }
}
