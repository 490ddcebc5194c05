//! Many threads at once: ownership under churn, racing removes, references
//! held across removes, capacity under churn (`stress`), handles handed
//! between threads through a `Relaxed` mailbox (`handoff`), the platform
//! failing under the pool: refused fences, signal handlers (`faults`), and
//! a `SecondaryMap` shared by workers while its primary churns (`secondary`).

use std::sync::{Mutex, MutexGuard};

mod common;

// This binary's modules live in `tests/concurrency/` (a crate root's modules would
// be looked for next to it, in `tests/`).
#[path = "concurrency/dense.rs"]
mod dense;
#[path = "concurrency/faults.rs"]
mod faults;
#[path = "concurrency/handoff.rs"]
mod handoff;
#[path = "concurrency/secondary.rs"]
mod secondary;
#[path = "concurrency/stress.rs"]
mod stress;

/// Held by every test here: each starts up to 16 threads, and on a small
/// machine running them at the same time would mostly measure the
/// oversubscription (and one test's preempted guards would hold back
/// another's reclamation). They run one after another.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
