//! Differential test against `slotmap::SlotMap`: single-threaded random
//! operation sequences give the same observable results on both (values
//! found, stale handles missed, lengths, final contents). Handle bits differ,
//! so handles are matched by issue order: the n-th handle the pool issued
//! goes with the n-th key the slot map issued.

use std::collections::{BTreeMap, HashMap};

use handle_pool::{pin, Handle, HandlePool};
use proptest::prelude::*;
use slotmap::{DefaultKey, SlotMap};

#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    InsertWithKey(u64),
    /// Remove through `&self` (the slot map's `remove`).
    Remove(Pick),
    /// Remove through `&mut self`, getting the value back.
    Take(Pick),
    Get(Pick),
    GetMut(Pick, u64),
    Retain(u64),
    IterMut(u64),
    Iter,
    Clear,
    Drain,
    Reclaim,
    /// Both replaced by their clones, which must go on alike.
    Clone,
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
        8 => any::<u64>().prop_map(Op::Insert),
        2 => any::<u64>().prop_map(Op::InsertWithKey),
        5 => pick().prop_map(Op::Remove),
        2 => pick().prop_map(Op::Take),
        6 => pick().prop_map(Op::Get),
        2 => (pick(), any::<u64>()).prop_map(|(p, d)| Op::GetMut(p, d)),
        1 => (2u64..6).prop_map(Op::Retain),
        1 => any::<u64>().prop_map(Op::IterMut),
        1 => Just(Op::Iter),
        1 => Just(Op::Clear),
        1 => Just(Op::Drain),
        1 => Just(Op::Reclaim),
        1 => Just(Op::Clone),
    ]
}

struct Pair {
    pool: HandlePool<u64>,
    map: SlotMap<DefaultKey, u64>,
    /// Issue order: the n-th pool handle and the n-th slot map key.
    issued: Vec<(Handle, DefaultKey)>,
    by_handle: HashMap<Handle, usize>,
    by_key: HashMap<DefaultKey, usize>,
}

impl Pair {
    fn new() -> Self {
        Pair {
            pool: HandlePool::new(),
            map: SlotMap::new(),
            issued: Vec::new(),
            by_handle: HashMap::new(),
            by_key: HashMap::new(),
        }
    }

    fn record(&mut self, h: Handle, k: DefaultKey) {
        let n = self.issued.len();
        assert!(self.by_handle.insert(h, n).is_none(), "pool reissued {h:?}");
        assert!(self.by_key.insert(k, n).is_none(), "slotmap reissued {k:?}");
        self.issued.push((h, k));
    }

    fn picked(&self, p: &Pick) -> Option<(Handle, DefaultKey)> {
        (!self.issued.is_empty()).then(|| self.issued[p.0 % self.issued.len()])
    }

