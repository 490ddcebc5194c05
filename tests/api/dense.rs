//! `DensePool`, one thread at a time: handles and their staleness, the
//! dense array (positions, holes, compaction, sort, the `&mut` passes),
//! reuse order, generations and the limits, and hostile handles.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use handle_pool::{new_handle_type, pin, Config, DensePool, Handle, PoolHandle};

use crate::common::{quiet_panics, Rng};

/// Small segments and buckets (1, 2, 4… positions), so a few values cross
/// many segments, with `max_slots` and `max_generation` as given.
fn tiny(max_generation: u32, max_slots: u32) -> Config {
    Config {
        max_slots,
        stripes: 1,
        ..Config::tiny(max_generation, 4)
    }
}

/// The live values in position order, as the `&mut` slices give them.
fn dense_values<T: Copy, H: PoolHandle>(pool: &mut DensePool<T, H>) -> Vec<T> {
    pool.as_mut_slices().flatten().map(|v| *v).collect()
}

/// Every live handle resolves to its value, sits where `position` says,
/// and `handle_at` maps the position back.
fn check_index(pool: &DensePool<u64>, expected: &HashMap<Handle, u64>) {
    let guard = pin();
    for (&h, &v) in expected {
        assert_eq!(pool.get(h, &guard), Some(&v), "{h:?}");
        let position = pool.position(h).expect("a live handle has a position");
        assert_eq!(pool.handle_at(position), Some(h));
    }
    assert_eq!(pool.len(), expected.len());
}

#[test]
fn a_removed_handle_is_stale_at_once_and_forever() {
    let mut pool = DensePool::new();
    let h = pool.insert(String::from("a"));
    let guard = pin();
    let r = pool.get(h, &guard).unwrap();
    assert!(pool.remove(h));
    assert_eq!(
        r, "a",
        "the reference outlives the removal while its guard lives"
    );
    assert!(!pool.contains(h));
    assert!(pool.get(h, &guard).is_none());
    assert_eq!(pool.with(h, |v| v.len()), None);
    assert_eq!(pool.position(h), None);
    assert!(!pool.remove(h));
    drop(guard);
    pool.compact();
    // The index comes back with a higher generation; the old handle stays stale.
    let again = pool.insert(String::from("b"));
    assert_eq!(again.index(), h.index());
    assert!(again.generation() > h.generation());
    assert!(!pool.contains(h) && pool.contains(again));
    assert_eq!(pool.take(h), None);
    assert_eq!(pool.get_mut(h), None);
}

#[test]
fn inserts_append_and_iteration_skips_holes_in_position_order() {
    let pool = DensePool::new();
    let handles: Vec<Handle> = (0..10u64).map(|v| pool.insert(v)).collect();
    for (position, &h) in handles.iter().enumerate() {
        assert_eq!(pool.position(h), Some(position));
    }
    for &h in handles.iter().step_by(3) {
        assert!(pool.remove(h));
    }
    assert_eq!(pool.holes(), 4);
    assert_eq!(pool.len(), 6);
    let guard = pin();
    let seen: Vec<(Handle, u64)> = pool.iter(&guard).map(|(h, v)| (h, *v)).collect();
    let expected: Vec<(Handle, u64)> = (0..10u64)
        .filter(|v| v % 3 != 0)
        .map(|v| (handles[v as usize], v))
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(
        pool.values(&guard).copied().sum::<u64>(),
        expected.iter().map(|e| e.1).sum()
    );
    // Positions of holes and past the end have no handle.
    assert_eq!(pool.handle_at(0), None);
    assert_eq!(pool.handle_at(1), Some(handles[1]));
    assert_eq!(pool.handle_at(10), None);
    assert_eq!(pool.handle_at(usize::MAX), None);
}

#[test]
fn values_folds_whole_blocks_and_blocks_with_holes_alike() {
    let pool = DensePool::new();
    let handles: Vec<Handle> = (0..5000u64).map(|v| pool.insert(v)).collect();
    let mut rng = Rng::new(13);
    // Holes in some blocks of positions only, whole blocks elsewhere.
    for (position, &h) in handles.iter().enumerate() {
        if (position / 64) % 3 == 0 && rng.below(4) == 0 {
            assert!(pool.remove(h));
        }
    }
    let guard = pin();
    // `next`, one position at a time, against `fold` (`sum`, `for_each`).
    let mut one_by_one = Vec::new();
    for v in pool.values(&guard) {
        one_by_one.push(*v);
    }
    let mut folded = Vec::new();
    pool.values(&guard).for_each(|v| folded.push(*v));
    assert_eq!(folded, one_by_one);
    assert_eq!(pool.values(&guard).sum::<u64>(), one_by_one.iter().sum());
    let through_iter: Vec<u64> = pool.iter(&guard).map(|(_, v)| *v).collect();
    assert_eq!(through_iter, one_by_one);
    assert_eq!(one_by_one.len(), pool.len());
}

