//! Checking a recorded concurrent history against [`ReferenceTable`].
//!
//! A history is a sequential setup, one list of events per thread (in program
//! order) and a sequential teardown. It is accepted when some interleaving of
//! the threads' lists, between the setup and the teardown, replayed on a
//! `ReferenceTable`, gives every event the result the pool gave it. Histories
//! are tiny (2 or 3 threads of a few events), so the search is a plain
//! depth-first walk over interleavings that prunes at the first mismatch.
//!
//! Handles are compared by what they refer to: an operation names the value
//! id whose insert produced its handle, and the replay maps that id to the
//! handle the reference table gave back. Results name value ids, never bits.
//!
//! An iteration is not atomic, so it is two events: `IterBegin` and `IterEnd`.
//! Its window is what the replay did between them: every value yielded must
//! have been in the table at some point of the window, and every value present
//! at `IterBegin` and not removed during the window must be yielded.

use std::collections::{BTreeMap, BTreeSet};

use handle_pool::{Handle, ReferenceTable};

/// Identifies a value (and so the handle its insert returned).
pub type Id = u32;

/// An operation as the pool saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `insert(value id)`.
    Insert(Id),
    /// `try_insert(value id)`.
    TryInsert(Id),
    /// `remove(handle of id)`.
    Remove(Id),
    /// One handle of a `remove_many`: the call removes its handles one by
    /// one (one CAS each), so it is one event per handle, whose result is
    /// known only as part of the call's total.
    RemovePart(Id),
    /// The end of a `remove_many`: its result is how many of the preceding
    /// `RemovePart`s removed something.
    RemoveManyEnd,
    /// `get(handle of id)` (also `with`, `get_cloned`).
    Get(Id),
    /// `contains(handle of id)`.
    Contains(Id),
    /// `iter` started.
    IterBegin,
    /// `iter` finished.
    IterEnd,
    /// `len()`: exact only when no other operation is in flight.
    Len,
}

/// What the pool returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No result (`IterBegin`).
    Done,
    /// `insert` / `try_insert`: whether the value went in.
    Inserted(bool),
    /// `remove` / `contains`.
    Bool(bool),
    /// `get`: the id of the value read, if any.
    Value(Option<Id>),
    /// `iter`: the ids yielded, in order.
    Yielded(Vec<Id>),
    /// `len`.
    Count(usize),
}

/// One operation and its result.
#[derive(Clone, Debug)]
pub struct Event {
    pub op: Op,
    pub outcome: Outcome,
}

/// A whole recorded execution.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub setup: Vec<Event>,
    pub threads: Vec<Vec<Event>>,
    pub teardown: Vec<Event>,
}

/// What an open iteration has seen so far.
#[derive(Clone, Debug)]
struct Window {
    /// Present when the iteration began.
    start: BTreeSet<Id>,
    /// Present at some moment of the window.
    seen: BTreeSet<Id>,
    /// Removed during the window.
    removed: BTreeSet<Id>,
}

/// The replay state: the oracle plus the bookkeeping to compare with it.
#[derive(Clone, Debug)]
struct Replay {
    table: ReferenceTable<Id>,
    /// The oracle's handle for each value id inserted so far.
    handles: BTreeMap<Id, Handle>,
    /// Open iterations, by lane (thread number, or a sequential phase).
    windows: BTreeMap<usize, Window>,
    /// Handles removed so far by the `remove_many` open on each lane.
    partial: BTreeMap<usize, usize>,
}

impl Replay {
    fn present(&self) -> BTreeSet<Id> {
        self.table.iter().map(|(_, &id)| id).collect()
    }

