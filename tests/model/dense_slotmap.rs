//! `DensePool` against `slotmap::DenseSlotMap`: single-threaded random
//! sequences (inserts, removes through `&self` and `&mut`, lookups,
//! compaction, sorts, retain, drain, clear, the `&mut` iterations) give the
//! same observable results on both: values found, stale handles missed,
//! lengths, contents. Handles are matched by issue order (the n-th handle
//! the pool issued goes with the n-th key the map issued).
//!
//! The order of the dense array is checked against a model of its own,
//! `Order`: a `DenseSlotMap` swap-removes at each removal, while the pool
//! leaves a hole under `&self` and fills the holes at the next `&mut` call,
//! so their orders differ by design. `Order` keeps the positions, holes
//! included, and applies the documented rules: an insert appends, a
//! `&self` remove leaves a hole, compaction fills the holes lowest first
//! with the last values, `take` and `retain` swap-remove, `drain` takes from
//! the end, sorting is stable. After every step, the pool's `&self`
//! iteration (holes skipped), `position`, `handle_at` and `holes` must
//! agree with it exactly.

use std::collections::{BTreeMap, HashMap};

use handle_pool::{pin, Config, DensePool, Handle};
use proptest::prelude::*;
use slotmap::{DefaultKey, DenseSlotMap};

#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    InsertWith(u64),
    /// `&self` remove: leaves a hole.
    Remove(Pick),
    /// `&mut` take: compacts, then swap-removes.
    Take(Pick),
    Get(Pick),
    GetMut(Pick, u64),
    Compact,
    /// Sort by the value modulo this (ties keep their order).
    SortByKey(u64),
    SortBy,
    /// Keep the values not divisible by this.
    Retain(u64),
    IterMut(u64),
    /// Drain this many, then drop the drain.
    Drain(usize),
    Clear,
    Flush,
}

/// A handle issued earlier, by position among all the handles issued (live
/// or stale).
#[derive(Clone, Debug)]
struct Pick(usize);

fn pick() -> impl Strategy<Value = Pick> {
    any::<usize>().prop_map(Pick)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u64..1000).prop_map(Op::Insert),
        2 => (0u64..1000).prop_map(Op::InsertWith),
        8 => pick().prop_map(Op::Remove),
        2 => pick().prop_map(Op::Take),
        6 => pick().prop_map(Op::Get),
        2 => (pick(), 0u64..1000).prop_map(|(p, d)| Op::GetMut(p, d)),
        3 => Just(Op::Compact),
        1 => (1u64..8).prop_map(Op::SortByKey),
        1 => Just(Op::SortBy),
        1 => (2u64..5).prop_map(Op::Retain),
        1 => (0u64..1000).prop_map(Op::IterMut),
        1 => (0usize..4).prop_map(Op::Drain),
        1 => Just(Op::Clear),
        1 => Just(Op::Flush),
    ]
}

/// The dense array as documented: issue numbers by position, `None` for a
/// hole.
#[derive(Default)]
struct Order(Vec<Option<usize>>);

impl Order {
    /// Compaction: each hole, lowest first, takes the last live value.
    fn compact(&mut self) {
        let slots = &mut self.0;
        let mut low = 0;
        loop {
            while slots.last() == Some(&None) {
                slots.pop();
            }
            while low < slots.len() && slots[low].is_some() {
                low += 1;
            }
            if low >= slots.len() {
                break;
            }
            slots[low] = slots.pop().flatten();
        }
    }

    fn live(&self) -> Vec<usize> {
        self.0.iter().flatten().copied().collect()
    }

    fn position(&self, n: usize) -> Option<usize> {
        self.0.iter().position(|&slot| slot == Some(n))
    }

    /// Swap-removes position `at` (compacted).
    fn swap_remove(&mut self, at: usize) -> usize {
        self.0.swap_remove(at).expect("a live position")
    }
}

struct Pair {
    pool: DensePool<u64>,
    map: DenseSlotMap<DefaultKey, u64>,
    order: Order,
    /// Issue order: the n-th pool handle and the n-th slot map key.
    issued: Vec<(Handle, DefaultKey)>,
    by_handle: HashMap<Handle, usize>,
    by_key: HashMap<DefaultKey, usize>,
}

