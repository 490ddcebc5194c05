//! `Clone`: a clone is a separate pool in which every handle means what it
//! meant in the original at the moment its slot was read: live handles
//! resolve to equal values, stale handles stay stale for good, and the two
//! pools change independently afterwards.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use handle_pool::{pin, Handle, HandlePool};

use crate::common::{predictable, Log, Rng, StartLine, Tracked};

/// Slot `i` of a pool of `n` slots, half of them removed (the odd ones).
fn half_removed(n: u32) -> (HandlePool<u32>, Vec<Handle>, Vec<Handle>) {
    let pool = HandlePool::new();
    let handles: Vec<Handle> = (0..n).map(|v| pool.insert(v)).collect();
    let (mut live, mut removed) = (Vec::new(), Vec::new());
    for (i, &h) in handles.iter().enumerate() {
        if i % 2 == 1 {
            assert!(pool.remove(h));
            removed.push(h);
        } else {
            live.push(h);
        }
    }
    (pool, live, removed)
}

#[test]
fn a_clone_resolves_every_live_handle_to_an_equal_value() {
    let (pool, live, removed) = half_removed(1000);
    let clone = pool.clone();
    assert_eq!(clone.len(), live.len());
    for &h in &live {
        assert_eq!(clone.get_cloned(h), pool.get_cloned(h));
        assert!(clone.get_cloned(h).is_some());
    }
    for &h in &removed {
        assert!(!clone.contains(h), "{h:?} was stale before the clone");
    }
    let guard = pin();
    let mut original: Vec<(Handle, u32)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
    let mut copied: Vec<(Handle, u32)> = clone.iter(&guard).map(|(h, v)| (h, *v)).collect();
    original.sort_unstable();
    copied.sort_unstable();
    assert_eq!(original, copied);
}

#[test]
fn a_stale_handle_never_resolves_in_the_clone_however_many_inserts_follow() {
    let (pool, live, removed) = half_removed(200);
    let mut clone = pool.clone();
    // Enough inserts to refill every vacant slot, and grow past them.
    let fresh: Vec<Handle> = (0..1000).map(|v| clone.insert(10_000 + v)).collect();
    for &h in &removed {
        assert!(!clone.contains(h), "{h:?} resolved to a newer value");
    }
    let all: HashSet<Handle> = live.iter().chain(&removed).copied().collect();
    for h in &fresh {
        assert!(!all.contains(h), "the clone handed out {h:?} again");
    }
    // Removing everything and inserting again still never resurrects one.
    for &h in live.iter().chain(&fresh) {
        assert!(clone.remove(h));
    }
    clone.reclaim();
    for v in 0..1000 {
        let h = clone.insert(v);
        assert!(!all.contains(&h), "the clone handed out {h:?} again");
    }
}

#[test]
fn a_clone_and_its_original_change_independently() {
    let (pool, live, _) = half_removed(100);
    let clone = pool.clone();
    assert!(clone.remove(live[0]));
    assert_eq!(pool.get_cloned(live[0]), Some(0), "the original keeps it");
    assert!(pool.remove(live[1]));
    assert_eq!(clone.get_cloned(live[1]), Some(2), "the clone keeps it");
    let h = pool.insert(77);
    assert_eq!(pool.get_cloned(h), Some(77));
    assert_eq!(clone.len(), live.len() - 1);
    assert_eq!(pool.len(), live.len());
}

#[test]
fn a_clone_of_an_empty_pool_is_empty_and_usable() {
    let pool: HandlePool<String> = HandlePool::new();
    let clone = pool.clone();
    assert!(clone.is_empty());
    let h = clone.insert("x".to_string());
    assert_eq!(clone.get_cloned(h).as_deref(), Some("x"));
    assert!(!pool.contains(h));
}

#[test]
fn retired_slots_stay_retired_in_the_clone() {
    // Generation limit 2: a slot emptied at generation 2 is retired. `take`
    // frees the slot at once, so the next insert reuses it.
    let mut pool: HandlePool<u32> = HandlePool::with_config(predictable(2, 64, 1));
    let first = pool.insert(1);
    assert_eq!(pool.take(first), Some(1));
    let second = pool.insert(2);
    assert_eq!((second.index(), second.generation()), (first.index(), 2));
    assert_eq!(pool.take(second), Some(2));
    let live = pool.insert(3);
    assert_ne!(live.index(), first.index(), "the original retired the slot");
    let mut clone = pool.clone();
    assert_eq!(clone.get_cloned(live), Some(3));
    for v in 0..16 {
        let h = clone.insert(v);
        assert_ne!(
            h.index(),
            first.index(),
            "the clone handed a retired slot out"
        );
    }
    clone.reclaim();
    assert!(!clone.contains(first) && !clone.contains(second));
}