    /// Applies `event` on `lane`; `false` if the oracle disagrees.
    fn apply(&mut self, lane: usize, event: &Event) -> bool {
        match (&event.op, &event.outcome) {
            (Op::Insert(id) | Op::TryInsert(id), Outcome::Inserted(went_in)) => {
                match self.table.insert(*id) {
                    Ok(handle) => {
                        if !went_in {
                            return false;
                        }
                        self.handles.insert(*id, handle);
                        for window in self.windows.values_mut() {
                            window.seen.insert(*id);
                        }
                        true
                    }
                    Err(_) => !went_in,
                }
            }
            (Op::Remove(id), Outcome::Bool(removed)) => {
                // A handle that was never returned yet cannot be used: this
                // order is impossible.
                let Some(&handle) = self.handles.get(id) else {
                    return false;
                };
                let did = self.table.remove(handle).is_some();
                if did {
                    for window in self.windows.values_mut() {
                        window.removed.insert(*id);
                    }
                }
                did == *removed
            }
            (Op::RemovePart(id), Outcome::Done) => {
                let Some(&handle) = self.handles.get(id) else {
                    return false;
                };
                if self.table.remove(handle).is_some() {
                    *self.partial.entry(lane).or_default() += 1;
                    for window in self.windows.values_mut() {
                        window.removed.insert(*id);
                    }
                }
                true
            }
            (Op::RemoveManyEnd, Outcome::Count(n)) => self.partial.remove(&lane).unwrap_or(0) == *n,
            (Op::Get(id), Outcome::Value(value)) => match self.handles.get(id) {
                Some(&handle) => self.table.get(handle).copied() == *value,
                None => false,
            },
            (Op::Contains(id), Outcome::Bool(found)) => match self.handles.get(id) {
                Some(&handle) => self.table.contains(handle) == *found,
                None => false,
            },
            (Op::IterBegin, Outcome::Done) => {
                let start = self.present();
                let window = Window {
                    seen: start.clone(),
                    start,
                    removed: BTreeSet::new(),
                };
                self.windows.insert(lane, window).is_none()
            }
            (Op::IterEnd, Outcome::Yielded(ids)) => {
                let Some(window) = self.windows.remove(&lane) else {
                    return false;
                };
                let yielded: BTreeSet<Id> = ids.iter().copied().collect();
                yielded.len() == ids.len()
                    && yielded.is_subset(&window.seen)
                    && window
                        .start
                        .difference(&window.removed)
                        .all(|id| yielded.contains(id))
            }
            (Op::Len, Outcome::Count(n)) => self.table.len() == *n,
            _ => panic!("malformed event {event:?}"),
        }
    }
}

const SETUP_LANE: usize = usize::MAX - 1;
const TEARDOWN_LANE: usize = usize::MAX;

/// Panics, printing the history, unless some interleaving explains it.
pub fn check(history: &History, max_generation: u32, max_slots: u64) {
    if let Err(message) = explain_history(history, max_generation, max_slots) {
        panic!("{message}\n{history:#?}");
    }
}

/// Whether some interleaving of the threads' events explains the history.
pub fn explain_history(
    history: &History,
    max_generation: u32,
    max_slots: u64,
) -> Result<(), String> {
    let mut replay = Replay {
        table: ReferenceTable::with_limits(max_generation, max_slots),
        handles: BTreeMap::new(),
        windows: BTreeMap::new(),
        partial: BTreeMap::new(),
    };
    for (step, event) in history.setup.iter().enumerate() {
        if !replay.apply(SETUP_LANE, event) {
            return Err(format!(
                "setup step {step} ({event:?}) disagrees with ReferenceTable"
            ));
        }
    }
    let mut next = vec![0; history.threads.len()];
    if explain(replay, history, &mut next) {
        Ok(())
    } else {
        Err("no sequential order of the threads' operations explains what the pool returned".into())
    }
}

