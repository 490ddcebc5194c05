//! What a pin costs a one-call lookup, and why: the same random-order
//! lookups of `u64` values, with a guard held over the loop, with a
//! `handle_pool::pin()` per lookup, and through `get_cloned`; next to a
//! plain array of 16-byte slots looked up bare, after a `SeqCst` fence per
//! lookup (`mfence`), and after a `SeqCst` compare-and-swap on a
//! thread-local word per lookup (a `lock`-prefixed instruction, which is
//! how crossbeam-epoch pins on x86-64). Each per-lookup protection is
//! followed by a Release store, as an unpin is.
//!
//! ```text
//! cargo run --release -p handle-pool-benches --bin pin_cost -- [entries...]
//! ```
//!
//! Default entries: 100000 and 1000000. Prints nanoseconds per lookup, the
//! median of 5 rounds in which the variants take turns.

use std::hint::black_box;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::Instant;

use handle_pool::{Handle, HandlePool};

const ROUNDS: usize = 5;

/// The variants, in print order.
const VARIANTS: [&str; 6] = [
    "array, bare",
    "array, SeqCst fence per lookup",
    "array, SeqCst CAS per lookup",
    "handle_pool get, guard held",
    "handle_pool get, pin per lookup",
    "handle_pool get_cloned",
];

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("entries must be a number"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![100_000, 1_000_000]
    } else {
        sizes
    };
    for entries in sizes {
        measure(entries);
    }
}

fn measure(entries: usize) {
    let pool: HandlePool<u64> = (0..entries as u64).collect();
    let guard = handle_pool::pin();
    let mut handles: Vec<Handle> = pool.iter(&guard).map(|(h, _)| h).collect();
    drop(guard);
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    rng.shuffle(&mut handles);
    let slots: Vec<[u64; 2]> = (0..entries as u64).map(|i| [i, i]).collect();
    let order: Vec<usize> = handles.iter().map(|h| h.index() as usize).collect();
    let local = AtomicU64::new(0);

    let mut times = vec![Vec::new(); VARIANTS.len()];
    for _ in 0..ROUNDS {
        for (variant, samples) in times.iter_mut().enumerate() {
            let start = Instant::now();
            let sum = match variant {
                0 => order
                    .iter()
                    .map(|&i| slots[i][0])
                    .fold(0, u64::wrapping_add),
                1 => order.iter().fold(0, |sum: u64, &i| {
                    local.store(1, Ordering::Relaxed);
                    fence(Ordering::SeqCst);
                    let value = slots[i][0];
                    local.store(0, Ordering::Release);
                    sum.wrapping_add(value)
                }),
                2 => order.iter().fold(0, |sum: u64, &i| {
                    let _ = local.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst);
                    let value = slots[i][0];
                    local.store(0, Ordering::Release);
                    sum.wrapping_add(value)
                }),
                3 => {
                    let guard = handle_pool::pin();
                    handles.iter().fold(0, |sum: u64, &h| {
                        sum.wrapping_add(*pool.get(h, &guard).expect("live"))
                    })
                }
                4 => handles.iter().fold(0, |sum: u64, &h| {
                    let guard = handle_pool::pin();
                    sum.wrapping_add(*pool.get(h, &guard).expect("live"))
                }),
                _ => handles.iter().fold(0, |sum: u64, &h| {
                    sum.wrapping_add(pool.get_cloned(h).expect("live"))
                }),
            };
            black_box(sum);
            samples.push(start.elapsed().as_nanos() as f64 / entries as f64);
        }
    }
    println!("{entries} entries, random order: ns per lookup, median of {ROUNDS} rounds");
    for (name, mut samples) in VARIANTS.iter().zip(times) {
        samples.sort_by(f64::total_cmp);
        println!("  {name:<34} {:6.2}", samples[ROUNDS / 2]);
    }
}
