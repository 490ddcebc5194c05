//! Model test: random operation sequences run on a `HandlePool` and on the
//! single-threaded oracle `ReferenceTable` side by side, comparing every
//! result.
//!
//! The two hand out different handle bits (they reuse slots in different
//! orders), so handles are compared by what they refer to: the test keeps a
//! bijection between the handles each side issued for the same insert. A
//! handle from `from_bits` is looked up in that map: if it equals a handle
//! one side issued it must behave as that handle does on both sides; if it
//! equals none, both sides must reject it.
//!
//! Capacity is where the two may legitimately differ: the pool reuses a
//! removed slot only after reclamation, and since the two reuse slots in
//! different orders, their slots retire at different times. So the test also
//! keeps a shadow of the pool's slots, built only from the handles it issued
//! and the documented rules (a handle's generation counts the slot's fills; a
//! slot is retired once an occupant with the generation limit leaves; removed
//! slots come back after reclamation, exclusive removals at once), and checks
//! each insert against it: the pool must succeed when a free or never-used
//! slot exists, must fail when every slot is live or retired, and may do
//! either only while removals are still pending. When the pool and the table
//! disagree about room, the extra value is taken out again on its side so the
//! two keep the same contents.

use std::collections::{BTreeSet, HashMap, HashSet};

use handle_pool::{pin, Handle, HandlePool, ReferenceTable, MAX_GENERATION, MAX_INDEX};
use proptest::prelude::*;

use crate::common::{self, Op, Target};

/// Mostly one-at-a-time operations, some batches.
fn op() -> impl Strategy<Value = Op> {
    common::op(2, 3)
}

/// What the test knows about one pool slot, from the handles it issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Live,
    /// Vacant and reusable now.
    Free,
    /// Removed through `&self` and perhaps not reclaimed yet: may or may
    /// not be reusable.
    Pending,
    /// Retired for good.
    Dead,
}

/// The pool's slots as far as the public rules determine them.
struct Shadow {
    /// Per slot index: the generation of its last occupant, and its state.
    slots: HashMap<u32, (u32, SlotState)>,
    max_generation: u32,
    max_slots: u64,
    /// Whether the model counts on `reclaim()` making every pending slot
    /// reusable at once: only when a batch can never fill (`batch >
    /// max_slots`).
    reclaim_is_exact: bool,
}

impl Shadow {
    fn has(&self, state: SlotState) -> bool {
        self.slots.values().any(|&(_, s)| s == state)
    }

    fn must_have_room(&self) -> bool {
        (self.slots.len() as u64) < self.max_slots || self.has(SlotState::Free)
    }

    /// How many inserts must succeed: never-used slots and free ones.
    fn sure_room(&self) -> usize {
        let fresh = self.max_slots - self.slots.len() as u64;
        let free = self.slots.values().filter(|&&(_, s)| s == SlotState::Free);
        usize::try_from(fresh).unwrap_or(usize::MAX) + free.count()
    }

    fn may_have_room(&self) -> bool {
        self.must_have_room() || self.has(SlotState::Pending)
    }

    fn inserted(&mut self, h: Handle) {
        assert!(
            u64::from(h.index()) < self.max_slots,
            "{h:?} beyond max_slots"
        );
        let (last, state) = self
            .slots
            .get(&h.index())
            .copied()
            .unwrap_or((0, SlotState::Free));
        assert!(
            matches!(state, SlotState::Free | SlotState::Pending),
            "{h:?} handed out a slot that is {state:?}"
        );
        assert_eq!(
            h.generation(),
            last + 1,
            "{h:?}: slot's last generation was {last}"
        );
        assert!(h.generation() <= self.max_generation);
        self.slots
            .insert(h.index(), (h.generation(), SlotState::Live));
    }

    fn removed(&mut self, h: Handle, exclusive: bool) {
        let slot = self.slots.get_mut(&h.index()).expect("slot known");
        assert_eq!(*slot, (h.generation(), SlotState::Live));
        slot.1 = if h.generation() >= self.max_generation {
            SlotState::Dead
        } else if exclusive {
            SlotState::Free
        } else {
            SlotState::Pending
        };
    }

    fn reclaimed(&mut self) {
        if self.reclaim_is_exact {
            for slot in self.slots.values_mut() {
                if slot.1 == SlotState::Pending {
                    slot.1 = SlotState::Free;
                }
            }
        }
    }
}

