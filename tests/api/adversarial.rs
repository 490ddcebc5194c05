//! Safe code that lies, panics or asks for too much: the pool must stay
//! sound, bounded and consistent. Each test is named after what it guards
//! against.

use handle_pool::{Handle, HandlePool, PoolHandle};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::common::{Alive, Counted, Lying};

thread_local! {
    /// Calls of `PoolHandle::handle` on this thread, for the lying handle types.
    static CALLS: Cell<usize> = const { Cell::new(0) };
    /// When set, `Panicky::handle` panics on the call with this number.
    static PANIC_AT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// When set, `Panicky::from_handle` panics.
    static PANIC_IN_FROM_HANDLE: Cell<bool> = const { Cell::new(false) };
}

fn calls() -> usize {
    CALLS.with(Cell::get)
}

fn count_call() -> usize {
    CALLS.with(|c| {
        let n = c.get();
        c.set(n + 1);
        n
    })
}

/// A handle whose `handle()` gives the real handle on the first two calls
/// on this thread and slot `first`'s handle on every later call.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
struct Fickle {
    real: Handle,
    first: Handle,
}

impl PoolHandle for Fickle {
    fn from_handle(handle: Handle) -> Self {
        Fickle {
            real: handle,
            first: handle,
        }
    }
    fn handle(self) -> Handle {
        if count_call() < 2 {
            self.real
        } else {
            self.first
        }
    }
}

/// A handle that forgets what it was made from: every one of them names
/// slot 0, generation 1.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
struct Forgetful;

impl PoolHandle for Forgetful {
    fn from_handle(_: Handle) -> Self {
        Forgetful
    }
    fn handle(self) -> Handle {
        Handle::from_bits(1 << 32).unwrap()
    }
}

/// A handle whose methods panic on demand (see `PANIC_AT`, `PANIC_IN_FROM_HANDLE`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
struct Panicky(Handle);

impl PoolHandle for Panicky {
    fn from_handle(handle: Handle) -> Self {
        if PANIC_IN_FROM_HANDLE.with(Cell::get) {
            panic!("from_handle panics");
        }
        Panicky(handle)
    }
    fn handle(self) -> Handle {
        if count_call() == PANIC_AT.with(Cell::get) {
            panic!("handle panics");
        }
        self.0
    }
}

#[test]
fn get_disjoint_mut_reads_each_handle_once() {
    let mut pool: HandlePool<u32, Fickle> = HandlePool::with_handle_type();
    let a = pool.insert(1);
    let b = pool.insert(2);
    CALLS.with(|c| c.set(0));
    // A second `handle()` call on `b` would answer `a`: two `&mut` to one value.
    let [x, y] = pool
        .get_disjoint_mut([a, b])
        .expect("two live, distinct handles");
    assert!(!std::ptr::eq(x, y), "two &mut to one value");
    assert_eq!((*x, *y), (1, 2));
    assert_eq!(calls(), 2, "handle() called more than once per element");
}

#[test]
fn drain_does_not_trust_a_handle_round_trip() {
    let alive = Alive::new();
    let mut pool: HandlePool<(u32, Counted), Forgetful> = HandlePool::with_handle_type();
    for i in 0..3 {
        pool.insert((i, alive.value()));
    }
    let mut ids: Vec<u32> = pool.drain().map(|(_, (id, _))| id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2], "a value was moved out twice");
    assert!(pool.is_empty());
    drop(pool);
    assert_eq!(alive.count(), 0);
}

#[test]
fn iterators_and_retain_do_not_trust_a_handle_round_trip() {
    let alive = Alive::new();
    let mut pool: HandlePool<(u32, Counted), Forgetful> = HandlePool::with_handle_type();
    for i in 0..4 {
        pool.insert((i, alive.value()));
    }
    pool.retain(|_, v| v.0 % 2 == 0);
    assert_eq!(pool.len(), 2);
    assert_eq!(alive.count(), 2);
    let mut ids: Vec<u32> = pool.iter_mut().map(|(_, v)| v.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 2]);
    let mut ids: Vec<u32> = pool.into_iter().map(|(_, v)| v.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 2]);
    assert_eq!(alive.count(), 0);
}

#[test]
fn insert_many_does_not_reserve_what_a_lying_size_hint_claims() {
    for claimed in [50_000_000, u32::MAX as usize, usize::MAX] {
        let pool = HandlePool::new();
        let handles = pool.insert_many(Lying {
            claimed,
            actual: 0..10,
        });
        assert_eq!(handles.len(), 10);
        assert!(
            handles.capacity() <= 1024,
            "handle buffer of {} for 10 values",
            handles.capacity()
        );
        assert!(
            pool.capacity() <= 1024,
            "claimed {claimed}: capacity {} for 10 values",
            pool.capacity()
        );
        assert_eq!(pool.len(), 10);
    }
}

