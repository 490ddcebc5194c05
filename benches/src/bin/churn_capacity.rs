//! Memory under churn: threads do insert→remove pairs keeping at most 64
//! live values each, and we report the pool's capacity (slots allocated)
//! at the end. Usage: `cargo run --release -p handle-pool-benches --bin churn_capacity [pairs]`
//! (default 10 million pairs per thread count, split over the threads).

use std::collections::VecDeque;
use std::thread;
use std::time::Instant;

use handle_pool::HandlePool;

fn main() {
    let pairs: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("pairs must be a number"))
        .unwrap_or(10_000_000);
    println!("| threads | pairs | window | peak live | slots used | capacity | Mpairs/s |");
    println!("|---|---|---|---|---|---|---|");
    for threads in [1usize, 2, 8] {
        let pool: HandlePool<u64> = HandlePool::new();
        let per_thread = pairs / threads as u64;
        let start = Instant::now();
        thread::scope(|s| {
            for t in 0..threads {
                let pool = &pool;
                s.spawn(move || {
                    let mut window = VecDeque::with_capacity(64);
                    for i in 0..per_thread {
                        if window.len() == 64 {
                            let old = window.pop_front().unwrap();
                            assert!(pool.remove(old));
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
        println!(
            "| {threads} | {} | 64 | {} | {} | {} | {:.1} |",
            per_thread * threads as u64,
            64 * threads,
            pool.slots_used(),
            pool.capacity(),
            (per_thread * threads as u64) as f64 / secs / 1e6
        );
    }
}