#[test]
fn compaction_fills_holes_lowest_first_with_the_last_values() {
    let mut pool = DensePool::new();
    let handles: Vec<Handle> = (0..8u64).map(|v| pool.insert(v)).collect();
    for i in [1, 3, 7] {
        assert!(pool.remove(handles[i]));
    }
    pool.compact();
    // Hole 1 takes 6 (7 was a hole, cleared on the way down), hole 3 takes 5.
    assert_eq!(dense_values(&mut pool), [0, 6, 2, 5, 4]);
    assert_eq!(pool.holes(), 0);
    let expected: HashMap<Handle, u64> = [0, 2, 4, 5, 6].map(|v| (handles[v], v as u64)).into();
    check_index(&pool, &expected);
    // A round without holes changes nothing.
    pool.compact();
    assert_eq!(dense_values(&mut pool), [0, 6, 2, 5, 4]);
}

#[test]
fn every_mut_pass_leaves_the_pool_dense() {
    let mut pool: DensePool<u64> = DensePool::with_config(tiny(1000, 1 << 20));
    let mut rng = Rng::new(7);
    let mut live: HashMap<Handle, u64> = HashMap::new();
    for round in 0..40u64 {
        for i in 0..20 {
            let v = round * 100 + i;
            live.insert(pool.insert(v), v);
        }
        let victims: Vec<Handle> = live.keys().copied().filter(|_| rng.below(3) == 0).collect();
        for h in victims {
            assert!(pool.remove(h));
            live.remove(&h);
        }
        match round % 6 {
            0 => pool.compact(),
            1 => pool.values_mut().for_each(|v| *v += 0),
            2 => pool.iter_mut().for_each(|(h, v)| assert_eq!(live[&h], *v)),
            3 => pool.retain(|_, _| true),
            4 => pool.sort_by_key(|v| *v),
            _ => {
                let n = pool.as_mut_slices().map(|s| s.len()).sum::<usize>();
                assert_eq!(n, live.len());
            }
        }
        assert_eq!(pool.holes(), 0);
        let mut values = dense_values(&mut pool);
        values.sort_unstable();
        let mut expected: Vec<u64> = live.values().copied().collect();
        expected.sort_unstable();
        assert_eq!(values, expected);
        check_index(&pool, &live);
    }
}

#[test]
fn get_mut_does_not_compact() {
    let mut pool = DensePool::new();
    let a = pool.insert(1);
    let b = pool.insert(2);
    pool.remove(a);
    *pool.get_mut(b).unwrap() += 10;
    assert_eq!(pool.holes(), 1);
    assert_eq!(pool.position(b), Some(1));
    assert_eq!(pool.take(b), Some(12));
    assert_eq!(pool.holes(), 0);
    assert!(pool.is_empty());
}

#[test]
fn sorting_keeps_every_handle_valid() {
    let mut pool: DensePool<u64> = DensePool::with_config(tiny(1000, 1 << 20));
    let mut rng = Rng::new(11);
    let mut live = HashMap::new();
    for _ in 0..500 {
        let v = rng.next() % 1000;
        live.insert(pool.insert(v), v);
    }
    let victims: Vec<Handle> = live.keys().copied().take(100).collect();
    for h in victims {
        pool.remove(h);
        live.remove(&h);
    }
    pool.sort_by_key(|v| *v);
    let values = dense_values(&mut pool);
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "sorted");
    check_index(&pool, &live);
    pool.sort_by(|a, b| b.cmp(a));
    let values = dense_values(&mut pool);
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "sorted down");
    check_index(&pool, &live);
}