/// A value whose `clone` panics on the `n`-th clone of any value (counted
/// in `clones`), and that records its drops in a [`Log`].
struct Fragile {
    tracked: Tracked,
    clones: Arc<AtomicUsize>,
    panic_at: usize,
    next_id: Arc<AtomicUsize>,
}

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if self.clones.fetch_add(1, Ordering::SeqCst) + 1 == self.panic_at {
            panic!("clone number {} panics", self.panic_at);
        }
        Fragile {
            tracked: Tracked::new(
                self.next_id.fetch_add(1, Ordering::SeqCst),
                &self.tracked.log,
            ),
            clones: Arc::clone(&self.clones),
            panic_at: self.panic_at,
            next_id: Arc::clone(&self.next_id),
        }
    }
}

#[test]
fn a_panicking_clone_leaves_the_original_whole_and_drops_what_it_made() {
    // Ids 0..10 for the originals, 10.. for the clones made before the panic.
    let log = Log::new(20);
    let clones = Arc::new(AtomicUsize::new(0));
    let next_id = Arc::new(AtomicUsize::new(10));
    let pool = HandlePool::new();
    let handles: Vec<Handle> = (0..10)
        .map(|id| {
            pool.insert(Fragile {
                tracked: Tracked::new(id, &log),
                clones: Arc::clone(&clones),
                panic_at: 6,
                next_id: Arc::clone(&next_id),
            })
        })
        .collect();
    let result = catch_unwind(AssertUnwindSafe(|| pool.clone()));
    assert!(result.is_err(), "the sixth clone panicked");
    let made = next_id.load(Ordering::SeqCst) - 10;
    assert_eq!(made, 5, "five clones were made before the panic");
    for id in 10..10 + made {
        assert_eq!(log.count(id), 1, "clone {id} dropped once");
    }
    for (id, &h) in handles.iter().enumerate() {
        assert_eq!(log.count(id), 0, "original {id} not dropped");
        assert!(pool.contains(h));
    }
    assert_eq!(pool.len(), 10);
    drop(pool);
    for id in 0..10 {
        assert_eq!(log.count(id), 1, "original {id} dropped once with the pool");
    }
}

/// A value whose `clone` uses the pool it is in: cloning reads the pool
/// under a guard, and user code inside may insert, remove and read. (A
/// `Weak`, so that the values do not keep their own pool alive.)
#[derive(Debug)]
struct Reentrant {
    value: u32,
    pool: Weak<HandlePool<Reentrant>>,
    scratch: Arc<Mutex<Vec<Handle>>>,
}

impl Clone for Reentrant {
    fn clone(&self) -> Self {
        let pool = self.pool.upgrade().expect("the pool is alive");
        let h = pool.insert(Reentrant {
            value: u32::MAX,
            pool: Weak::clone(&self.pool),
            scratch: Arc::clone(&self.scratch),
        });
        assert!(pool.contains(h));
        assert!(pool.remove(h));
        self.scratch.lock().unwrap().push(h);
        Reentrant {
            value: self.value,
            pool: Weak::clone(&self.pool),
            scratch: Arc::clone(&self.scratch),
        }
    }
}

#[test]
fn a_clone_whose_values_use_the_pool_they_are_in() {
    let scratch = Arc::new(Mutex::new(Vec::new()));
    let pool = Arc::new_cyclic(|weak: &Weak<HandlePool<Reentrant>>| {
        let pool = HandlePool::new();
        for value in 0..50 {
            pool.insert(Reentrant {
                value,
                pool: Weak::clone(weak),
                scratch: Arc::clone(&scratch),
            });
        }
        pool
    });
    let handles: Vec<Handle> = {
        let guard = pin();
        let mut handles: Vec<(u32, Handle)> =
            pool.iter(&guard).map(|(h, r)| (r.value, h)).collect();
        handles.sort_unstable();
        handles.into_iter().map(|(_, h)| h).collect()
    };
    let clone = (*pool).clone();
    assert_eq!(
        clone.len(),
        50,
        "inserted and removed during the clone: not copied live"
    );
    for (value, &h) in handles.iter().enumerate() {
        assert_eq!(clone.with(h, |r| r.value), Some(value as u32));
    }
    let scratch = scratch.lock().unwrap();
    assert_eq!(scratch.len(), 50, "each value's clone used the pool");
    for &h in scratch.iter() {
        assert!(
            !clone.contains(h),
            "a value removed during the clone is live in it"
        );
    }
}