struct Model {
    pool: HandlePool<u64>,
    table: ReferenceTable<u64>,
    /// Pool handle -> table handle, and back, for every pair issued by the
    /// same insert (live or stale).
    p2r: HashMap<Handle, Handle>,
    r2p: HashMap<Handle, Handle>,
    /// Every handle either side ever issued, to check none is issued twice.
    pool_issued: HashSet<Handle>,
    table_issued: HashSet<Handle>,
    /// The same, in issue order (to pick from).
    pool_order: Vec<Handle>,
    table_order: Vec<Handle>,
    live: Vec<Handle>,
    stale: Vec<Handle>,
    shadow: Shadow,
    next_value: u64,
    /// Inserts where the two disagreed about room (for the record).
    disagreements: usize,
}

impl Model {
    fn new(
        pool: HandlePool<u64>,
        table: ReferenceTable<u64>,
        max_generation: u32,
        max_slots: u64,
        reclaim_is_exact: bool,
    ) -> Self {
        Model {
            pool,
            table,
            p2r: HashMap::new(),
            r2p: HashMap::new(),
            pool_issued: HashSet::new(),
            table_issued: HashSet::new(),
            pool_order: Vec::new(),
            table_order: Vec::new(),
            live: Vec::new(),
            stale: Vec::new(),
            shadow: Shadow {
                slots: HashMap::new(),
                max_generation,
                max_slots,
                reclaim_is_exact,
            },
            next_value: 0,
            disagreements: 0,
        }
    }

    fn value(&mut self) -> u64 {
        self.next_value += 1;
        self.next_value
    }

    /// Resolves a target to (pool handle, table handle); either may be
    /// missing, meaning that side must find nothing.
    fn resolve(&self, target: &Target) -> Option<(Option<Handle>, Option<Handle>)> {
        match target {
            Target::Live(i) => {
                let p = common::pick(&self.live, *i)?;
                Some((Some(p), Some(self.p2r[&p])))
            }
            Target::Stale(i) => {
                let p = common::pick(&self.stale, *i)?;
                Some((Some(p), self.p2r.get(&p).copied()))
            }
            Target::Forged(f) if f.on_table => {
                let live: Vec<Handle> = self.live.iter().map(|p| self.p2r[p]).collect();
                let r = f.handle(&live, &self.table_order)?;
                Some((self.r2p.get(&r).copied(), Some(r)))
            }
            Target::Forged(f) => {
                let p = f.handle(&self.live, &self.pool_order)?;
                Some((Some(p), self.p2r.get(&p).copied()))
            }
        }
    }

    /// The pool's answer for a handle, through every lookup method, which
    /// must agree with each other.
    fn pool_lookup(&self, h: Option<Handle>) -> Option<u64> {
        let h = h?;
        let guard = pin();
        let got = self.pool.get(h, &guard).copied();
        drop(guard);
        assert_eq!(self.pool.with(h, |v| *v), got, "with vs get for {h:?}");
        assert_eq!(self.pool.get_cloned(h), got, "get_cloned vs get for {h:?}");
        assert_eq!(self.pool.contains(h), got.is_some(), "contains for {h:?}");
        got
    }

    fn table_lookup(&self, h: Option<Handle>) -> Option<u64> {
        let got = self.table.get(h?).copied();
        assert_eq!(self.table.contains(h.unwrap()), got.is_some());
        got
    }

    fn forget_live(&mut self, p: Handle, exclusive: bool) {
        let at = self.live.iter().position(|&h| h == p).expect("was live");
        self.live.swap_remove(at);
        self.stale.push(p);
        self.shadow.removed(p, exclusive);
    }

    fn record_pool_handle(&mut self, p: Handle) {
        assert!(self.pool_issued.insert(p), "pool issued {p:?} twice");
        self.pool_order.push(p);
        self.shadow.inserted(p);
    }

