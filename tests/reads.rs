//! Reads that keep a guard across many lookups or a whole pool: `Reader`
//! (`reader`) and `Clone` (`clone`, which copies the pool under a guard,
//! also while other threads churn and while a value's `clone` panics).
//!
//! Their guards hold every pool's reclamation back while they live, so
//! these tests are kept apart from those that count on prompt reclamation
//! (`api`, `drops`, `reclamation`) and from the stress tests' capacity
//! checks (`concurrency`). Each test here that waits for a drop allows
//! for the others' guards.

mod common;

// This binary's modules live in `tests/reads/` (a crate root's modules would
// be looked for next to it, in `tests/`).
#[path = "reads/clone.rs"]
mod clone;
#[path = "reads/reader.rs"]
mod reader;