impl Pair {
    fn new(config: Config) -> Self {
        Pair {
            pool: DensePool::with_config(config),
            map: DenseSlotMap::new(),
            order: Order::default(),
            issued: Vec::new(),
            by_handle: HashMap::new(),
            by_key: HashMap::new(),
        }
    }

    fn record(&mut self, h: Handle, k: DefaultKey) {
        let n = self.issued.len();
        assert!(self.by_handle.insert(h, n).is_none(), "pool reissued {h:?}");
        assert!(
            self.by_key.insert(k, n).is_none(),
            "slot map reissued {k:?}"
        );
        self.issued.push((h, k));
        self.order.0.push(Some(n));
    }

    fn picked(&self, p: &Pick) -> Option<(usize, Handle, DefaultKey)> {
        (!self.issued.is_empty()).then(|| {
            let n = p.0 % self.issued.len();
            (n, self.issued[n].0, self.issued[n].1)
        })
    }

    /// A `&mut` call but `get_mut` compacts first.
    fn exclusive(&mut self) {
        self.order.compact();
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Insert(v) => {
                let h = self.pool.insert(*v);
                let k = self.map.insert(*v);
                self.record(h, k);
            }
            Op::InsertWith(v) => {
                let mut shown = None;
                let h = self.pool.insert_with(|h| {
                    shown = Some(h);
                    *v
                });
                assert_eq!(shown, Some(h));
                let k = self.map.insert(*v);
                self.record(h, k);
            }
            Op::Remove(p) => {
                if let Some((n, h, k)) = self.picked(p) {
                    let removed = self.pool.remove(h);
                    assert_eq!(removed, self.map.remove(k).is_some());
                    if removed {
                        let at = self.order.position(n).unwrap();
                        self.order.0[at] = None;
                    }
                }
            }
            Op::Take(p) => {
                self.exclusive();
                if let Some((n, h, k)) = self.picked(p) {
                    let taken = self.pool.take(h);
                    assert_eq!(taken, self.map.remove(k));
                    if taken.is_some() {
                        let at = self.order.position(n).unwrap();
                        assert_eq!(self.order.swap_remove(at), n);
                    }
                }
            }
            Op::Get(p) => {
                if let Some((_, h, k)) = self.picked(p) {
                    let guard = pin();
                    assert_eq!(self.pool.get(h, &guard), self.map.get(k));
                    assert_eq!(self.pool.contains(h), self.map.contains_key(k));
                    assert_eq!(self.pool.get_cloned(h).as_ref(), self.map.get(k));
                }
            }
            Op::GetMut(p, d) => {
                if let Some((_, h, k)) = self.picked(p) {
                    match (self.pool.get_mut(h), self.map.get_mut(k)) {
                        (Some(a), Some(b)) => {
                            *a ^= d;
                            *b ^= d;
                        }
                        (None, None) => {}
                        (a, b) => panic!("get_mut: {a:?} against {b:?}"),
                    }
                }
            }
            Op::Compact => {
                self.pool.compact();
                self.exclusive();
            }
            Op::SortByKey(m) => {
                self.pool.sort_by_key(|v| v % m);
                self.exclusive();
                let values: HashMap<usize, u64> = self.contents_of_map().into_iter().collect();
                self.order.0.sort_by_key(|slot| values[&slot.unwrap()] % m);
            }
            Op::SortBy => {
                self.pool.sort_by(|a, b| b.cmp(a));
                self.exclusive();
                let values: HashMap<usize, u64> = self.contents_of_map().into_iter().collect();
                self.order
                    .0
                    .sort_by(|a, b| values[&b.unwrap()].cmp(&values[&a.unwrap()]));
            }
            Op::Retain(m) => {
                self.pool.retain(|_, v| *v % m != 0);
                self.map.retain(|_, v| *v % m != 0);
                self.exclusive();
                // What the map kept, by issue number.
                let values = self.contents_of_map();
                let mut at = 0;
                while at < self.order.0.len() {
                    let n = self.order.0[at].unwrap();
                    if values.contains_key(&n) {
                        at += 1;
                    } else {
                        self.order.swap_remove(at);
                    }
                }
            }
            Op::IterMut(d) => {
                for (h, v) in self.pool.iter_mut() {
                    let k = self.issued[self.by_handle[&h]].1;
                    assert_eq!(self.map.get(k), Some(&*v));
                    *v ^= d;
                }
                for (_, v) in self.map.iter_mut() {
                    *v ^= d;
                }
                self.exclusive();
            }
            Op::Drain(n) => {
                self.exclusive();
                let mut drain = self.pool.drain();
                for _ in 0..*n {
                    match drain.next() {
                        Some((h, v)) => {
                            let issue = self.by_handle[&h];
                            assert_eq!(
                                self.order.0.pop(),
                                Some(Some(issue)),
                                "drained from the end"
                            );
                            assert_eq!(self.map.remove(self.issued[issue].1), Some(v));
                        }
                        None => assert!(self.order.0.is_empty()),
                    }
                }
                drop(drain);
                self.map.clear();
                self.order.0.clear();
            }
            Op::Clear => {
                self.pool.clear();
                self.map.clear();
                self.order.0.clear();
            }
            Op::Flush => self.pool.flush(),
        }
        self.check();
    }

    /// The map's contents by issue number.
    fn contents_of_map(&self) -> BTreeMap<usize, u64> {
        self.map
            .iter()
            .map(|(k, v)| (self.by_key[&k], *v))
            .collect()
    }

    fn check(&self) {
        let guard = pin();
        // Order and holes, exactly as documented.
        let seen: Vec<usize> = self
            .pool
            .iter(&guard)
            .map(|(h, _)| self.by_handle[&h])
            .collect();
        assert_eq!(seen, self.order.live(), "iteration order");
        let holes = self.order.0.iter().filter(|slot| slot.is_none()).count();
        assert_eq!(self.pool.holes(), holes);
        for (at, slot) in self.order.0.iter().enumerate() {
            let expected = slot.map(|n| self.issued[n].0);
            assert_eq!(self.pool.handle_at(at), expected, "handle_at({at})");
            if let Some(n) = slot {
                assert_eq!(self.pool.position(self.issued[*n].0), Some(at));
            }
        }
        // Contents, against the slot map.
        assert_eq!(self.pool.len(), self.map.len());
        let pool: BTreeMap<usize, u64> = self
            .pool
            .iter(&guard)
            .map(|(h, v)| (self.by_handle[&h], *v))
            .collect();
        assert_eq!(pool, self.contents_of_map());
        for &(h, k) in &self.issued {
            assert_eq!(self.pool.get(h, &guard), self.map.get(k));
        }
    }
}