    fn insert(&mut self, op: &Op) {
        let v = self.value();
        let must = self.shadow.must_have_room();
        let may = self.shadow.may_have_room();
        let pool_result: Result<Handle, u64> = match op {
            Op::Insert if must => Ok(self.pool.insert(v)),
            Op::InsertWith if must => {
                let mut shown = None;
                let h = self.pool.insert_with(|h| {
                    shown = Some(h);
                    v
                });
                assert_eq!(shown, Some(h), "insert_with showed another handle");
                Ok(h)
            }
            _ => self.pool.try_insert(v).map_err(|e| e.into_inner()),
        };
        match pool_result {
            Ok(p) => {
                assert!(may, "pool inserted {p:?} with no slot to spare");
                self.record_pool_handle(p);
            }
            Err(back) => {
                assert_eq!(back, v, "CapacityError gives the value back");
                assert!(!must, "pool full although a reusable slot exists");
            }
        }
        self.insert_on_table(pool_result, v);
    }

    /// Inserts `v` on the table too, and pairs the two handles; takes the
    /// value back out on one side if only the other had room.
    fn insert_on_table(&mut self, pool_result: Result<Handle, u64>, v: u64) {
        let table_result = self.table.insert(v);
        if let Ok(r) = table_result {
            assert!(self.table_issued.insert(r), "table issued {r:?} twice");
            self.table_order.push(r);
        }
        match (pool_result, table_result) {
            (Ok(p), Ok(r)) => {
                self.p2r.insert(p, r);
                self.r2p.insert(r, p);
                self.live.push(p);
            }
            (Err(_), Err(_)) => {}
            (Ok(p), Err(_)) => {
                // The table is out of room (slots retired in another order):
                // take the value back out of the pool.
                self.disagreements += 1;
                assert!(
                    self.table.len() < self.shadow.max_slots as usize,
                    "the pool holds more values than it has slots"
                );
                assert_eq!(self.pool.take(p), Some(v));
                self.stale.push(p);
                self.shadow.removed(p, true);
            }
            (Err(_), Ok(r)) => {
                // The pool is waiting for reclamation (or retired slots in
                // another order): take the value back out of the table.
                self.disagreements += 1;
                assert_eq!(self.table.remove(r), Some(v));
            }
        }
    }

    /// `insert_many` of `n` values when the shadow proves they fit (it
    /// panics when the pool is full), else `n` single `try_insert`s.
    fn insert_many(&mut self, n: usize) {
        if self.shadow.sure_room() < n {
            for _ in 0..n {
                self.insert(&Op::TryInsert);
            }
            return;
        }
        let values: Vec<u64> = (0..n).map(|_| self.value()).collect();
        let handles = self.pool.insert_many(values.iter().copied());
        assert_eq!(handles.len(), n, "insert_many returned another count");
        for (p, v) in handles.into_iter().zip(values) {
            self.record_pool_handle(p);
            assert_eq!(self.pool_lookup(Some(p)), Some(v), "insert_many's {p:?}");
            self.insert_on_table(Ok(p), v);
        }
    }