#[test]
fn cloning_while_other_threads_churn_copies_states_the_slots_had() {
    const THREADS: usize = 2;
    const ROUNDS: usize = 20;
    const STABLE: u64 = u32::MAX as u64;
    let pool = Arc::new(HandlePool::<u64>::new());
    // Values before the churn: their position above a low half no handle
    // has (`u32::MAX` is past `MAX_INDEX`), so any copy is checkable.
    let stable: Vec<Handle> = (0..2000u64)
        .map(|v| pool.insert(v << 32 | STABLE))
        .collect();
    let removed_before: Vec<Handle> = stable.iter().step_by(3).copied().collect();
    for &h in &removed_before {
        assert!(pool.remove(h));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(StartLine::new(THREADS + 1));
    let churners: Vec<_> = (0..THREADS)
        .map(|t| {
            let (pool, stop, start) = (Arc::clone(&pool), Arc::clone(&stop), Arc::clone(&start));
            thread::spawn(move || {
                let mut rng = Rng::new(t as u64 + 1);
                let mut mine = Vec::new();
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    // Each value names its own handle: a copy must keep it.
                    let h = pool.insert_with(|h| h.to_bits());
                    mine.push(h);
                    if mine.len() > 64 {
                        let victim = mine.swap_remove(rng.below(mine.len()));
                        assert!(pool.remove(victim));
                    }
                }
            })
        })
        .collect();
    start.wait();
    let kept: Vec<Handle> = stable
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, &h)| h)
        .collect();
    for _ in 0..ROUNDS {
        let clone = (*pool).clone();
        for (i, &h) in stable.iter().enumerate() {
            if i % 3 == 0 {
                assert!(!clone.contains(h), "removed before the clone, live in it");
            }
        }
        for &h in &kept {
            assert!(clone.contains(h), "live throughout, missing from the clone");
        }
        let guard = pin();
        for (h, &v) in clone.iter(&guard) {
            if v & STABLE == STABLE {
                assert_eq!(stable[(v >> 32) as usize], h, "a stable value moved");
            } else {
                assert_eq!(v, h.to_bits(), "a churned value under another handle");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for churner in churners {
        churner.join().unwrap();
    }
}

/// A value whose `clone` runs `hook` with how many clones came before it.
#[derive(Clone)]
struct Hooked {
    hook: Arc<dyn Fn(usize) + Send + Sync>,
    clones: Arc<AtomicUsize>,
}

impl Hooked {
    fn clone_with_hook(&self) -> Self {
        (self.hook)(self.clones.fetch_add(1, Ordering::SeqCst));
        self.clone()
    }
}

/// A long clone does not hold reclamation back for its whole length: a
/// value removed (and its batch sealed) early in the clone is dropped by a
/// flush later in the same clone, once the clone's guard has been repinned.
#[test]
fn a_long_clone_lets_reclamation_go_on() {
    let other: Arc<HandlePool<Arc<()>>> = Arc::new(HandlePool::new());
    let witness = Arc::new(());
    let victim = other.insert(Arc::clone(&witness));
    let dropped_during_clone = Arc::new(AtomicBool::new(false));
    let hook = {
        let (other, witness, dropped) = (
            Arc::clone(&other),
            Arc::downgrade(&witness),
            Arc::clone(&dropped_during_clone),
        );
        move |n: usize| {
            if n == 10 {
                assert!(other.remove(victim));
                other.flush();
            }
            if n == 200 {
                // Other tests' guards (any thread's) may hold it back for a
                // moment; this call's own guard, pinned since, must not.
                let deadline = Instant::now() + Duration::from_secs(5);
                while witness.strong_count() != 0 && Instant::now() < deadline {
                    other.flush();
                    std::thread::yield_now();
                }
                dropped.store(witness.strong_count() == 0, Ordering::SeqCst);
            }
        }
    };
    let value = Hooked {
        hook: Arc::new(hook),
        clones: Arc::new(AtomicUsize::new(0)),
    };
    let pool: HandlePool<Pooled> = HandlePool::new();
    for _ in 0..300 {
        pool.insert(Pooled(value.clone()));
    }
    drop(witness);
    let clone = pool.clone();
    assert_eq!(clone.len(), 300);
    assert!(
        dropped_during_clone.load(Ordering::SeqCst),
        "the removed value waited for the whole clone"
    );
}

/// Clones through [`Hooked::clone_with_hook`].
struct Pooled(Hooked);

impl Clone for Pooled {
    fn clone(&self) -> Self {
        Pooled(self.0.clone_with_hook())
    }
}