#[test]
fn sorting_is_stable() {
    let mut pool = DensePool::new();
    let handles: Vec<Handle> = (0..100u64).map(|i| pool.insert((i % 3, i))).collect();
    pool.sort_by_key(|&(key, _)| key);
    let values = dense_values(&mut pool);
    for w in values.windows(2) {
        assert!(
            w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1),
            "{w:?}"
        );
    }
    for (i, &h) in handles.iter().enumerate() {
        assert_eq!(pool.get_cloned(h), Some((i as u64 % 3, i as u64)));
    }
}

#[test]
fn retain_swap_removes_as_it_goes_and_visits_every_value_once() {
    let mut pool = DensePool::new();
    let handles: Vec<Handle> = (0..10u64).map(|v| pool.insert(v)).collect();
    let mut visited = Vec::new();
    pool.retain(|h, v| {
        visited.push(*v);
        assert_eq!(handles[*v as usize], h);
        *v % 2 == 1
    });
    visited.sort_unstable();
    assert_eq!(visited, (0..10).collect::<Vec<_>>());
    let mut values = dense_values(&mut pool);
    values.sort_unstable();
    assert_eq!(values, [1, 3, 5, 7, 9]);
    for (v, &h) in handles.iter().enumerate() {
        assert_eq!(pool.contains(h), v % 2 == 1);
    }
}

#[test]
fn drain_takes_from_the_end_and_clear_empties() {
    let mut pool = DensePool::new();
    let handles: Vec<Handle> = (0..5u64).map(|v| pool.insert(v)).collect();
    pool.remove(handles[0]);
    let mut drain = pool.drain();
    assert_eq!(drain.len(), 4);
    // After compaction [4, 1, 2, 3]: drained from the last position down.
    assert_eq!(drain.next(), Some((handles[3], 3)));
    assert_eq!(drain.next(), Some((handles[2], 2)));
    drop(drain);
    assert!(pool.is_empty());
    assert!(handles.iter().all(|&h| !pool.contains(h)));
    // A leaked drain leaves what it had not yielded in the pool.
    let kept: Vec<Handle> = (0..3u64).map(|v| pool.insert(v)).collect();
    let mut drain = pool.drain();
    drain.next();
    std::mem::forget(drain);
    assert_eq!(pool.len(), 2);
    assert!(pool.contains(kept[0]) && pool.contains(kept[1]) && !pool.contains(kept[2]));
    pool.clear();
    assert!(pool.is_empty() && kept.iter().all(|&h| !pool.contains(h)));
}

#[test]
fn freed_indices_are_reused_first_in_first_out_after_compaction() {
    let mut pool: DensePool<u64> = DensePool::with_config(tiny(1000, 1 << 20));
    let [a, b, c] = [0u64, 1, 2].map(|v| pool.insert(v));
    // Freed in the order b, a, c.
    pool.remove(b);
    pool.remove(a);
    pool.remove(c);
    // Not before the next `&mut` call: a fresh index.
    let d = pool.insert(3);
    assert_eq!(d.index(), 3);
    pool.compact();
    let e = pool.insert(4);
    let f = pool.insert(5);
    let g = pool.insert(6);
    assert_eq!(
        [e.index(), f.index(), g.index()],
        [b.index(), a.index(), c.index()]
    );
    assert_eq!([e.generation(), f.generation(), g.generation()], [2, 2, 2]);
    // Indices freed by `&mut` removals queue behind those.
    pool.compact();
    assert_eq!(pool.take(e), Some(4));
    pool.remove(f);
    pool.compact();
    assert_eq!(pool.insert(7).index(), e.index());
    assert_eq!(pool.insert(8).index(), f.index());
    let fresh = pool.insert(9);
    assert_eq!(fresh.index(), 4, "the queue is empty: a fresh index");
}

#[test]
fn a_slot_index_is_retired_when_its_generation_runs_out() {
    let mut pool: DensePool<u64> = DensePool::with_config(tiny(3, 1 << 20));
    let mut stale = Vec::new();
    let first = pool.insert(0u64);
    let index = first.index();
    let mut h = first;
    for generation in 1..=3 {
        assert_eq!((h.index(), h.generation()), (index, generation));
        stale.push(h);
        assert!(pool.remove(h));
        pool.compact();
        h = pool.insert(generation as u64);
    }
    // The fourth insert could not reuse the exhausted index.
    assert_ne!(h.index(), index);
    for s in stale {
        assert!(!pool.contains(s));
    }
    // Through `&mut` removals too.
    let mut pool: DensePool<u8> = DensePool::with_config(tiny(2, 1 << 20));
    let a = pool.insert(1u8);
    pool.take(a);
    let b = pool.insert(2u8);
    assert_eq!((b.index(), b.generation()), (a.index(), 2));
    pool.take(b);
    let c = pool.insert(3u8);
    assert_ne!(c.index(), a.index());
}

