//! `DensePool` against a map of its handles, across first-segment sizes,
//! limits that cut segments and values' regions of every extent (none,
//! cut short, whole), for values of several sizes and alignments (one
//! above a page, which gets no region; a zero-sized one): every view
//! (`iter`, `values` by `next` and by `fold`, partly consumed then folded,
//! `as_mut_slices`, `values_mut`, the rayon passes) yields the live values
//! in position order, through compaction, sort, `retain`, `drain`,
//! `clear` and `take`. (From an adversarial review of the values' region.)

use std::collections::HashMap;
use std::fmt::Debug;

use handle_pool::{pin, Config, DensePool, Handle};

use crate::common::Rng;

/// A value type under test, made from and mapped back to a key.
trait Val: Clone + PartialEq + Debug + Send + Sync {
    fn make(n: u64) -> Self;
    fn key(&self) -> u64;
}
impl Val for u64 {
    fn make(n: u64) -> Self {
        n
    }
    fn key(&self) -> u64 {
        *self
    }
}
impl Val for String {
    fn make(n: u64) -> Self {
        format!("value-{n}")
    }
    fn key(&self) -> u64 {
        self[6..].parse().unwrap()
    }
}
#[derive(Clone, PartialEq, Debug)]
#[repr(align(2048))]
struct A2k(u64, String);
impl Val for A2k {
    fn make(n: u64) -> Self {
        A2k(n, n.to_string())
    }
    fn key(&self) -> u64 {
        self.0
    }
}
#[derive(Clone, PartialEq, Debug)]
#[repr(align(8192))]
struct A8k(u64);
impl Val for A8k {
    fn make(n: u64) -> Self {
        A8k(n)
    }
    fn key(&self) -> u64 {
        self.0
    }
}
#[derive(Clone, PartialEq, Debug)]
struct Odd([u8; 3], u16);
impl Val for Odd {
    fn make(n: u64) -> Self {
        Odd([n as u8, (n >> 8) as u8, (n >> 16) as u8], (n >> 24) as u16)
    }
    fn key(&self) -> u64 {
        self.0[0] as u64
            | (self.0[1] as u64) << 8
            | (self.0[2] as u64) << 16
            | (self.1 as u64) << 24
    }
}

/// Checks every view of the pool against the model.
fn check<T: Val>(pool: &DensePool<T>, model: &HashMap<Handle, u64>, handles: &[Handle]) {
    let guard = pin();
    let iter: Vec<u64> = pool.iter(&guard).map(|(_, v)| v.key()).collect();
    // A `for` loop calls `next`.
    let next: Vec<u64> = {
        let mut v = Vec::new();
        for x in pool.values(&guard) {
            v.push(x.key());
        }
        v
    };
    let folded: Vec<u64> = pool.values(&guard).fold(Vec::new(), |mut v, x| {
        v.push(x.key());
        v
    });
    assert_eq!(iter, next, "values().next vs iter");
    assert_eq!(iter, folded, "values().fold vs iter (position order)");
    // A partly consumed `values` then folded.
    let mut it = pool.values(&guard);
    let mut partial: Vec<u64> = it.by_ref().take(iter.len() / 3).map(Val::key).collect();
    partial.extend(it.map(Val::key));
    assert_eq!(iter, partial, "partial next then fold");
    let mut sorted = iter.clone();
    sorted.sort_unstable();
    let mut expected: Vec<u64> = model.values().copied().collect();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "contents");
    for h in handles {
        assert_eq!(pool.get(*h, &guard).map(Val::key), model.get(h).copied());
    }
}

