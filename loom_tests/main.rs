//! Loom model tests; compiled only with `--cfg handle_pool_loom` (see `.ci/loom.sh`).
//!
//! Each model runs a tiny pool (buckets of 1, 2, 4… slots, one fresh slot at
//! a time, batches of 1 or 2) through a sequential setup, two or three
//! threads of a few operations, and a sequential teardown, and checks, in
//! every execution loom explores:
//!
//! - the recorded history is explainable by some sequential order of the
//!   same operations on [`handle_pool::ReferenceTable`] (see `history`);
//! - the property the model is named after (assertions in the model);
//! - every value is dropped exactly once once the pool is dropped, and no
//!   value is read after its drop or while its slot is reused (loom checks
//!   the drop's write against every read, see `harness::Tracked`);
//! - no panic happened anywhere, not even one the pool caught.
//!
//! Reclamation's process-wide state (the seal count, the guards' words, see
//! `announce`) is created afresh in every execution, and so, under `--cfg
//! crossbeam_loom`, is crossbeam's default collector, which guards still pin
//! (for their public `Deref`) though no pool defers anything on it.
#![cfg(handle_pool_loom)]

mod harness;
mod history;

mod dense;
mod drop_free;
mod guard;
mod insert;
mod iterate;
mod lists;
mod magazine;
mod read;
mod reclaim;
mod remove;
mod removed_value;
mod secondary;
mod storage;
mod thread_id;