    /// `remove_many` on the pool against one `remove` per handle on the
    /// table.
    fn remove_many(&mut self, targets: &[Target]) {
        let pairs: Vec<(Option<Handle>, Option<Handle>)> =
            targets.iter().filter_map(|t| self.resolve(t)).collect();
        let pool_handles: Vec<Handle> = pairs.iter().filter_map(|&(p, _)| p).collect();
        let live: BTreeSet<Handle> = pool_handles
            .iter()
            .copied()
            .filter(|&p| self.pool.contains(p))
            .collect();
        let removed = self.pool.remove_many(&pool_handles);
        let table_removed = pairs
            .iter()
            .filter(|&&(_, r)| r.is_some_and(|r| self.table.remove(r).is_some()))
            .count();
        assert_eq!(removed, live.len(), "remove_many of {pool_handles:?}");
        assert_eq!(removed, table_removed, "remove_many of {targets:?}");
        assert_eq!(self.pool.remove_many(&pool_handles), 0, "removed twice");
        for p in live {
            assert_eq!(self.pool_lookup(Some(p)), None);
            self.forget_live(p, false);
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Insert | Op::TryInsert | Op::InsertWith => self.insert(op),
            Op::InsertMany(n) => self.insert_many(*n),
            Op::RemoveMany(targets) => self.remove_many(targets),
            Op::Lookup(t) => {
                if let Some((p, r)) = self.resolve(t) {
                    assert_eq!(self.pool_lookup(p), self.table_lookup(r), "{t:?}");
                }
            }
            Op::Remove(t) => {
                let Some((p, r)) = self.resolve(t) else {
                    return;
                };
                let before = self.pool_lookup(p);
                let pool_removed = p.is_some_and(|p| self.pool.remove(p));
                let table_removed = r.and_then(|r| self.table.remove(r));
                assert_eq!(pool_removed, before.is_some(), "{t:?}");
                assert_eq!(before, table_removed, "{t:?}");
                if let (true, Some(p)) = (pool_removed, p) {
                    assert!(!self.pool.remove(p), "double remove succeeded");
                    assert_eq!(self.pool_lookup(Some(p)), None);
                    self.forget_live(p, false);
                }
            }
            Op::Take(t) => {
                let Some((p, r)) = self.resolve(t) else {
                    return;
                };
                let pool_taken = p.and_then(|p| self.pool.take(p));
                let table_taken = r.and_then(|r| self.table.remove(r));
                assert_eq!(pool_taken, table_taken, "{t:?}");
                if let (Some(_), Some(p)) = (pool_taken, p) {
                    assert_eq!(self.pool.take(p), None);
                    self.forget_live(p, true);
                }
            }
            Op::GetMut(t, delta) => {
                let Some((p, r)) = self.resolve(t) else {
                    return;
                };
                let pool_new = p.and_then(|p| {
                    self.pool.get_mut(p).map(|v| {
                        *v += delta;
                        *v
                    })
                });
                let table_new = r.and_then(|r| {
                    self.table.get_mut(r).map(|v| {
                        *v += delta;
                        *v
                    })
                });
                assert_eq!(pool_new, table_new, "{t:?}");
                assert_eq!(self.pool_lookup(p), self.table_lookup(r));
            }
            Op::IsEmpty => {
                assert_eq!(self.pool.is_empty(), self.table.is_empty());
            }
            Op::Retain(m) => {
                let m = *m;
                let mut visited = BTreeSet::new();
                let (pool, table, p2r) = (&mut self.pool, &self.table, &self.p2r);
                pool.retain(|h, v| {
                    assert!(visited.insert(h), "retain visited {h:?} twice");
                    let r = p2r.get(&h).expect("retain shows an issued handle");
                    assert_eq!(table.get(*r), Some(&*v), "retain's value for {h:?}");
                    *v % m != 0
                });
                self.table.retain(|_, v| *v % m != 0);
                let live: BTreeSet<Handle> = self.live.iter().copied().collect();
                assert_eq!(visited, live, "retain visits exactly the live values");
                for p in live {
                    if !self.pool.contains(p) {
                        self.forget_live(p, true);
                    }
                }
            }
            Op::Clear => {
                self.pool.clear();
                self.table.clear();
                for p in self.live.clone() {
                    self.forget_live(p, true);
                }
                self.shadow.reclaimed();
            }
            Op::Reclaim => {
                self.pool.reclaim();
                self.shadow.reclaimed();
            }
            Op::Iter => self.compare_contents(),
            Op::IterMut => {
                let mut seen = BTreeSet::new();
                for (h, v) in self.pool.iter_mut() {
                    assert!(seen.insert(h));
                    *v = v.wrapping_mul(3) + 1;
                }
                let table_handles: Vec<Handle> = self.table.iter().map(|(h, _)| h).collect();
                for r in table_handles {
                    let v = self.table.get_mut(r).unwrap();
                    *v = v.wrapping_mul(3) + 1;
                }
                let live: BTreeSet<Handle> = self.live.iter().copied().collect();
                assert_eq!(seen, live, "iter_mut yields exactly the live values");
            }
            Op::Drain(k) => {
                let drained: Vec<(Handle, u64)> = self.pool.drain().take(*k).collect();
                assert_eq!(drained.len(), (*k).min(self.live.len()));
                for (p, v) in &drained {
                    let r = self.p2r[p];
                    assert_eq!(self.table.get(r), Some(v), "drained {p:?}");
                }
                assert!(self.pool.is_empty(), "a dropped drain removes the rest");
                self.table.clear();
                for p in self.live.clone() {
                    self.forget_live(p, true);
                }
            }
        }
    }