    /// Contents keyed by issue order.
    fn contents(&self) -> (BTreeMap<usize, u64>, BTreeMap<usize, u64>) {
        let guard = pin();
        let mut pool = BTreeMap::new();
        for (h, v) in self.pool.iter(&guard) {
            let n = self.by_handle[&h];
            assert!(pool.insert(n, *v).is_none(), "iter yielded {h:?} twice");
        }
        let map = self
            .map
            .iter()
            .map(|(k, v)| (self.by_key[&k], *v))
            .collect();
        (pool, map)
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Insert(v) => {
                let h = self.pool.insert(*v);
                let k = self.map.insert(*v);
                self.record(h, k);
            }
            Op::InsertWithKey(v) => {
                let mut shown = None;
                let h = self.pool.insert_with(|h| {
                    shown = Some(h);
                    *v ^ h.to_bits()
                });
                assert_eq!(shown, Some(h));
                // The value depends on the handle; compare the part that
                // does not.
                let k = self.map.insert_with_key(|_| *v ^ h.to_bits());
                self.record(h, k);
            }
            Op::Remove(p) => {
                let Some((h, k)) = self.picked(p) else { return };
                let before = self.pool.get_cloned(h);
                let removed = self.pool.remove(h);
                let expected = self.map.remove(k);
                assert_eq!(removed, expected.is_some(), "remove {h:?}");
                assert_eq!(before, expected, "value before remove {h:?}");
                assert!(!self.pool.remove(h), "second remove of {h:?}");
            }
            Op::Take(p) => {
                let Some((h, k)) = self.picked(p) else { return };
                assert_eq!(self.pool.take(h), self.map.remove(k), "take {h:?}");
            }
            Op::Get(p) => {
                let Some((h, k)) = self.picked(p) else { return };
                let expected = self.map.get(k).copied();
                let guard = pin();
                assert_eq!(self.pool.get(h, &guard).copied(), expected, "get {h:?}");
                drop(guard);
                assert_eq!(self.pool.with(h, |v| *v), expected, "with {h:?}");
                assert_eq!(self.pool.contains(h), self.map.contains_key(k));
            }
            Op::GetMut(p, d) => {
                let Some((h, k)) = self.picked(p) else { return };
                let ours = self.pool.get_mut(h).map(|v| {
                    *v = v.wrapping_add(*d);
                    *v
                });
                let theirs = self.map.get_mut(k).map(|v| {
                    *v = v.wrapping_add(*d);
                    *v
                });
                assert_eq!(ours, theirs, "get_mut {h:?}");
            }
            Op::Retain(m) => {
                let mut ours = Vec::new();
                self.pool.retain(|h, v| {
                    ours.push(h);
                    *v % m != 0
                });
                let mut theirs = Vec::new();
                self.map.retain(|k, v| {
                    theirs.push(k);
                    *v % m != 0
                });
                let mut ours: Vec<usize> = ours.iter().map(|h| self.by_handle[h]).collect();
                let mut theirs: Vec<usize> = theirs.iter().map(|k| self.by_key[k]).collect();
                ours.sort_unstable();
                theirs.sort_unstable();
                assert_eq!(ours, theirs, "retain visits the same values");
            }
            Op::IterMut(x) => {
                assert_eq!(self.pool.iter_mut().len(), self.map.iter_mut().len());
                for (_, v) in self.pool.iter_mut() {
                    *v ^= x;
                }
                for (_, v) in self.map.iter_mut() {
                    *v ^= x;
                }
            }
            Op::Iter => {
                let (ours, theirs) = self.contents();
                assert_eq!(ours, theirs);
            }
            Op::Clear => {
                self.pool.clear();
                self.map.clear();
            }
            Op::Drain => {
                let mut ours: Vec<(usize, u64)> = self
                    .pool
                    .drain()
                    .map(|(h, v)| (self.by_handle[&h], v))
                    .collect();
                let mut theirs: Vec<(usize, u64)> = self
                    .map
                    .drain()
                    .map(|(k, v)| (self.by_key[&k], v))
                    .collect();
                ours.sort_unstable();
                theirs.sort_unstable();
                assert_eq!(ours, theirs);
            }
            Op::Reclaim => self.pool.reclaim(),
            Op::Clone => {
                self.pool = self.pool.clone();
                self.map = self.map.clone();
                let (ours, theirs) = self.contents();
                assert_eq!(ours, theirs, "contents of the clones");
            }
        }
        assert_eq!(self.pool.len(), self.map.len(), "len after {op:?}");
        assert_eq!(self.pool.is_empty(), self.map.is_empty());
    }

    fn finish(&self) {
        let (ours, theirs) = self.contents();
        assert_eq!(ours, theirs, "final contents");
        for &(h, k) in &self.issued {
            assert_eq!(self.pool.get_cloned(h), self.map.get(k).copied(), "{h:?}");
        }
    }
}

fn run(ops: &[Op]) {
    let mut pair = Pair::new();
    for op in ops {
        pair.apply(op);
    }
    pair.finish();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn same_results_as_slotmap(ops in prop::collection::vec(op(), 1..300)) {
        run(&ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    #[ignore = "heavier variant: cargo test --test model differential_slotmap:: -- --ignored"]
    fn same_results_as_slotmap_heavy(ops in prop::collection::vec(op(), 1..2000)) {
        run(&ops);
    }
}

#[test]
fn churn_through_one_slot_matches_slotmap() {
    // Many reuses of the same slots (with reclaim so the pool reuses them):
    // stale handles must keep missing on both sides.
    let mut ops = Vec::new();
    for i in 0..300 {
        ops.push(Op::Insert(i));
        ops.push(Op::Remove(Pick(i as usize))); // the one just issued
        ops.push(Op::Reclaim);
        ops.push(Op::Get(Pick(i as usize / 2)));
    }
    let mut pair = Pair::new();
    for op in &ops {
        pair.apply(op);
    }
    pair.finish();
    assert!(pair.pool.is_empty());
    // The pool reused slots rather than growing.
    let distinct: std::collections::HashSet<u32> =
        pair.issued.iter().map(|(h, _)| h.index()).collect();
    assert!(distinct.len() < 50, "{} distinct slots", distinct.len());
}