#[test]
fn insert_many_claims_a_bounded_step_ahead_of_what_was_produced() {
    // Honest hints still get large runs: 100k values, few claims, and the
    // pool ends close to the values' count.
    let pool = HandlePool::new();
    let handles = pool.insert_many(0..100_000u32);
    assert_eq!(handles.len(), 100_000);
    assert!(pool.slots_used() <= 100_000 + 64);
    // A hint that lies by a factor of a million at every step.
    let pool = HandlePool::new();
    let handles = pool.insert_many(Lying {
        claimed: 1 << 40,
        actual: 0..5_000,
    });
    assert_eq!(handles.len(), 5_000);
    assert!(
        pool.slots_used() <= 2 * 5_000 + 64,
        "{} slots for 5,000 values",
        pool.slots_used()
    );
}

/// Yields `n` values, then panics.
fn panicking_after(n: usize, alive: &Alive, claimed: usize) -> impl Iterator<Item = Counted> + '_ {
    struct It<'a> {
        left: usize,
        alive: &'a Alive,
        claimed: usize,
    }
    impl Iterator for It<'_> {
        type Item = Counted;
        fn next(&mut self) -> Option<Counted> {
            if self.left == 0 {
                panic!("the iterator panics");
            }
            self.left -= 1;
            Some(self.alive.value())
        }
        fn size_hint(&self) -> (usize, Option<usize>) {
            (self.claimed, Some(self.claimed))
        }
    }
    It {
        left: n,
        alive,
        claimed,
    }
}

#[test]
fn insert_many_with_a_panicking_iterator_loses_no_fresh_slot() {
    let alive = Alive::new();
    let mut pool = HandlePool::new();
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_many(panicking_after(10, &alive, 1000))
    }));
    assert!(result.is_err());
    assert_eq!(pool.len(), 10, "len counts slots that hold nothing");
    assert_eq!(alive.count(), 10);
    let used = pool.slots_used();
    // Every claimed slot the panic left unfilled is reusable.
    let fill = pool.insert_many(alive.values(used - 10));
    assert_eq!(fill.len(), used - 10);
    assert_eq!(pool.slots_used(), used, "slots were lost");
    pool.clear();
    assert_eq!(alive.count(), 0);
}

#[test]
fn insert_many_with_a_panicking_iterator_loses_no_reused_slot() {
    let alive = Alive::new();
    let mut pool = HandlePool::new();
    let handles = pool.insert_many(alive.values(1000));
    assert_eq!(pool.remove_many(&handles), 1000);
    pool.reclaim();
    assert_eq!(alive.count(), 0);
    let used = pool.slots_used();
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_many(panicking_after(10, &alive, 1000))
    }));
    assert!(result.is_err());
    assert_eq!(pool.len(), 10, "len counts slots that hold nothing");
    let fill = pool.insert_many(alive.values(used - 10));
    assert_eq!(fill.len(), used - 10);
    assert_eq!(pool.slots_used(), used, "popped slots were lost");
    assert_eq!(pool.len(), used);
    drop(pool);
    assert_eq!(alive.count(), 0);
}

#[test]
fn remove_many_with_a_panicking_handle_leaves_no_slot_outside_a_batch() {
    let alive = Alive::new();
    let mut pool: HandlePool<Counted, Panicky> = HandlePool::with_handle_type();
    let handles = pool.insert_many(alive.values(10));
    CALLS.with(|c| c.set(0));
    PANIC_AT.with(|p| p.set(4));
    let result = catch_unwind(AssertUnwindSafe(|| pool.remove_many(&handles)));
    PANIC_AT.with(|p| p.set(usize::MAX));
    assert!(result.is_err());
    // The four removed before the panic are removed, and only they.
    assert_eq!(handles.iter().filter(|&&h| pool.contains(h)).count(), 6);
    assert_eq!(pool.len(), 6, "len is off after the panic");
    pool.reclaim();
    assert_eq!(alive.count(), 6, "a removed value was not reclaimed");
    let used = pool.slots_used();
    pool.insert_many(alive.values(4));
    assert_eq!(pool.slots_used(), used, "a removed slot was lost");
    drop(pool);
    assert_eq!(alive.count(), 0);
}

