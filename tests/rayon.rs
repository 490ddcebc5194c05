//! The rayon feature: parallel iteration visits what `iter` would, each
//! value once, also while other threads insert and remove; parallel drains
//! and collections drop every value exactly once.
//!
//! Each test runs on a worker of rayon's global pool
//! (`common::on_rayon_worker`), so that ThreadSanitizer sees its parallel
//! work come back to it.
#![cfg(feature = "rayon")]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use handle_pool::{pin, Handle, HandlePool};
use rayon::prelude::*;

mod common;
use common::{Alive, Log, Rng, Tracked};

// Modules of this binary live in `tests/rayon/`.
#[path = "rayon/dense.rs"]
mod dense;
#[path = "rayon/secondary.rs"]
mod secondary;

/// Enough values to fill many buckets, so splits cross bucket boundaries.
const N: usize = 100_000;

#[test]
fn par_iter_visits_every_live_value_once_on_a_quiescent_pool() {
    common::on_rayon_worker(|| {
        let pool: HandlePool<u64> = HandlePool::new();
        let handles = pool.insert_many(0..N as u64);
        // Holes: every third value removed.
        assert_eq!(
            pool.remove_many(&handles.iter().copied().step_by(3).collect::<Vec<_>>()),
            N.div_ceil(3)
        );
        let guard = pin();
        let mut sequential: Vec<(Handle, u64)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
        let mut parallel: Vec<(Handle, u64)> =
            pool.par_iter(&guard).map(|(h, v)| (h, *v)).collect();
        sequential.sort();
        parallel.sort();
        assert_eq!(parallel.len(), N - N.div_ceil(3));
        assert_eq!(parallel, sequential);
        for (h, v) in parallel {
            assert_eq!(handles[v as usize], h);
        }
    })
}

#[test]
fn par_iter_on_an_empty_pool_yields_nothing() {
    common::on_rayon_worker(|| {
        let pool: HandlePool<u64> = HandlePool::new();
        let guard = pin();
        assert_eq!(pool.par_iter(&guard).count(), 0);
        let mut pool = pool;
        assert_eq!(pool.par_iter_mut().count(), 0);
        assert_eq!(pool.par_drain().count(), 0);
    })
}

#[test]
fn par_iter_under_churn_sees_stable_values_once_and_only_live_ones() {
    common::on_rayon_worker(|| {
        /// Values of the churning threads have this bit set.
        const CHURN: u64 = 1 << 63;
        let pool: HandlePool<u64> = HandlePool::new();
        let stable: HashMap<Handle, u64> = pool
            .insert_many(0..20_000u64)
            .into_iter()
            .zip(0..)
            .collect();
        let stop = AtomicBool::new(false);
        let (inserted, visits) = common::scope(|s| {
            let churners: Vec<_> = (0..2u64)
                .map(|t| {
                    let (pool, stop) = (&pool, &stop);
                    s.spawn(move || {
                        let mut rng = Rng::new(t + 1);
                        let mut live: Vec<Handle> = Vec::new();
                        let mut inserted: Vec<(Handle, u64)> = Vec::new();
                        let mut next = CHURN | (t << 40);
                        while !stop.load(Ordering::Relaxed) {
                            if live.len() < 2_000 && rng.below(2) == 0 {
                                let h = pool.insert(next);
                                inserted.push((h, next));
                                live.push(h);
                                next += 1;
                            } else if !live.is_empty() {
                                let h = live.swap_remove(rng.below(live.len()));
                                assert!(pool.remove(h));
                            }
                        }
                        inserted
                    })
                })
                .collect();
            let mut visits = Vec::new();
            for _ in 0..20 {
                let guard = pin();
                let seen: Vec<(Handle, u64)> =
                    pool.par_iter(&guard).map(|(h, v)| (h, *v)).collect();
                visits.push(seen);
            }
            stop.store(true, Ordering::Relaxed);
            let inserted: HashMap<Handle, u64> = churners
                .into_iter()
                .flat_map(|c| c.join().unwrap())
                .collect();
            (inserted, visits)
        });
        for seen in visits {
            let mut handles = HashSet::new();
            let mut stable_seen = 0;
            for (h, v) in seen {
                assert!(handles.insert(h), "{h:?} visited twice");
                if v & CHURN == 0 {
                    assert_eq!(stable.get(&h), Some(&v), "{h:?} is not a stable value");
                    stable_seen += 1;
                } else {
                    assert_eq!(
                        inserted.get(&h),
                        Some(&v),
                        "{h:?} was never inserted with {v}"
                    );
                }
            }
            assert_eq!(stable_seen, stable.len());
        }
    })
}

#[test]
fn par_iter_mut_modifies_each_value_once() {
    common::on_rayon_worker(|| {
        let mut pool: HandlePool<u64> = (0..N as u64).collect();
        pool.par_iter_mut().for_each(|(_, v)| *v += 1);
        pool.par_values_mut().for_each(|v| *v *= 2);
        let mut all: Vec<u64> = pool.values_mut().map(|v| *v).collect();
        all.sort();
        assert_eq!(all, (1..=N as u64).map(|v| v * 2).collect::<Vec<_>>());
    })
}