/// `DensePool::insert`'s panic message on a full pool.
const FULL: &str = "DensePool::insert: the pool is full (every slot index is in use or retired, or 2^32 - 1 inserts since the last &mut call)";

#[test]
fn a_full_pool_gives_the_value_back_until_compaction() {
    let mut pool: DensePool<u64> = DensePool::with_config(tiny(1000, 4));
    let handles: Vec<Handle> = (0..4u64).map(|v| pool.insert(v)).collect();
    assert_eq!(pool.try_insert(4).map_err(|e| e.into_inner()), Err(4));
    // A removal frees neither the position nor the index before the next
    // `&mut` call.
    assert!(pool.remove(handles[0]));
    assert_eq!(pool.try_insert(5).map_err(|e| e.into_inner()), Err(5));
    let _quiet = quiet_panics(FULL);
    let full = catch_unwind(AssertUnwindSafe(|| pool.insert(6)));
    assert!(full.is_err(), "insert panics on a full pool");
    let full = catch_unwind(AssertUnwindSafe(|| pool.insert_with(|_| 7)));
    assert!(full.is_err(), "insert_with panics on a full pool");
    assert_eq!(pool.len(), 3);
    pool.compact();
    let h = pool.try_insert(8).expect("compaction made room");
    assert_eq!(h.index(), handles[0].index());
    assert_eq!(pool.len(), 4);
}

#[test]
fn a_pool_out_of_indices_counts_the_abandoned_position_as_a_hole() {
    // Generation 1 is the limit: a removed index is retired, never reused.
    let mut pool: DensePool<u64> = DensePool::with_config(tiny(1, 3));
    let handles: Vec<Handle> = (0..3u64).map(|v| pool.insert(v)).collect();
    assert!(pool.remove(handles[0]));
    pool.compact();
    assert_eq!((pool.len(), pool.holes()), (2, 0));
    // A position is left this round, an index is not.
    assert_eq!(pool.try_insert(9).map_err(|e| e.into_inner()), Err(9));
    assert_eq!(
        (pool.len(), pool.holes()),
        (2, 1),
        "the position taken is a hole"
    );
    let guard = pin();
    assert_eq!(pool.iter(&guard).count(), 2);
    drop(guard);
    pool.compact();
    assert_eq!((pool.len(), pool.holes()), (2, 0));
    assert_eq!(dense_values(&mut pool), [2, 1]);
}

#[test]
fn insert_with_shows_the_handle_and_a_panic_burns_it() {
    let mut pool: DensePool<(Handle, u32)> = DensePool::new();
    let h = pool.insert_with(|me| (me, 1));
    assert_eq!(pool.with(h, |v| v.0), Some(h));
    let _quiet = quiet_panics("no value");
    let shown = Cell::new(None);
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        pool.insert_with(|me| {
            shown.set(Some(me));
            panic!("no value");
        })
    }));
    assert!(panicked.is_err());
    let shown = shown.get().unwrap();
    assert!(!pool.contains(shown));
    assert_eq!((pool.len(), pool.holes()), (1, 1));
    pool.compact();
    assert_eq!((pool.len(), pool.holes()), (1, 0));
    let next = pool.insert((h, 2));
    assert_eq!(next.index(), shown.index(), "the index was freed");
    assert!(
        next.generation() > shown.generation(),
        "its generation was burnt"
    );
    assert!(!pool.contains(shown));
}

#[test]
fn typed_handles_keep_pools_apart() {
    new_handle_type! {
        struct Particle;
    }
    let pool: DensePool<u32, Particle> = DensePool::with_handle_type();
    let p: Particle = pool.insert(3);
    assert_eq!(pool.get_cloned(p), Some(3));
    assert_eq!(pool.handle_at(0), Some(p));
    let guard = pin();
    let (h, v) = pool.iter(&guard).next().unwrap();
    assert_eq!((h, *v), (p, 3));
}

