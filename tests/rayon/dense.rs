//! `DensePool`'s parallel passes: after compaction, `par_iter_mut` and
//! `par_values_mut` visit each live value once, split along the dense
//! array's slices, and match the sequential pass.

use std::collections::HashMap;

use handle_pool::{Config, DensePool, Handle};
use rayon::prelude::*;

use crate::common::Rng;

/// Many values, in segments of 1, 2, 4… positions: splits cross many
/// segment boundaries.
fn churned(n: u64) -> (DensePool<u64>, HashMap<Handle, u64>) {
    let pool: DensePool<u64> = DensePool::with_config(Config::tiny(1000, 16));
    let mut live = HashMap::new();
    let mut rng = Rng::new(9);
    for v in 0..n {
        live.insert(pool.insert(v), v);
    }
    let victims: Vec<Handle> = live.keys().copied().filter(|_| rng.below(3) == 0).collect();
    for h in victims {
        assert!(pool.remove(h));
        live.remove(&h);
    }
    (pool, live)
}

#[test]
fn dense_par_iter_mut_visits_each_live_value_once_after_holes() {
    crate::common::on_rayon_worker(|| {
        let (mut pool, live) = churned(100_000);
        assert!(pool.holes() > 0);
        let mut seen: Vec<(Handle, u64)> = pool.par_iter_mut().map(|(h, v)| (h, *v)).collect();
        assert_eq!(pool.holes(), 0, "par_iter_mut compacts first");
        seen.sort_unstable();
        let mut expected: Vec<(Handle, u64)> = live.iter().map(|(&h, &v)| (h, v)).collect();
        expected.sort_unstable();
        assert_eq!(seen, expected);
        // Mutations land on the right values.
        pool.par_iter_mut().for_each(|(h, v)| *v ^= h.to_bits());
        for (&h, &v) in &live {
            assert_eq!(pool.get_cloned(h), Some(h.to_bits() ^ v));
        }
    })
}

#[test]
fn dense_par_values_mut_matches_the_sequential_pass() {
    crate::common::on_rayon_worker(|| {
        let (mut pool, live) = churned(50_000);
        pool.par_values_mut().for_each(|v| *v += 1);
        let sum: u64 = pool.par_values_mut().map(|v| *v).sum();
        assert_eq!(sum, live.values().map(|v| v + 1).sum::<u64>());
        assert_eq!(sum, pool.values_mut().map(|v| *v).sum::<u64>());
        assert_eq!(pool.par_values_mut().count(), live.len());
    })
}

#[test]
fn dense_par_iter_mut_stops_early_without_losing_anything() {
    crate::common::on_rayon_worker(|| {
        let (mut pool, live) = churned(10_000);
        let found = pool.par_iter_mut().find_any(|(_, v)| **v % 1000 == 7);
        assert!(found.is_some() || live.values().all(|v| v % 1000 != 7));
        assert_eq!(pool.len(), live.len());
        assert_eq!(pool.values_mut().count(), live.len());
    })
}

#[test]
fn dense_par_passes_on_an_empty_pool_yield_nothing() {
    crate::common::on_rayon_worker(|| {
        let mut pool: DensePool<u64> = DensePool::new();
        assert_eq!(pool.par_iter_mut().count(), 0);
        assert_eq!(pool.par_values_mut().count(), 0);
        let h = pool.insert(1);
        pool.remove(h);
        assert_eq!(pool.par_iter_mut().count(), 0);
    })
}
