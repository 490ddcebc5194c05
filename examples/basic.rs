//! Four threads share one pool: each inserts, reads and removes its own
//! values while checking that handles of removed values stay stale.

use handle_pool::{pin, HandlePool};
use std::thread;

fn main() {
    let pool: HandlePool<(usize, u64)> = HandlePool::new();
    let threads = 4;
    let rounds = 200_000u64;
    thread::scope(|s| {
        for t in 0..threads {
            let pool = &pool;
            s.spawn(move || {
                let mut stale = Vec::new();
                for i in 0..rounds {
                    let h = pool.insert((t, i));
                    let guard = pin();
                    assert_eq!(pool.get(h, &guard), Some(&(t, i)));
                    drop(guard);
                    if i % 3 != 0 {
                        assert!(pool.remove(h));
                        stale.push(h);
                    }
                    if stale.len() > 64 {
                        for old in stale.drain(..) {
                            assert!(!pool.contains(old), "a stale handle resolved");
                        }
                    }
                }
            });
        }
    });
    println!(
        "{} threads x {} inserts: {} live values, {} slots allocated",
        threads,
        rounds,
        pool.len(),
        pool.capacity()
    );
    assert_eq!(pool.len(), threads * (rounds as usize).div_ceil(3));
}
