//! Differential test of `SecondaryMap` against `slotmap::SecondaryMap`:
//! random operation sequences, single-threaded, give the same results on
//! both (inserts stored or refused, values found, stale keys missed,
//! removals, lengths, iteration in index order, final contents).
//!
//! The primary is a `slotmap::SlotMap`, and each secondary map is keyed
//! through it: slotmap's `SecondaryMap` by its keys, ours by the handle of
//! the same slot index whose generation is the key's version in ours
//! (slotmap's versions of live keys are the odd numbers 1, 3, 5…, so
//! generation `(version + 1) / 2`: the same order, so the same rules).
//! Keys are picked among every key the primary issued, live or removed, and
//! forged ones (any small index, any version), so stale keys, slots reused
//! by the primary and keys of slots the primary never had all come up.

use std::collections::BTreeMap;

use handle_pool::{pin, Handle, SecondaryMap as Ours};
use proptest::prelude::*;
use slotmap::{DefaultKey, Key, KeyData, SecondaryMap as Theirs, SlotMap};

/// Our handle for a slotmap key.
fn handle_of(key: DefaultKey) -> Handle {
    let bits = key.data().as_ffi();
    let (index, version) = (bits as u32, bits >> 32);
    Handle::from_bits((version.div_ceil(2) << 32) | u64::from(index)).expect("a small version")
}

/// The slotmap key for our handle.
fn key_of(handle: Handle) -> DefaultKey {
    let version = u64::from(handle.generation()) * 2 - 1;
    KeyData::from_ffi((version << 32) | u64::from(handle.index())).into()
}

#[derive(Clone, Debug)]
enum Op {
    /// The primary makes an entity.
    Spawn,
    /// The primary removes one (its slot is reused by a later `Spawn`).
    Despawn(usize),
    Insert(Pick),
    Remove(Pick),
    Take(Pick),
    Get(Pick),
    GetMut(Pick, u64),
    Retain(u64),
    IterMut(u64),
    Iter,
    Clear,
    Drain,
    Flush,
    /// Both replaced by their clones, which must go on alike.
    Clone,
}

/// A key: one the primary issued (live or not), by position, or a forged
/// one.
#[derive(Clone, Debug)]
enum Pick {
    Issued(usize),
    Forged { index: u32, version: u32 },
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        6 => any::<usize>().prop_map(Pick::Issued),
        1 => (1u32..40, 0u32..12).prop_map(|(index, version)| Pick::Forged { index, version }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Spawn),
        3 => any::<usize>().prop_map(Op::Despawn),
        8 => pick().prop_map(Op::Insert),
        3 => pick().prop_map(Op::Remove),
        2 => pick().prop_map(Op::Take),
        6 => pick().prop_map(Op::Get),
        2 => (pick(), any::<u64>()).prop_map(|(p, d)| Op::GetMut(p, d)),
        1 => (2u64..6).prop_map(Op::Retain),
        1 => any::<u64>().prop_map(Op::IterMut),
        1 => Just(Op::Iter),
        1 => Just(Op::Clear),
        1 => Just(Op::Drain),
        1 => Just(Op::Flush),
        1 => Just(Op::Clone),
    ]
}

struct Pair {
    primary: SlotMap<DefaultKey, ()>,
    /// Every key the primary issued, in issue order.
    issued: Vec<DefaultKey>,
    ours: Ours<u64>,
    theirs: Theirs<DefaultKey, u64>,
    /// Each insert's value is new, so a value found names its insert.
    next_value: u64,
}

impl Pair {
    fn key(&self, pick: &Pick) -> DefaultKey {
        match *pick {
            Pick::Issued(i) if !self.issued.is_empty() => self.issued[i % self.issued.len()],
            Pick::Issued(_) => KeyData::from_ffi((1 << 32) | 1).into(),
            Pick::Forged { index, version } => {
                KeyData::from_ffi((u64::from(2 * version + 1) << 32) | u64::from(index)).into()
            }
        }
    }