fn exercise<T: Val>(config: Config, seed: u64, steps: usize) {
    let mut rng = Rng::new(seed);
    let mut pool: DensePool<T> = DensePool::with_config(config);
    let mut model: HashMap<Handle, u64> = HashMap::new();
    let mut handles: Vec<Handle> = Vec::new();
    let mut counter = 0;
    let limit = config.max_slots as usize;
    for step in 0..steps {
        match rng.below(100) {
            0..=44 => {
                // Inserts fail past the limit (holes count as positions).
                counter += 1;
                if let Ok(h) = pool.try_insert(T::make(counter)) {
                    model.insert(h, counter);
                    handles.push(h);
                }
            }
            45..=69 if !handles.is_empty() => {
                let h = handles[rng.below(handles.len())];
                assert_eq!(pool.remove(h), model.remove(&h).is_some());
            }
            70..=74 => pool.compact(),
            75..=77 => {
                let slices: Vec<u64> = pool.as_mut_slices().flatten().map(|v| v.key()).collect();
                let guard = pin();
                let iter: Vec<u64> = pool.iter(&guard).map(|(_, v)| v.key()).collect();
                assert_eq!(slices, iter, "as_mut_slices order");
                let at: usize = pool.as_mut_slices().map(|s| s.len()).sum();
                assert_eq!(at, pool.len());
            }
            78..=79 => {
                for v in pool.values_mut() {
                    let k = v.key();
                    *v = T::make(k);
                }
                #[cfg(feature = "rayon")]
                {
                    use rayon::prelude::*;
                    pool.par_values_mut().for_each(|v| {
                        let k = v.key();
                        *v = T::make(k);
                    });
                    let n = pool
                        .par_iter_mut()
                        .map(|(h, v)| assert_eq!(v.key(), model[&h]))
                        .count();
                    assert_eq!(n, model.len());
                }
            }
            80..=81 => {
                pool.sort_by_key(|v| v.key() % 7);
            }
            82 => pool.retain(|h, v| {
                let keep = v.key() % 3 != 0;
                if !keep {
                    model.remove(&h);
                }
                keep
            }),
            83 if rng.below(10) == 0 => {
                let n = rng.below(5);
                for (h, v) in pool.drain().take(n) {
                    assert_eq!(model.remove(&h), Some(v.key()));
                }
                // Dropping the drain removes the rest.
                model.clear();
            }
            84 if rng.below(20) == 0 => {
                pool.clear();
                model.clear();
            }
            85..=89 => pool.flush(),
            90..=94 if !handles.is_empty() => {
                let h = handles[rng.below(handles.len())];
                let taken = pool.take(h).map(|v| v.key());
                assert_eq!(taken, model.remove(&h));
            }
            _ => {}
        }
        assert!(pool.len() <= limit);
        if step % 7 == 0 {
            check(&pool, &model, &handles);
        }
    }
    check(&pool, &model, &handles);
}

/// First segments of 1 to 64 positions, limits from 1 up, and regions
/// from none to whole.
fn configs() -> Vec<Config> {
    let mut out = Vec::new();
    for shift in [0u32, 1, 2, 6] {
        for max_slots in [1u32, 2, 3, 5, 7, 13, 29, 100, 300, u32::MAX] {
            for flat_slots in [0u32, 1, 2, 3, 6, 7, 14, 100, 1000, u32::MAX] {
                out.push(Config {
                    first_bucket_shift: shift,
                    max_slots,
                    flat_slots,
                    stripes: 1,
                    fresh_block: 1,
                    batch: 2,
                    ..Config::default()
                });
            }
        }
    }
    out
}

/// Every configuration, on a worker of rayon's pool (so that
/// ThreadSanitizer sees how the rayon passes' work comes back, see
/// `common::on_rayon_worker`).
fn all<T: Val + 'static>(steps: usize) {
    crate::common::on_rayon_worker(move || {
        for (i, config) in configs().into_iter().enumerate() {
            exercise::<T>(config, 0x9e37_79b9 + i as u64, steps);
        }
    });
}

#[test]
fn dense_views_agree_across_regions_for_u64() {
    all::<u64>(600);
}

#[test]
fn dense_views_agree_across_regions_for_strings() {
    all::<String>(400);
}

#[test]
fn dense_views_agree_across_regions_aligned_to_2_kib() {
    all::<A2k>(300);
}

#[test]
fn dense_views_agree_across_regions_aligned_past_a_page() {
    all::<A8k>(200);
}

#[test]
fn dense_views_agree_across_regions_for_odd_sizes() {
    all::<Odd>(400);
}

#[test]
fn zero_sized_values_have_no_region_and_every_view_counts_them() {
    let pool: DensePool<()> = DensePool::new();
    let handles: Vec<Handle> = (0..1000).map(|_| pool.insert(())).collect();
    for h in handles.iter().step_by(3) {
        assert!(pool.remove(*h));
    }
    let guard = pin();
    assert_eq!(pool.values(&guard).count(), pool.len());
    assert_eq!(pool.values(&guard).fold(0, |n, _| n + 1), pool.len());
    drop(guard);
    let mut pool = pool;
    assert_eq!(
        pool.as_mut_slices().map(|s| s.len()).sum::<usize>(),
        pool.len()
    );
}
