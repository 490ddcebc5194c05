//! `SecondaryMap` with rayon: `par_iter` visits what `iter` would, each
//! entry once, across leaves and nodes of the table, also while other
//! threads insert and remove; `par_iter_mut` reaches every value once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use handle_pool::{pin, Handle, HandlePool, SecondaryMap};
use rayon::prelude::*;

use crate::common::{self, Alive};

fn handle(index: u32, generation: u32) -> Handle {
    Handle::from_bits((u64::from(generation) << 32) | u64::from(index)).unwrap()
}

#[test]
fn par_iter_visits_what_iter_visits_once_each() {
    common::on_rayon_worker(|| {
        // Dense at first, then holes, then entries far out in other nodes.
        let map: SecondaryMap<u64> = (0..50_000u32)
            .filter(|i| i % 3 != 0)
            .chain([
                1 << 20,
                (1 << 24) + 5,
                3_000_000_000,
                handle_pool::MAX_INDEX,
            ])
            .map(|i| (handle(i, 1 + i % 5), u64::from(i)))
            .collect();
        let guard = pin();
        let sequential: Vec<(Handle, u64)> = map.iter(&guard).map(|(h, v)| (h, *v)).collect();
        let mut parallel: Vec<(Handle, u64)> = map.par_iter(&guard).map(|(h, v)| (h, *v)).collect();
        parallel.sort_by_key(|(h, _)| h.index());
        assert_eq!(parallel, sequential);
        assert_eq!(parallel.len(), map.len());
        for (h, v) in parallel {
            assert_eq!(u64::from(h.index()), v);
        }
    })
}

#[test]
fn par_iter_mut_reaches_every_value_once() {
    common::on_rayon_worker(|| {
        let mut map: SecondaryMap<u64> = (0..20_000u32).map(|i| (handle(i * 3, 1), 1)).collect();
        map.par_iter_mut()
            .for_each(|(h, v)| *v += u64::from(h.index()));
        let expected: u64 = (0..20_000u64).map(|i| 1 + i * 3).sum();
        assert_eq!(map.values(&pin()).sum::<u64>(), expected);
    })
}

#[test]
fn par_iter_under_concurrent_inserts_and_removes_yields_each_entry_once() {
    common::on_rayon_worker(|| {
        let alive = Alive::new();
        let entities: HandlePool<()> = HandlePool::new();
        let map = SecondaryMap::new();
        let stable: Vec<Handle> = (0..10_000).map(|_| entities.insert(())).collect();
        for &e in &stable {
            map.insert(e, (e.to_bits(), alive.value()));
        }
        let stop = AtomicBool::new(false);
        common::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let e = entities.insert(());
                    map.insert(e, (e.to_bits(), alive.value()));
                    map.remove(e);
                    entities.remove(e);
                }
            });
            for _ in 0..20 {
                let guard = pin();
                let seen: Vec<(Handle, u64)> = map
                    .par_iter(&guard)
                    .map(|(h, (bits, _))| (h, *bits))
                    .collect();
                let distinct: HashSet<u32> = seen.iter().map(|(h, _)| h.index()).collect();
                assert_eq!(distinct.len(), seen.len(), "an entry yielded twice");
                for (h, bits) in &seen {
                    assert_eq!(h.to_bits(), *bits, "a value under another entity's handle");
                }
                let seen: HashSet<Handle> = seen.into_iter().map(|(h, _)| h).collect();
                assert!(
                    stable.iter().all(|e| seen.contains(e)),
                    "a stable entry missed"
                );
            }
            stop.store(true, Ordering::Relaxed);
        });
        drop(map);
        assert_eq!(alive.count(), 0);
    })
}