    fn contents(&self) -> Vec<(DefaultKey, u64)> {
        let guard = pin();
        let ours: Vec<(DefaultKey, u64)> = self
            .ours
            .iter(&guard)
            .map(|(h, v)| (key_of(h), *v))
            .collect();
        let theirs: Vec<(DefaultKey, u64)> = self.theirs.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(ours, theirs, "iteration in index order");
        ours
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Spawn => {
                let key = self.primary.insert(());
                self.issued.push(key);
            }
            Op::Despawn(i) => {
                if !self.issued.is_empty() {
                    let key = self.issued[i % self.issued.len()];
                    self.primary.remove(key);
                }
            }
            Op::Insert(pick) => {
                let key = self.key(pick);
                let value = self.next_value;
                self.next_value += 1;
                let stored = self.ours.insert(handle_of(key), value);
                self.theirs.insert(key, value);
                assert_eq!(
                    stored,
                    self.theirs.get(key) == Some(&value),
                    "insert {key:?}"
                );
            }
            Op::Remove(pick) => {
                let key = self.key(pick);
                assert_eq!(
                    self.ours.remove(handle_of(key)),
                    self.theirs.remove(key).is_some()
                );
            }
            Op::Take(pick) => {
                let key = self.key(pick);
                assert_eq!(self.ours.take(handle_of(key)), self.theirs.remove(key));
            }
            Op::Get(pick) => {
                let key = self.key(pick);
                let h = handle_of(key);
                let expected = self.theirs.get(key).copied();
                let guard = pin();
                assert_eq!(self.ours.get(h, &guard).copied(), expected);
                assert_eq!(self.ours.contains(h), self.theirs.contains_key(key));
                assert_eq!(self.ours.with(h, |v| *v), expected);
                assert_eq!(self.ours.get_cloned(h), expected);
            }
            Op::GetMut(pick, delta) => {
                let key = self.key(pick);
                let ours = self.ours.get_mut(handle_of(key)).map(|v| {
                    *v = v.wrapping_add(*delta);
                    *v
                });
                let theirs = self.theirs.get_mut(key).map(|v| {
                    *v = v.wrapping_add(*delta);
                    *v
                });
                assert_eq!(ours, theirs);
            }
            Op::Retain(m) => {
                self.ours.retain(|_, v| *v % m != 0);
                self.theirs.retain(|_, v| *v % m != 0);
            }
            Op::IterMut(delta) => {
                let ours: Vec<(DefaultKey, u64)> = self
                    .ours
                    .iter_mut()
                    .map(|(h, v)| {
                        *v ^= delta;
                        (key_of(h), *v)
                    })
                    .collect();
                let theirs: Vec<(DefaultKey, u64)> = self
                    .theirs
                    .iter_mut()
                    .map(|(k, v)| {
                        *v ^= delta;
                        (k, *v)
                    })
                    .collect();
                assert_eq!(ours, theirs);
            }
            Op::Iter => {
                self.contents();
            }
            Op::Clear => {
                self.ours.clear();
                self.theirs.clear();
            }
            Op::Drain => {
                let ours: Vec<(DefaultKey, u64)> =
                    self.ours.drain().map(|(h, v)| (key_of(h), v)).collect();
                let mut theirs: Vec<(DefaultKey, u64)> = self.theirs.drain().collect();
                theirs.sort_by_key(|(k, _)| handle_of(*k).index());
                assert_eq!(ours, theirs);
            }
            Op::Flush => self.ours.flush(),
            Op::Clone => {
                self.ours = self.ours.clone();
                self.theirs = self.theirs.clone();
            }
        }
        assert_eq!(self.ours.len(), self.theirs.len(), "len after {op:?}");
    }
}

fn run(ops: &[Op]) {
    let mut pair = Pair {
        primary: SlotMap::new(),
        issued: Vec::new(),
        ours: Ours::new(),
        theirs: Theirs::new(),
        next_value: 0,
    };
    for op in ops {
        pair.apply(op);
    }
    let contents = pair.contents();
    let by_key: BTreeMap<u32, u64> = contents
        .iter()
        .map(|(k, v)| (handle_of(*k).index(), *v))
        .collect();
    assert_eq!(by_key.len(), contents.len(), "one entry per index");
    for key in pair.issued.clone() {
        assert_eq!(
            pair.ours.get_cloned(handle_of(key)),
            pair.theirs.get(key).copied()
        );
    }
}

#[test]
fn a_key_and_its_handle_map_both_ways() {
    let mut primary = SlotMap::new();
    let keys: Vec<DefaultKey> = (0..5).map(|_| primary.insert(())).collect();
    primary.remove(keys[2]);
    let again = primary.insert(());
    for key in keys.into_iter().chain([again]) {
        assert_eq!(key_of(handle_of(key)), key);
    }
    assert!(handle_of(again).generation() > 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn secondary_map_gives_slotmaps_results(ops in prop::collection::vec(op(), 1..300)) {
        run(&ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The long run (`--ignored`, with the pool's).
    #[test]
    #[ignore]
    fn secondary_map_gives_slotmaps_results_heavy(ops in prop::collection::vec(op(), 1..2000)) {
        run(&ops);
    }
}