#[test]
fn par_iter_mut_handles_are_the_pools() {
    common::on_rayon_worker(|| {
        let mut pool: HandlePool<u64> = HandlePool::new();
        let handles = pool.insert_many(0..1_000);
        pool.par_iter_mut().for_each(|(h, v)| *v = h.to_bits());
        for h in handles {
            assert_eq!(pool.get_cloned(h), Some(h.to_bits()));
        }
    })
}

fn tracked_pool(log: &Arc<Log>) -> HandlePool<Tracked> {
    let pool = HandlePool::new();
    pool.insert_many((0..log.len()).map(|id| Tracked::new(id, log)));
    pool
}

#[test]
fn par_drain_fully_consumed_drops_every_value_once() {
    common::on_rayon_worker(|| {
        let log = Log::new(10_000);
        let mut pool = tracked_pool(&log);
        let mut ids: Vec<usize> = pool.par_drain().map(|(_, v)| v.id).collect();
        ids.sort();
        assert_eq!(ids, (0..10_000).collect::<Vec<_>>());
        log.assert_all_once();
        assert!(pool.is_empty());
        assert_eq!(pool.iter_mut().count(), 0);
        drop(pool);
        log.assert_all_once();
    })
}

#[test]
fn par_drain_stopped_early_drops_the_rest_once() {
    common::on_rayon_worker(|| {
        let log = Log::new(10_000);
        let mut pool = tracked_pool(&log);
        let kept: Vec<(Handle, Tracked)> = pool.par_drain().take_any(100).collect();
        assert_eq!(kept.len(), 100);
        assert!(pool.is_empty());
        assert_eq!(log.dropped(), 10_000 - 100);
        assert_eq!(log.check_at_most_once(), 10_000 - 100);
        for (h, _) in &kept {
            assert!(!pool.contains(*h));
        }
        drop(kept);
        log.assert_all_once();
        // The pool works on: its slots are reusable.
        pool.insert_many((0..10).map(|id| Tracked::new(id, &Log::new(10))));
        assert_eq!(pool.len(), 10);
    })
}

#[test]
fn par_drain_found_early_drops_the_rest_once() {
    common::on_rayon_worker(|| {
        let log = Log::new(10_000);
        let mut pool = tracked_pool(&log);
        let found = pool.par_drain().find_any(|(_, v)| v.id == 4_321);
        assert_eq!(found.as_ref().map(|(_, v)| v.id), Some(4_321));
        assert_eq!(log.check_at_most_once(), 10_000 - 1);
        assert!(pool.is_empty());
        drop(found);
        log.assert_all_once();
    })
}

#[test]
fn par_drain_dropped_unused_drops_every_value_once() {
    common::on_rayon_worker(|| {
        let log = Log::new(10_000);
        let mut pool = tracked_pool(&log);
        drop(pool.par_drain());
        log.assert_all_once();
        assert!(pool.is_empty());
    })
}

#[test]
fn from_par_iter_and_par_extend_insert_every_value() {
    common::on_rayon_worker(|| {
        let alive = Alive::new();
        let mut pool: HandlePool<common::Counted> =
            (0..N).into_par_iter().map(|_| alive.value()).collect();
        assert_eq!(pool.len(), N);
        assert_eq!(alive.count(), N);
        pool.par_extend((0..1_000).into_par_iter().map(|_| alive.value()));
        // One by one too (a consumer fed items singly, through `filter`).
        pool.par_extend(
            (0..1_000)
                .into_par_iter()
                .filter(|i| i % 2 == 0)
                .map(|_| alive.value()),
        );
        assert_eq!(pool.len(), N + 1_500);
        assert_eq!(alive.count(), N + 1_500);
        let guard = pin();
        assert_eq!(pool.par_iter(&guard).count(), N + 1_500);
        drop(guard);
        drop(pool);
        assert_eq!(alive.count(), 0);
    })
}

#[test]
fn par_extend_from_a_vec_keeps_every_value() {
    common::on_rayon_worker(|| {
        let mut pool: HandlePool<u64> = HandlePool::new();
        pool.par_extend((0..N as u64).collect::<Vec<_>>());
        let mut all: Vec<u64> = pool.into_iter().map(|(_, v)| v).collect();
        all.sort();
        assert_eq!(all, (0..N as u64).collect::<Vec<_>>());
    })
}

#[test]
fn par_iter_splits_into_parts_that_cover_the_pool() {
    common::on_rayon_worker(|| {
        let pool: HandlePool<u64> = (0..N as u64).collect();
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let parts: Vec<usize> = threads.install(|| {
            let guard = pin();
            pool.par_iter(&guard)
                .fold(|| 0usize, |count, _| count + 1)
                .collect()
        });
        assert!(parts.len() >= 2, "the range was never split: {parts:?}");
        assert_eq!(parts.iter().sum::<usize>(), N);
    })
}
