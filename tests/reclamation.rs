//! When removed values are dropped: reclamation that is prompt, live and
//! bounded, memory under churn (`reclamation`, with a global allocator that
//! counts live bytes), writers that never wait for each other (`writers`),
//! guards at the edges of a thread's life (`guards`), what holds
//! reclamation back for good (`held_for_good`: a guard held across `fork`,
//! a forgotten guard), and what pools take of the process's mapping and
//! address-space limits (`mappings`).
//!
//! A guard held anywhere in the process holds back every pool's
//! reclamation, and the allocator counts every thread's bytes: every test
//! here holds [`serial`], so none runs while another holds a guard or
//! allocates. (`held_for_good` and `mappings` run each test alone in a
//! child process instead, which they spoil.)

use std::sync::{Mutex, MutexGuard};

mod common;

// This binary's modules live in `tests/reclamation/` (a crate root's modules would
// be looked for next to it, in `tests/`).
#[path = "reclamation/guards.rs"]
mod guards;
#[path = "reclamation/held_for_good.rs"]
mod held_for_good;
#[path = "reclamation/mappings.rs"]
mod mappings;
#[path = "reclamation/reclamation.rs"]
mod reclamation;
#[path = "reclamation/writers.rs"]
mod writers;

/// Held by every test in this binary, for as long as it runs.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