/// Depth-first search over the interleavings from position `next`.
fn explain(replay: Replay, history: &History, next: &mut [usize]) -> bool {
    let mut finished = true;
    for lane in 0..history.threads.len() {
        let Some(event) = history.threads[lane].get(next[lane]) else {
            continue;
        };
        finished = false;
        let mut tried = replay.clone();
        if tried.apply(lane, event) {
            next[lane] += 1;
            let explained = explain(tried, history, next);
            next[lane] -= 1;
            if explained {
                return true;
            }
        }
    }
    if !finished {
        return false;
    }
    let mut replay = replay;
    history
        .teardown
        .iter()
        .all(|event| replay.apply(TEARDOWN_LANE, event))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, outcome: Outcome) -> Event {
        Event { op, outcome }
    }

    /// The checker itself must reject what no order explains.
    #[test]
    fn checker_rejects_two_winning_removes() {
        let history = History {
            setup: vec![ev(Op::Insert(0), Outcome::Inserted(true))],
            threads: vec![
                vec![ev(Op::Remove(0), Outcome::Bool(true))],
                vec![ev(Op::Remove(0), Outcome::Bool(true))],
            ],
            teardown: vec![],
        };
        assert!(explain_history(&history, 8, 100).is_err());
    }

    #[test]
    fn checker_accepts_a_stale_read_ordered_before_the_remove() {
        let history = History {
            setup: vec![ev(Op::Insert(0), Outcome::Inserted(true))],
            threads: vec![
                vec![ev(Op::Remove(0), Outcome::Bool(true))],
                vec![
                    ev(Op::Get(0), Outcome::Value(Some(0))),
                    ev(Op::Get(0), Outcome::Value(None)),
                ],
            ],
            teardown: vec![ev(Op::Len, Outcome::Count(0))],
        };
        assert_eq!(explain_history(&history, 8, 100), Ok(()));
    }

    #[test]
    fn checker_rejects_a_handle_that_resolves_again() {
        let history = History {
            setup: vec![ev(Op::Insert(0), Outcome::Inserted(true))],
            threads: vec![
                vec![ev(Op::Remove(0), Outcome::Bool(true))],
                vec![
                    ev(Op::Get(0), Outcome::Value(None)),
                    ev(Op::Get(0), Outcome::Value(Some(0))),
                ],
            ],
            teardown: vec![],
        };
        assert!(explain_history(&history, 8, 100).is_err());
    }

    #[test]
    fn checker_rejects_an_iteration_missing_a_stable_value() {
        let history = History {
            setup: vec![
                ev(Op::Insert(0), Outcome::Inserted(true)),
                ev(Op::Insert(1), Outcome::Inserted(true)),
            ],
            threads: vec![
                vec![ev(Op::Remove(0), Outcome::Bool(true))],
                vec![
                    ev(Op::IterBegin, Outcome::Done),
                    ev(Op::IterEnd, Outcome::Yielded(vec![0])),
                ],
            ],
            teardown: vec![],
        };
        assert!(explain_history(&history, 8, 100).is_err());
    }

    /// `remove_many` is not atomic as a whole: a reader may see its first
    /// handle removed and its second not yet.
    #[test]
    fn checker_accepts_a_reader_between_the_parts_of_remove_many() {
        let history = History {
            setup: vec![
                ev(Op::Insert(0), Outcome::Inserted(true)),
                ev(Op::Insert(1), Outcome::Inserted(true)),
            ],
            threads: vec![
                vec![
                    ev(Op::RemovePart(0), Outcome::Done),
                    ev(Op::RemovePart(1), Outcome::Done),
                    ev(Op::RemoveManyEnd, Outcome::Count(2)),
                ],
                vec![
                    ev(Op::Get(0), Outcome::Value(None)),
                    ev(Op::Get(1), Outcome::Value(Some(1))),
                ],
            ],
            teardown: vec![ev(Op::Len, Outcome::Count(0))],
        };
        assert_eq!(explain_history(&history, 8, 100), Ok(()));
    }

    #[test]
    fn checker_rejects_a_remove_many_count_no_order_gives() {
        let history = History {
            setup: vec![ev(Op::Insert(0), Outcome::Inserted(true))],
            threads: vec![
                vec![
                    ev(Op::RemovePart(0), Outcome::Done),
                    ev(Op::RemoveManyEnd, Outcome::Count(1)),
                ],
                vec![ev(Op::Remove(0), Outcome::Bool(true))],
            ],
            teardown: vec![],
        };
        assert!(explain_history(&history, 8, 100).is_err());
    }
}
