//! Lookup loops for instruction counts under callgrind: the single-threaded
//! lookups of `benches/lookup.rs`, without criterion.
//!
//! ```text
//! lookup_icount <which> [entries] [rounds]
//! ```
//!
//! `which` is one of `slotmap` (`SlotMap<DefaultKey, u64>::get`, the
//! unsynchronised limit), `cs_guard` (concurrent-slotmap `get`, one guard per
//! round), `cs_pin` (concurrent-slotmap, pinning per call), `hp_get`
//! (`HandlePool::get` with one `handle_pool::pin()` guard per round),
//! `hp_contains`, `hp_reader_get` and `hp_reader_contains` (through one
//! `pool.reader()` per round), `hp_cloned` (`get_cloned`, pins per call) or `hp_with`
//! (`with(h, |v| *v)`, pins per call); for components kept beside a pool,
//! `slotmap_secondary` (`slotmap::SecondaryMap<DefaultKey, u64>::get`, keyed
//! by a `SlotMap`'s keys), `hp_secondary_get` (`SecondaryMap::get`, one guard
//! per round) and `hp_secondary_contains`. It builds a table of `entries`
//! (default 100000) `u64` values, then does `rounds` (default 10) rounds of
//! lookups over all the keys, in an order shuffled with a fixed seed, and
//! prints the sum of what the lookups returned; on stderr, the rounds' wall
//! time per lookup (for interleaved timing runs, alternating contenders:
//! a loaded host slows them alike).
//!
//! Instructions per lookup: the whole run minus a setup-only run (0 rounds),
//! divided by `rounds × entries`:
//!
//! ```text
//! cargo build --release -p handle-pool-benches --bin lookup_icount
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out target/release/lookup_icount hp_get
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg0.out target/release/lookup_icount hp_get 100000 0
//! # ("Collected" in callgrind's summary, or `callgrind_annotate` totals)
//! # instructions per lookup = (total(cg.out) - total(cg0.out)) / (10 * 100000)
//! ```
//!
//! Each round is one call of the non-inlined `rounds` function, so
//! `callgrind_annotate --inclusive=yes /tmp/cg.out | grep rounds` shows the
//! loop's own share too.

use std::hint::black_box;
use std::process::ExitCode;

use handle_pool::{Handle, HandlePool, SecondaryMap};
use slotmap::{DefaultKey, SlotMap};

type CsMap = concurrent_slotmap::SlotMap<concurrent_slotmap::SlotId, u64>;
type CsKey = concurrent_slotmap::SlotId;

/// Seed of the shuffled key order.
const SEED: u64 = 0x5eed_1007_c0de;

const WHICH: [&str; 12] = [
    "slotmap",
    "cs_guard",
    "cs_pin",
    "hp_get",
    "hp_contains",
    "hp_reader_get",
    "hp_reader_contains",
    "hp_cloned",
    "hp_with",
    "slotmap_secondary",
    "hp_secondary_get",
    "hp_secondary_contains",
];

/// Prints the wall time per lookup of the rounds on stderr when dropped.
struct Timer {
    start: std::time::Instant,
    lookups: usize,
}