    /// The pool's contents, through `iter` and mapped to table handles,
    /// equal the table's.
    fn compare_contents(&self) {
        let guard = pin();
        let mut pool_items = BTreeSet::new();
        for (p, v) in self.pool.iter(&guard) {
            let r = *self.p2r.get(&p).expect("iter yields an issued handle");
            assert!(pool_items.insert((r, *v)), "iter yielded {p:?} twice");
        }
        let table_items: BTreeSet<(Handle, u64)> =
            self.table.iter().map(|(h, v)| (h, *v)).collect();
        assert_eq!(pool_items, table_items);
    }

    /// Invariants checked after every operation.
    fn check(&self) {
        assert_eq!(self.pool.len(), self.table.len(), "len");
        assert_eq!(self.pool.len(), self.live.len(), "len vs live handles");
        for &p in &self.live {
            assert!(self.pool.contains(p), "live {p:?} lost");
        }
        for &p in &self.stale {
            assert!(!self.pool.contains(p), "stale {p:?} resolves");
        }
    }

    fn finish(self) -> usize {
        for &p in &self.live {
            assert_eq!(
                self.pool_lookup(Some(p)),
                self.table_lookup(Some(self.p2r[&p]))
            );
        }
        for &p in &self.stale {
            assert_eq!(self.pool_lookup(Some(p)), None);
            if let Some(&r) = self.p2r.get(&p) {
                assert_eq!(self.table_lookup(Some(r)), None);
            }
        }
        self.compare_contents();
        assert!(self.pool.capacity() >= self.shadow.slots.len());
        self.disagreements
    }
}

fn run(mut model: Model, ops: &[Op]) -> usize {
    for op in ops {
        model.apply(op);
        model.check();
    }
    model.finish()
}

fn default_model() -> Model {
    Model::new(
        HandlePool::new(),
        ReferenceTable::new(),
        MAX_GENERATION,
        u64::from(MAX_INDEX) + 1,
        false,
    )
}

/// The small configuration: 8 slots, generations 1..=3, batches of 2.
fn tiny_model(batch: u32) -> Model {
    Model::new(
        HandlePool::with_config(common::striped(3, 8, batch)),
        ReferenceTable::with_limits(3, 8),
        3,
        8,
        batch > 8,
    )
}

/// One slot use each: every removal retires its slot.
fn single_use_model() -> Model {
    Model::new(
        HandlePool::with_config(common::predictable(1, 6, 1)),
        ReferenceTable::with_limits(1, 6),
        1,
        6,
        false,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn default_pool_matches_the_reference(ops in prop::collection::vec(op(), 1..200)) {
        run(default_model(), &ops);
    }

    #[test]
    fn tiny_pool_with_sealed_batches_matches_the_reference(
        ops in prop::collection::vec(op(), 1..200)
    ) {
        run(tiny_model(2), &ops);
    }

    #[test]
    fn tiny_pool_with_exact_reclaim_matches_the_reference(
        ops in prop::collection::vec(op(), 1..200)
    ) {
        run(tiny_model(64), &ops);
    }

    #[test]
    fn single_use_slots_match_the_reference(ops in prop::collection::vec(op(), 1..100)) {
        run(single_use_model(), &ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    #[ignore = "heavier variant: cargo test --test model model:: -- --ignored"]
    fn heavy_model_all_configurations(ops in prop::collection::vec(op(), 1..1000)) {
        run(default_model(), &ops);
        run(tiny_model(2), &ops);
        run(tiny_model(64), &ops);
        run(single_use_model(), &ops);
    }
}

/// A fixed sequence that exercises generation retirement and the capacity
/// limit on the tiny pool, so the comparison provably reaches them.
#[test]
fn tiny_pool_reaches_retirement_and_the_capacity_limit() {
    let mut ops = Vec::new();
    for round in 0..6 {
        ops.extend((0..9).map(|_| Op::Insert));
        for i in 0..8 {
            let t = Target::Live(i * 7 + round);
            ops.push(if i % 2 == 0 {
                Op::Remove(t)
            } else {
                Op::Take(t)
            });
        }
        ops.push(Op::Reclaim);
    }
    let mut model = tiny_model(64);
    for op in &ops {
        model.apply(op);
        model.check();
    }
    assert!(
        model.shadow.has(SlotState::Dead),
        "no slot reached the generation limit"
    );
    let full = model.shadow.slots.len();
    assert_eq!(full, 8, "every slot was used");
    model.finish();
}
