//! The pool's API, one thread at a time (or a few threads, briefly): handles,
//! generations and the capacity limit, batch operations, the conveniences
//! and collection traits, auto traits, hostile input from safe code, and the
//! regressions found by review.
//!
//! Some of these tests count on a removed value being reclaimed at once by
//! the next `flush` or insert, which a guard held anywhere in the process
//! would hold back: tests that hold guards for long (`reads`, `drops`,
//! `concurrency`, `reclamation`) live in other binaries.

mod common;

// This binary's modules live in `tests/api/` (a crate root's modules would
// be looked for next to it, in `tests/`).
#[path = "api/adversarial.rs"]
mod adversarial;
#[path = "api/auto_traits.rs"]
mod auto_traits;
#[path = "api/batch.rs"]
mod batch;
#[path = "api/coming_from_slotmap.rs"]
mod coming_from_slotmap;
#[path = "api/conveniences.rs"]
mod conveniences;
#[path = "api/dense.rs"]
mod dense;
#[path = "api/generations.rs"]
mod generations;
#[path = "api/handles.rs"]
mod handles;
#[path = "api/many_pools.rs"]
mod many_pools;
#[path = "api/regressions.rs"]
mod regressions;
#[path = "api/secondary.rs"]
mod secondary;
#[path = "api/traits.rs"]
mod traits;