impl Timer {
    fn start(lookups: usize) -> Self {
        Timer {
            start: std::time::Instant::now(),
            lookups,
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as f64 / self.lookups.max(1) as f64;
        eprintln!("{ns:.2} ns/lookup");
    }
}

/// `keys` shuffled with [`SEED`].
fn shuffled<K>(mut keys: Vec<K>) -> Vec<K> {
    fastrand::Rng::with_seed(SEED).shuffle(&mut keys);
    keys
}

/// `rounds` passes over `keys`: each pins with `pin` (or not: `()`) and sums
/// `lookup` over all the keys.
#[inline(never)]
fn rounds<K: Copy, G>(
    keys: &[K],
    rounds: usize,
    mut pin: impl FnMut() -> G,
    mut lookup: impl FnMut(&G, K) -> u64,
) -> u64 {
    let _timer = Timer::start(keys.len() * rounds);
    let mut sum = 0u64;
    for _ in 0..rounds {
        let guard = pin();
        for &k in black_box(keys) {
            sum = sum.wrapping_add(lookup(&guard, k));
        }
        drop(guard);
    }
    black_box(sum)
}

/// [`rounds`] through a reader made once per round (it pins): sums
/// `get`'s values, or `contains`' hits.
#[inline(never)]
fn reader_rounds(pool: &HandlePool<u64>, keys: &[Handle], rounds: usize, contains: bool) -> u64 {
    let _timer = Timer::start(keys.len() * rounds);
    let mut sum = 0u64;
    for _ in 0..rounds {
        let reader = pool.reader();
        if contains {
            for &k in black_box(keys) {
                sum = sum.wrapping_add(u64::from(reader.contains(k)));
            }
        } else {
            for &k in black_box(keys) {
                sum = sum.wrapping_add(reader.get(k).map_or(0, |&v| v));
            }
        }
    }
    black_box(sum)
}

fn run(which: &str, entries: usize, n: usize) -> u64 {
    match which {
        "slotmap" => {
            let mut map = SlotMap::with_capacity(entries);
            let keys: Vec<DefaultKey> = (0..entries as u64).map(|v| map.insert(v)).collect();
            let keys = shuffled(keys);
            rounds(&keys, n, || (), |_, k| map.get(k).map_or(0, |&v| v))
        }
        "cs_guard" | "cs_pin" => {
            // As `cs_new` in `workloads/adapters.rs`.
            let map = CsMap::new((entries.max(1024) as u64 * 2).min(u32::MAX as u64 / 2) as u32);
            let keys: Vec<CsKey> = {
                let guard = map.pin();
                (0..entries as u64).map(|v| map.insert(v, &guard)).collect()
            };
            let keys = shuffled(keys);
            if which == "cs_guard" {
                rounds(
                    &keys,
                    n,
                    || map.pin(),
                    |g: &concurrent_slotmap::hyaline::Guard<'_>, k| map.get(k, g).map_or(0, |&v| v),
                )
            } else {
                rounds(
                    &keys,
                    n,
                    || (),
                    |_, k| map.get(k, &map.pin()).map_or(0, |&v| v),
                )
            }
        }
        "slotmap_secondary" => {
            let mut primary = SlotMap::with_capacity(entries);
            let keys: Vec<DefaultKey> = (0..entries).map(|_| primary.insert(())).collect();
            let mut map = slotmap::SecondaryMap::with_capacity(entries);
            for (v, &k) in keys.iter().enumerate() {
                map.insert(k, v as u64);
            }
            let keys = shuffled(keys);
            rounds(&keys, n, || (), |_, k| map.get(k).map_or(0, |&v| v))
        }
        "hp_secondary_get" | "hp_secondary_contains" => {
            let primary: HandlePool<()> = HandlePool::new();
            let keys: Vec<Handle> = (0..entries).map(|_| primary.insert(())).collect();
            let map = SecondaryMap::with_capacity(entries);
            for (v, &k) in keys.iter().enumerate() {
                map.insert(k, v as u64);
            }
            let keys = shuffled(keys);
            if which == "hp_secondary_get" {
                rounds(&keys, n, handle_pool::pin, |g: &handle_pool::Guard, k| {
                    map.get(k, g).map_or(0, |&v| v)
                })
            } else {
                rounds(&keys, n, || (), |_, k| u64::from(map.contains(k)))
            }
        }
        _ => {
            let pool = HandlePool::new();
            let keys: Vec<Handle> = (0..entries as u64).map(|v| pool.insert(v)).collect();
            let keys = shuffled(keys);
            match which {
                "hp_get" => rounds(&keys, n, handle_pool::pin, |g: &handle_pool::Guard, k| {
                    pool.get(k, g).map_or(0, |&v| v)
                }),
                "hp_contains" => rounds(&keys, n, || (), |_, k| u64::from(pool.contains(k))),
                "hp_reader_get" | "hp_reader_contains" => {
                    let contains = which == "hp_reader_contains";
                    reader_rounds(&pool, &keys, n, contains)
                }
                "hp_cloned" => rounds(&keys, n, || (), |_, k| pool.get_cloned(k).unwrap_or(0)),
                "hp_with" => rounds(&keys, n, || (), |_, k| pool.with(k, |v| *v).unwrap_or(0)),
                _ => unreachable!("checked in main"),
            }
        }
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: lookup_icount <which> [entries] [rounds]\n  which: {}\n  entries: default 100000; rounds: default 10",
        WHICH.join(", ")
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(which) = args.first().filter(|w| WHICH.contains(&w.as_str())) else {
        return usage();
    };
    let number = |i: usize, default: usize| match args.get(i) {
        None => Some(default),
        Some(s) => s.parse::<usize>().ok(),
    };
    let (Some(entries), Some(n)) = (number(1, 100_000), number(2, 10)) else {
        return usage();
    };
    if args.len() > 3 || entries == 0 || entries > u32::MAX as usize / 4 {
        return usage();
    }
    println!("{}", run(which, entries, n));
    ExitCode::SUCCESS
}