fn run(config: Config, ops: &[Op]) {
    let mut pair = Pair::new(config);
    for op in ops {
        pair.apply(op);
    }
}

/// Segments and buckets of 1, 2, 4… positions, generations retired at 4:
/// growth, reuse and retirement within a few operations.
fn tiny() -> Config {
    Config {
        stripes: 1,
        ..Config::tiny(4, 2)
    }
}

/// As [`tiny`], with a values' region of six positions (segments 1 and 2):
/// lookups and loops cross from the first segment into the region, and
/// out of it into segments of their own.
fn tiny_with_region() -> Config {
    Config {
        flat_slots: 6,
        ..tiny()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn dense_pool_matches_dense_slot_map(ops in proptest::collection::vec(op(), 1..120)) {
        run(Config::default(), &ops);
    }

    #[test]
    fn dense_pool_matches_dense_slot_map_in_tiny_segments(ops in proptest::collection::vec(op(), 1..120)) {
        run(tiny(), &ops);
    }

    #[test]
    fn dense_pool_matches_dense_slot_map_across_the_values_region(ops in proptest::collection::vec(op(), 1..120)) {
        run(tiny_with_region(), &ops);
    }
}

#[test]
#[ignore = "long: run with --ignored"]
fn dense_pool_matches_dense_slot_map_long() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(4096));
    runner
        .run(&proptest::collection::vec(op(), 1..400), |ops| {
            run(tiny(), &ops);
            Ok(())
        })
        .unwrap();
}
