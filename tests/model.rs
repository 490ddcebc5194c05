//! Random operation sequences checked against an oracle: the proptest model
//! against `ReferenceTable` (`model`) and the differential tests against
//! `slotmap::SlotMap` (`differential_slotmap`) and `slotmap::SecondaryMap`
//! (`secondary`), and `DensePool`'s views against a map across values'
//! regions (`dense_region`).
//!
//! proptest keeps the failing cases it finds next to the source file of the
//! test (`tests/model/<module>.proptest-regressions`) and replays them first.

mod common;

// This binary's modules live in `tests/model/` (a crate root's modules would
// be looked for next to it, in `tests/`).
#[path = "model/dense_region.rs"]
mod dense_region;
#[path = "model/dense_slotmap.rs"]
mod dense_slotmap;
#[path = "model/differential_slotmap.rs"]
mod differential_slotmap;
#[path = "model/model.rs"]
mod model;
#[path = "model/secondary.rs"]
mod secondary;
