//! Handles passed between threads through a `Relaxed` mailbox: the only
//! ordering that makes an inserted value visible to the thread that looks it
//! up is the pool's own (the `Release` store that publishes a slot, the
//! `Acquire` load in `get`). A weaker publish shows up here as a torn value,
//! and under ThreadSanitizer (`.ci/sanitize.sh tsan`) as a data race.
//!
//! Each test holds the binary's `serial()` lock, as the stress tests do:
//! its spinning threads would otherwise run on top of theirs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use handle_pool::{pin, Handle, HandlePool};

use crate::common;
use crate::serial;

/// A value whose halves must agree: a reader that sees only part of a
/// write sees them disagree.
#[derive(Clone, Copy)]
struct Payload([u64; 4]);

impl Payload {
    fn new(n: u64) -> Self {
        Payload([n, !n, n.rotate_left(17), n ^ 0x5555_5555_5555_5555])
    }
    fn is_whole(&self) -> bool {
        let n = self.0[0];
        self.0 == Payload::new(n).0
    }
}

fn handoff(consumers: usize, run_for: Duration) {
    let pool: HandlePool<Payload> = HandlePool::new();
    let mailbox = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let (received, sent) = common::scope(|s| {
        let readers: Vec<_> = (0..consumers)
            .map(|_| {
                s.spawn(|| {
                    let mut received = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // Relaxed on purpose: no ordering from the mailbox.
                        let bits = mailbox.swap(0, Ordering::Relaxed);
                        let Some(handle) = Handle::from_bits(bits) else {
                            std::hint::spin_loop();
                            continue;
                        };
                        let guard = pin();
                        let value = pool.get(handle, &guard).copied();
                        drop(guard);
                        let value = value.expect("a handed-over handle resolves until removed");
                        assert!(value.is_whole(), "torn value {:?}", value.0);
                        assert!(pool.remove(handle));
                        received += 1;
                    }
                    received
                })
            })
            .collect();
        let deadline = Instant::now() + run_for;
        let mut sent = 0u64;
        let mut n = 0u64;
        while Instant::now() < deadline {
            // Wait until a reader took the previous handle.
            if mailbox.load(Ordering::Relaxed) != 0 {
                std::hint::spin_loop();
                continue;
            }
            n += 1;
            let handle = pool.insert(Payload::new(n));
            mailbox.store(handle.to_bits(), Ordering::Relaxed);
            sent += 1;
        }
        // Let the readers drain the last handle.
        while mailbox.load(Ordering::Relaxed) != 0 {
            std::hint::spin_loop();
        }
        stop.store(true, Ordering::Relaxed);
        let received: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        (received, sent)
    });
    assert_eq!(received, sent);
    assert!(sent > 0);
    assert!(pool.is_empty());
}

#[test]
fn handed_over_handles_show_whole_values_1_reader() {
    let _serial = serial();
    handoff(1, Duration::from_millis(300));
}

#[test]
fn handed_over_handles_show_whole_values_3_readers() {
    let _serial = serial();
    handoff(3, Duration::from_millis(300));
}