#[test]
fn forged_handles_find_nothing() {
    let pool: DensePool<u64> = DensePool::with_config(tiny(1000, 1 << 20));
    let live: Vec<Handle> = (0..50u64).map(|v| pool.insert(v)).collect();
    for &h in live.iter().step_by(2) {
        pool.remove(h);
    }
    let live: HashSet<Handle> = live.iter().copied().skip(1).step_by(2).collect();
    let mut rng = Rng::new(3);
    let guard = pin();
    for round in 0..20_000u64 {
        let bits = match round % 3 {
            0 => rng.next(),
            1 => ((rng.next() % 8) << 32) | (rng.next() % 64),
            _ => {
                let base = *live.iter().nth(rng.below(live.len())).unwrap();
                let index = u64::from(base.index())
                    .wrapping_add(rng.next() % 3)
                    .wrapping_sub(1);
                let generation = u64::from(base.generation()) + rng.next() % 2;
                (generation << 32) | (index & 0xffff_ffff)
            }
        };
        let Some(h) = Handle::from_bits(bits) else {
            continue;
        };
        let expected = live.contains(&h);
        assert_eq!(pool.contains(h), expected, "{h:?}");
        assert_eq!(pool.get(h, &guard).is_some(), expected);
        assert_eq!(pool.with(h, |_| ()).is_some(), expected);
        assert_eq!(pool.position(h).is_some(), expected);
        if !expected {
            assert!(!pool.remove(h));
        }
    }
    assert_eq!(pool.len(), live.len());
}

thread_local! {
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// A handle type whose `handle()` answers differently on every call.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
struct Liar(u64);

impl PoolHandle for Liar {
    fn from_handle(handle: Handle) -> Self {
        Liar(handle.to_bits())
    }
    fn handle(self) -> Handle {
        let calls = CALLS.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        // Every other call names the next index.
        Handle::from_bits(self.0 + (calls % 2)).unwrap()
    }
}

/// One operation on a pool of liars.
type Op<'a> = dyn FnMut(&mut DensePool<u64, Liar>) + 'a;

#[test]
fn a_lying_handle_type_is_asked_once_per_operation() {
    let calls = || CALLS.with(Cell::get);
    let mut pool: DensePool<u64, Liar> = DensePool::with_handle_type();
    let handles: Vec<Liar> = (0..10u64).map(|v| pool.insert(v)).collect();
    let guard = pin();
    let mut ops: Vec<Box<Op<'_>>> = vec![
        Box::new(|p| {
            p.contains(handles[2]);
        }),
        Box::new(|p| {
            p.with(handles[3], |v| *v);
        }),
        Box::new(|p| {
            p.position(handles[4]);
        }),
        Box::new(|p| {
            p.remove(handles[5]);
        }),
        Box::new(|p| {
            p.get_mut(handles[6]);
        }),
        Box::new(|p| {
            p.take(handles[7]);
        }),
    ];
    for op in ops.iter_mut() {
        let before = calls();
        op(&mut pool);
        assert_eq!(calls() - before, 1);
    }
    let before = calls();
    let _ = pool.get(handles[8], &guard);
    assert_eq!(calls() - before, 1);
    drop(guard);
    // Whatever it named, the pool is consistent: each value once.
    let mut seen: Vec<u64> = pool.values_mut().map(|v| *v).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), pool.len());
}

#[test]
fn with_capacity_allocates_up_front() {
    let pool: DensePool<u64> = DensePool::with_capacity(5000);
    assert!(pool.capacity() >= 5000);
    let before = pool.capacity();
    for v in 0..5000 {
        pool.insert(v);
    }
    assert_eq!(pool.capacity(), before);
}

#[test]
fn zero_sized_values_are_counted_and_compacted() {
    let mut pool = DensePool::new();
    let handles: Vec<Handle> = (0..100).map(|_| pool.insert(())).collect();
    for &h in &handles[..50] {
        assert!(pool.remove(h));
    }
    pool.compact();
    assert_eq!(pool.len(), 50);
    assert_eq!(pool.as_mut_slices().map(|s| s.len()).sum::<usize>(), 50);
    assert!(handles[50..].iter().all(|&h| pool.contains(h)));
}

#[test]
fn debug_lists_the_live_pairs() {
    let pool = DensePool::new();
    let h = pool.insert(1);
    let gone = pool.insert(2);
    pool.remove(gone);
    assert_eq!(format!("{pool:?}"), format!("{{{h:?}: 1}}"));
}
