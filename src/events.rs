//! Counts of the slow-path events that touch shared state: what each
//! operation does to other stripes, other threads' magazines and other
//! cores, counted so that a rate per operation that grows with the thread
//! count shows on any machine, two cores included (see
//! `examples/event_counts.rs`).
//!
//! Compiled in only with the `testing` feature (this crate's own tests and
//! tools); otherwise [`count`] is empty and inlined away. The counters are
//! plain std atomics, not `sync`'s: they are not part of the algorithm, and
//! loom must not explore them.

/// A slow-path event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Event {
    /// An insert found its magazine and home stripe empty (`acquire_slow`).
    AcquireSlow,
    /// A magazine took a run off its stripe's shared free list (one CAS on
    /// the stripe's line).
    Refill,
    /// A block of never-used slots was reserved (the pool grew).
    Fresh,
    /// Reusable slots were taken from another stripe.
    TakeFromOther,
    /// A sweep ran (it visits one stripe, often another's).
    Sweep,
    /// Every stripe's insert count was noted (a visit to every stripe).
    NoteInserts,
    /// A removal batch was sealed (one RMW on the process-wide seal count).
    Seal,
    /// A stripe's sealed batches were judged against the readers' horizon.
    ReclaimScan,
    /// The readers' horizon was read: a `SeqCst` fence and a load of every
    /// thread's announcement (once per look at the stripes, see `Horizon`).
    Horizon,
    /// A magazine was revoked from its owner.
    Revoke,
    /// A heavy fence ran (`membarrier`: interrupts every core running a
    /// thread of the process).
    HeavyFence,
    /// A round of back-pressure (an insert looked for reusable slots while
    /// reclamation was behind).
    BehindRound,
    /// A thread gave its CPU away waiting for another (back-pressure, or a
    /// revoker waiting for an owner).
    Yield,
    /// A thread slept waiting for reclamation (at the bound).
    Nap,
    /// A removal went through the shared batch or another slow path.
    RemoveSlow,
}

#[cfg(feature = "testing")]
impl Event {
    /// Every event, in declaration order.
    pub const ALL: [Event; 15] = [
        Event::AcquireSlow,
        Event::Refill,
        Event::Fresh,
        Event::TakeFromOther,
        Event::Sweep,
        Event::NoteInserts,
        Event::Seal,
        Event::ReclaimScan,
        Event::Horizon,
        Event::Revoke,
        Event::HeavyFence,
        Event::BehindRound,
        Event::Yield,
        Event::Nap,
        Event::RemoveSlow,
    ];

    /// A short name, for tables.
    pub fn name(self) -> &'static str {
        match self {
            Event::AcquireSlow => "acquire_slow",
            Event::Refill => "refill",
            Event::Fresh => "fresh",
            Event::TakeFromOther => "take_other",
            Event::Sweep => "sweep",
            Event::NoteInserts => "note_all",
            Event::Seal => "seal",
            Event::ReclaimScan => "reclaim_scan",
            Event::Horizon => "horizon",
            Event::Revoke => "revoke",
            Event::HeavyFence => "heavy_fence",
            Event::BehindRound => "behind_round",
            Event::Yield => "yield",
            Event::Nap => "nap",
            Event::RemoveSlow => "remove_slow",
        }
    }
}

#[cfg(feature = "testing")]
static COUNTS: [crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>; Event::ALL.len()] =
    [const { crossbeam_utils::CachePadded::new(std::sync::atomic::AtomicU64::new(0)) };
        Event::ALL.len()];

#[cfg(feature = "testing")]
std::thread_local! {
    static HERE: [core::cell::Cell<u64>; Event::ALL.len()] =
        const { [const { core::cell::Cell::new(0) }; Event::ALL.len()] };
}

/// Counts one `event` (nothing without the `testing` feature).
#[inline(always)]
pub(crate) fn count(event: Event) {
    #[cfg(feature = "testing")]
    {
        COUNTS[event as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = HERE.try_with(|here| here[event as usize].set(here[event as usize].get() + 1));
    }
    #[cfg(not(feature = "testing"))]
    let _ = event;
}

/// The counts so far on the calling thread, in [`Event::ALL`]'s order: for
/// tests, which share the process with other tests.
#[cfg(feature = "testing")]
pub fn snapshot_here() -> [u64; Event::ALL.len()] {
    HERE.try_with(|here| core::array::from_fn(|i| here[i].get()))
        .unwrap_or([0; Event::ALL.len()])
}

/// The counts so far, process-wide, in [`Event::ALL`]'s order.
#[cfg(feature = "testing")]
pub fn snapshot() -> [u64; Event::ALL.len()] {
    core::array::from_fn(|i| COUNTS[i].load(std::sync::atomic::Ordering::Relaxed))
}
