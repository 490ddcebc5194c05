//! `DensePool` under threads: workers insert, look up and remove while
//! others iterate under guards (every value seen is live at its visit,
//! intact, and belongs to its handle; after `compact` the array holds
//! exactly the live values), racing removes of one handle, and references
//! held across removals and flushes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use handle_pool::{pin, DensePool, Handle};

use crate::common::{self, Rng};
use crate::serial;

/// A value that knows its handle, with a check word a torn or overwritten
/// value would get wrong.
struct Payload {
    handle: Handle,
    n: u64,
    check: u64,
}

impl Payload {
    fn new(handle: Handle, n: u64) -> Self {
        Payload {
            handle,
            n,
            check: !n ^ handle.to_bits(),
        }
    }

    fn assert_whole(&self, handle: Handle) {
        assert_eq!(self.handle, handle, "a value yielded under another handle");
        assert_eq!(self.check, !self.n ^ handle.to_bits(), "a torn value");
    }
}

/// Waits until `count` threads have arrived: a barrier of atomics, which
/// ThreadSanitizer sees (std's is not instrumented here).
fn arrive(count: &AtomicUsize, threads: usize) {
    count.fetch_add(1, Ordering::SeqCst);
    while count.load(Ordering::SeqCst) < threads {
        std::hint::spin_loop();
        thread::yield_now();
    }
}

#[test]
fn dense_workers_insert_look_up_and_remove_while_others_iterate_under_guards() {
    let _serial = serial();
    const WORKERS: u64 = 2;
    const OPS: u64 = 50_000;
    const WINDOW: usize = 64;
    let pool: DensePool<Payload> = DensePool::new();
    // The order in which removals returned: each remover records its own,
    // each pass what it saw and the count when it began; they are checked
    // once every thread is joined (no lock the sanitizers cannot see).
    let removals = AtomicU64::new(0);
    let working = AtomicUsize::new(WORKERS as usize);
    type Pass = (u64, Vec<Handle>);
    let (live, removed, passes): (Vec<Handle>, HashMap<Handle, u64>, Vec<Pass>) =
        common::scope(|s| {
            let iterators: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut passes: Vec<Pass> = Vec::new();
                        while working.load(Ordering::SeqCst) > 0 || passes.len() < 2 {
                            // Removals done before this pass began must not show.
                            let before = removals.load(Ordering::SeqCst);
                            let guard = pin();
                            // `fold` checks blocks of words before their values.
                            pool.values(&guard).for_each(|v| v.assert_whole(v.handle));
                            let mut seen = Vec::new();
                            for (h, v) in pool.iter(&guard) {
                                v.assert_whole(h);
                                // A lookup now finds it, or it was removed since.
                                if let Some(found) = pool.get(h, &guard) {
                                    assert!(std::ptr::eq(found, v), "the value moved");
                                }
                                seen.push(h);
                            }
                            drop(guard);
                            passes.push((before, seen));
                        }
                        passes
                    })
                })
                .collect();
            let workers: Vec<_> = (0..WORKERS)
                .map(|w| {
                    let (pool, removals, working) = (&pool, &removals, &working);
                    s.spawn(move || {
                        let mut rng = Rng::new(w + 1);
                        let mut window: Vec<Handle> = Vec::new();
                        let mut removed = Vec::new();
                        for i in 0..OPS {
                            let n = (w << 32) | i;
                            let h = pool.insert_with(|h| Payload::new(h, n));
                            window.push(h);
                            let guard = pin();
                            let probe = window[rng.below(window.len())];
                            pool.get(probe, &guard)
                                .expect("a handle this thread holds resolves")
                                .assert_whole(probe);
                            drop(guard);
                            assert_eq!(pool.with(h, |v| v.n), Some(n));
                            if window.len() > WINDOW || rng.below(4) == 0 {
                                let victim = window.swap_remove(rng.below(window.len()));
                                assert!(pool.remove(victim));
                                assert!(!pool.remove(victim));
                                removed.push((victim, removals.fetch_add(1, Ordering::SeqCst) + 1));
                            }
                        }
                        working.fetch_sub(1, Ordering::SeqCst);
                        (window, removed)
                    })
                })
                .collect();
            let mut live = Vec::new();
            let mut removed = HashMap::new();
            for worker in workers {
                let (window, gone) = worker.join().unwrap();
                live.extend(window);
                removed.extend(gone);
            }
            let passes = iterators
                .into_iter()
                .flat_map(|it| it.join().unwrap())
                .collect();
            (live, removed, passes)
        });
    for (before, seen) in &passes {
        let mut once = HashSet::new();
        for h in seen {
            assert!(once.insert(*h), "{h:?} yielded twice in one pass");
            if let Some(&at) = removed.get(h) {
                assert!(at > *before, "{h:?} was removed before the pass began");
            }
        }
    }
    let mut pool = pool;
    let expected: HashSet<Handle> = live.iter().copied().collect();
    assert_eq!(pool.len(), expected.len());
    pool.compact();
    assert_eq!(pool.holes(), 0);
    // The array holds exactly the live values, each at its handle's position.
    let mut found = HashSet::new();
    let in_order: Vec<Handle> = pool.as_mut_slices().flatten().map(|v| v.handle).collect();
    for (position, h) in in_order.into_iter().enumerate() {
        assert_eq!(pool.handle_at(position), Some(h));
        assert_eq!(pool.position(h), Some(position));
        assert!(found.insert(h));
    }
    assert_eq!(found, expected);
}

#[test]
fn dense_racing_removes_of_one_handle_exactly_one_wins() {
    let _serial = serial();
    let pool: DensePool<Arc<()>> = DensePool::new();
    let value = Arc::new(());
    for round in 0..2_000 {
        let h = pool.insert(Arc::clone(&value));
        let arrived = AtomicUsize::new(0);
        let wins: usize = common::scope(|s| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        arrive(&arrived, 2);
                        usize::from(pool.remove(h))
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert_eq!(wins, 1, "round {round}");
    }
    assert!(pool.is_empty());
    assert_eq!(pool.holes(), 2_000);
    let mut pool = pool;
    pool.compact();
    assert_eq!(Arc::strong_count(&value), 1);
}

#[test]
fn dense_references_held_across_removals_and_flushes_stay_valid() {
    let _serial = serial();
    let pool: DensePool<Arc<u64>> = DensePool::new();
    let values: Vec<Arc<u64>> = (0..1000).map(Arc::new).collect();
    let handles: Vec<Handle> = values.iter().map(|v| pool.insert(Arc::clone(v))).collect();
    let pinned = AtomicBool::new(false);
    let removed = AtomicBool::new(false);
    common::scope(|s| {
        s.spawn(|| {
            let guard = pin();
            let held: Vec<&Arc<u64>> = handles
                .iter()
                .map(|&h| pool.get(h, &guard).unwrap())
                .collect();
            pinned.store(true, Ordering::SeqCst);
            while !removed.load(Ordering::SeqCst) {
                thread::yield_now();
            }
            for (n, value) in held.iter().enumerate() {
                assert_eq!(***value, n as u64, "read after its removal and flush");
            }
        });
        s.spawn(|| {
            while !pinned.load(Ordering::SeqCst) {
                thread::yield_now();
            }
            for &h in &handles {
                assert!(pool.remove(h));
                if h.index() % 64 == 0 {
                    pool.flush();
                }
            }
            pool.flush();
            removed.store(true, Ordering::SeqCst);
        });
    });
    // The reader's guard is gone: a flush drops them all.
    pool.flush();
    for value in &values {
        assert_eq!(Arc::strong_count(value), 1);
    }
}