#[test]
fn insert_with_a_panicking_from_handle_leaks_no_slot() {
    let alive = Alive::new();
    let pool: HandlePool<Counted, Panicky> = HandlePool::with_handle_type();
    let first = pool.insert(alive.value());
    PANIC_IN_FROM_HANDLE.with(|p| p.set(true));
    let result = catch_unwind(AssertUnwindSafe(|| pool.insert_with(|_| alive.value())));
    PANIC_IN_FROM_HANDLE.with(|p| p.set(false));
    assert!(result.is_err());
    assert_eq!(pool.len(), 1, "len counts the insert that never happened");
    assert_eq!(alive.count(), 1);
    let used = pool.slots_used();
    for _ in 0..used - 1 {
        pool.insert(alive.value());
    }
    assert_eq!(pool.slots_used(), used, "the slot was lost");
    assert!(pool.contains(first));
    drop(pool);
    assert_eq!(alive.count(), 0);
}

#[test]
fn insert_many_with_a_panicking_from_handle_keeps_the_pool_consistent() {
    let alive = Alive::new();
    let pool: HandlePool<Counted, Panicky> = HandlePool::with_handle_type();
    PANIC_IN_FROM_HANDLE.with(|p| p.set(true));
    let result = catch_unwind(AssertUnwindSafe(|| pool.insert_many(alive.values(100))));
    PANIC_IN_FROM_HANDLE.with(|p| p.set(false));
    assert!(result.is_err());
    // The value published before `from_handle` panicked is in the pool; the
    // other claimed slots went back.
    assert_eq!(pool.len(), 1);
    assert_eq!(alive.count(), 1);
    let used = pool.slots_used();
    pool.insert_many(alive.values(used - 1));
    assert_eq!(pool.slots_used(), used);
    drop(pool);
    assert_eq!(alive.count(), 0);
}

/// Every handle a lookup could confuse with `h`: the same generation at the
/// index with one bit flipped (so one of them aliases `h`'s slot under any
/// power-of-two mask a probe uses), and at indices spread over the whole
/// range (reading pages of the flat region never committed).
fn forgeries_of(h: Handle) -> impl Iterator<Item = Handle> {
    let flips = (0..32).map(move |bit| h.index() ^ (1 << bit));
    let spread = (0..64u64).map(|k| ((k * 0x0400_0000 + k * 7919) % u64::from(u32::MAX)) as u32);
    flips
        .chain(spread)
        .filter(move |&index| index != h.index())
        .filter_map(move |index| {
            Handle::from_bits(u64::from(h.generation()) << 32 | u64::from(index))
        })
}

/// Checks that `live` resolve to their values and that no forgery of any
/// of them resolves, or removes anything.
fn forgeries_resolve_to_nothing(pool: &HandlePool<u64>, live: &[(Handle, u64)]) {
    for &(h, _) in live {
        for forged in forgeries_of(h) {
            if live.iter().any(|&(l, _)| l == forged) {
                continue;
            }
            assert!(
                !pool.contains(forged),
                "{forged:?} forged from {h:?} resolved"
            );
            assert_eq!(pool.get_cloned(forged), None);
            assert!(pool.with(forged, |_| ()).is_none());
            assert!(
                !pool.remove(forged),
                "{forged:?} forged from {h:?} removed something"
            );
        }
    }
    for &(h, v) in live {
        assert_eq!(
            pool.get_cloned(h),
            Some(v),
            "{h:?} lost its value to a forgery"
        );
    }
}

#[test]
fn forged_handles_aliasing_live_slots_resolve_to_nothing() {
    let pool = HandlePool::new();
    let live: Vec<(Handle, u64)> = (0..300).map(|v| (pool.insert(v), v)).collect();
    forgeries_resolve_to_nothing(&pool, &live);
    assert_eq!(pool.len(), 300);
}

#[test]
fn forged_handles_resolve_to_nothing_when_slots_live_in_buckets() {
    // A flat region of 16 slots: the rest live in buckets, whose handles a
    // probe never finds; and no region at all (every lookup probes the
    // sentinel first).
    for flat_slots in [16, 0] {
        let pool = HandlePool::with_config(handle_pool::Config {
            flat_slots,
            ..handle_pool::Config::default()
        });
        let live: Vec<(Handle, u64)> = (0..300).map(|v| (pool.insert(v), v)).collect();
        assert!(live.iter().any(|(h, _)| h.index() >= 16));
        forgeries_resolve_to_nothing(&pool, &live);
        for (h, v) in live.iter().step_by(3) {
            assert!(
                pool.remove(*h),
                "a bucket slot's handle did not remove ({flat_slots} flat slots, value {v})"
            );
            assert!(!pool.contains(*h));
        }
        assert_eq!(pool.len(), 200);
    }
}
