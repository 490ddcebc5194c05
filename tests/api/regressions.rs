//! Regressions found by adversarial review, each named after what it
//! guards against: both failed before their fix.

use std::sync::{mpsc, Arc};
use std::thread;

use handle_pool::{pin, Config, Handle, HandlePool};

use crate::common;

/// Producer/consumer: one thread inserts with `insert_many`, another removes.
/// The live count never exceeds `per_round`, yet the pool must not grow
/// without bound.
fn producer_consumer(rounds: usize, per_round: usize, batch_insert: bool) -> usize {
    let pool: Arc<HandlePool<u64>> = Arc::new(HandlePool::with_config(Config {
        stripes: 4,
        batch: 16,
        ..Config::default()
    }));
    let (to_consumer, from_producer) = mpsc::channel::<Vec<Handle>>();
    let (to_producer, from_consumer) = mpsc::channel::<()>();
    let consumer = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            for handles in from_producer {
                for h in handles {
                    assert!(pool.remove(h));
                }
                // Pins and flushes crossbeam-epoch, as a caller might; the
                // pool's reclamation no longer goes through it.
                for _ in 0..4 {
                    pin().flush();
                }
                to_producer.send(()).unwrap();
            }
        })
    };
    let producer = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            for round in 0..rounds {
                let values = (0..per_round as u64).map(|i| i + round as u64);
                let handles = if batch_insert {
                    pool.insert_many(values)
                } else {
                    values.map(|v| pool.insert(v)).collect()
                };
                to_consumer.send(handles).unwrap();
                from_consumer.recv().unwrap();
                for _ in 0..4 {
                    pin().flush();
                }
            }
        })
    };
    producer.join().unwrap();
    consumer.join().unwrap();
    assert_eq!(pool.len(), 0);
    pool.slots_used()
}

/// `RawPool::claim` (raw.rs, the batch path of `insert_many`/`extend`/
/// `FromIterator`) looks only at the home stripe's free list and ready list,
/// never at other stripes, and never consults `reclamation_is_behind`: it
/// falls straight to `reserve_fresh`. When the values are removed on
/// another thread (whose stripe gets the batches), the producer never
/// reuses a single slot and the pool grows without bound.
#[test]
fn insert_many_reuses_slots_freed_on_other_stripes() {
    let rounds = 200;
    let per_round = 100;
    // Control: the same pattern with single inserts stays bounded
    // (`acquire_slow` scans the other stripes and their ready lists).
    let control = producer_consumer(rounds, per_round, false);
    assert!(
        control <= 4 * per_round + 1024 + per_round,
        "control: {control}"
    );
    let used = producer_consumer(rounds, per_round, true);
    assert!(
        used <= 4 * per_round + 1024 + per_round,
        "at most {per_round} values live at any time, but slots_used = {used} \
         after {rounds} rounds (= {} per round)",
        used / rounds
    );
}

/// What a [`PanicsOnDrop`] panics with: the panics its test expects, kept
/// quiet (`common::quiet_panics`).
const PANICS_ON_DROP: &str = "PanicsOnDrop";

/// A value whose `Drop` panics.
struct PanicsOnDrop(#[allow(dead_code)] u32);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("{PANICS_ON_DROP}");
    }
}

/// The name libtest gives this module's test `name`: its module path
/// without the binary's name (`regressions::name` in the `api` binary), as
/// `--exact` needs it to re-run that one test in a child process.
fn test_name(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

/// How a child process that ran its scenario to the end exits: a child
/// whose `--exact` name matched no test exits with 0, having run nothing.
const CHILD_RAN: i32 = 42;

/// Runs `scenario` in a child process (this test binary, re-executed on the
/// one test) and returns whether the child ended by a signal (an abort).
fn aborts_in_child(test_name: &str, scenario: impl FnOnce()) -> bool {
    const KEY: &str = "HANDLE_POOL_REVIEW_CHILD";
    if std::env::var_os(KEY).is_some() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scenario));
        std::process::exit(CHILD_RAN);
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .env(KEY, "1")
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    eprintln!("child status: {status:?}");
    assert!(
        status.signal().is_some() || status.code() == Some(CHILD_RAN),
        "the child did not run {test_name}: {status:?}"
    );
    status.signal().is_some()
}

/// `HandlePool::clear` (pool.rs) is `self.drain().for_each(drop)`: when one
/// value's `Drop` panics, unwinding drops the `Drain`, whose `Drop` drops the
/// remaining values while panicking; a second panicking `Drop` aborts the
/// process. `reclaim()` and the pool's own drop catch every panic and
/// re-raise the first one after finishing (`reclaim_all`), so `clear` is the
/// odd one out: two panicking values abort instead of unwinding.
#[test]
fn clear_with_two_panicking_drops_unwinds_once() {
    // The values' panics are expected, here and in the children (which print
    // theirs: the abort child runs with `--nocapture`).
    let _quiet = common::quiet_panics(PANICS_ON_DROP);
    let name = test_name("clear_with_two_panicking_drops_unwinds_once");
    // Control: the pool's drop with the same two values unwinds normally.
    if std::env::var_os("HANDLE_POOL_REVIEW_CONTROL").is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--test-threads=1"])
            .env("HANDLE_POOL_REVIEW_CONTROL", "1")
            .env("HANDLE_POOL_REVIEW_CHILD", "1")
            .status()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.signal().is_none(),
            "control (pool drop) aborted: {status:?}"
        );
        assert_eq!(
            status.code(),
            Some(CHILD_RAN),
            "the control child did not run {name}"
        );
    }
    if std::env::var_os("HANDLE_POOL_REVIEW_CONTROL").is_some() {
        let _ = std::panic::catch_unwind(|| {
            let pool = HandlePool::new();
            pool.insert(PanicsOnDrop(1));
            pool.insert(PanicsOnDrop(2));
            drop(pool);
        });
        std::process::exit(CHILD_RAN);
    }
    let aborted = aborts_in_child(&name, || {
        let mut pool = HandlePool::new();
        pool.insert(PanicsOnDrop(1));
        pool.insert(PanicsOnDrop(2));
        pool.clear();
    });
    assert!(
        !aborted,
        "clear() aborted the process (panic while panicking)"
    );
}

/// A thread's number (which owns its magazine) is given back when its
/// thread-locals are destroyed; a pool used later by another thread-local's
/// destructor on that thread must still work, through the shared lists
/// (and its one-call reads through a pin).
#[test]
fn a_pool_used_from_a_thread_local_destructor_still_works() {
    use std::sync::OnceLock;
    static POOL: OnceLock<HandlePool<u64>> = OnceLock::new();
    let pool = POOL.get_or_init(HandlePool::new);
    struct Late;
    impl Drop for Late {
        fn drop(&mut self) {
            let pool = POOL.get().expect("set before the thread started");
            let handles: Vec<Handle> = (0..100).map(|i| pool.insert(i)).collect();
            for (i, &h) in (0..).zip(&handles) {
                // One-call reads: the thread has given its number back,
                // so they pin instead of announcing.
                assert_eq!(pool.get_cloned(h), Some(i));
                assert_eq!(pool.with(h, |v| *v + 1), Some(i + 1));
            }
            for h in handles {
                assert!(pool.remove(h));
            }
            pool.flush();
        }
    }
    thread_local! {
        static LATE: Late = const { Late };
    }
    for _ in 0..4 {
        thread::spawn(move || {
            LATE.with(|_| {});
            // Uses the pool, so the thread's number (and magazine) exist.
            let handles: Vec<Handle> = (0..100).map(|i| pool.insert(i)).collect();
            for h in handles {
                assert!(pool.remove(h));
            }
        })
        .join()
        .unwrap();
    }
    pool.flush();
    assert_eq!(pool.len(), 0);
    let h = pool.insert(1);
    assert_eq!(pool.get_cloned(h), Some(1));
}

/// A panic payload whose own `Drop` panics (review, session 25).
struct PanickingPayload;

impl Drop for PanickingPayload {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the payload's drop panics");
        }
    }
}

/// Counts its drops; panics in `Drop` as `panics` says: with a plain
/// message, or with a [`PanickingPayload`].
struct Dropped {
    drops: Arc<std::sync::atomic::AtomicUsize>,
    panics: Panics,
}

#[derive(Clone, Copy, PartialEq)]
enum Panics {
    No,
    Plainly,
    WithABadPayload,
}

impl Drop for Dropped {
    fn drop(&mut self) {
        self.drops
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.panics {
            Panics::No => {}
            Panics::Plainly => panic!("a value's drop panics"),
            Panics::WithABadPayload => std::panic::panic_any(PanickingPayload),
        }
    }
}

/// Ten values, those at the given positions panicking as given, and their
/// drop counter.
fn ten_values(
    panicking: &[(usize, Panics)],
) -> (Vec<Dropped>, Arc<std::sync::atomic::AtomicUsize>) {
    let drops = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let values = (0..10)
        .map(|i| Dropped {
            drops: Arc::clone(&drops),
            panics: panicking
                .iter()
                .find(|&&(at, _)| at == i)
                .map_or(Panics::No, |&(_, how)| how),
        })
        .collect();
    (values, drops)
}

/// `reclaim_batch` caught a value's panic but dropped the payload outside
/// any catch: a payload whose `Drop` panicked unwound out of `flush` (and
/// of any `insert` or `remove` that reclaimed the batch), leaving the slots
/// already vacated in that batch on a chain no list ever got (lost for
/// good) and the rest of the batch `REMOVED` until `&mut`.
#[test]
fn a_panic_payload_whose_drop_panics_does_not_escape_a_flush() {
    let (values, drops) = ten_values(&[(3, Panics::WithABadPayload)]);
    let pool = HandlePool::new();
    let handles: Vec<Handle> = values.into_iter().map(|v| pool.insert(v)).collect();
    for &h in &handles {
        assert!(pool.remove(h));
    }
    let flushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.flush()));
    assert!(flushed.is_ok(), "a panic escaped flush");
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 10);
    // Every vacated slot is reusable: the next inserts reuse all ten.
    let (again, _) = ten_values(&[]);
    let mut reused: Vec<u32> = again
        .into_iter()
        .chain(ten_values(&[]).0)
        .map(|v| pool.insert(v).index())
        .filter(|i| handles.iter().any(|h| h.index() == *i))
        .collect();
    reused.sort_unstable();
    reused.dedup();
    assert_eq!(reused.len(), 10, "slots lost: only {reused:?} reused");
}

/// `reclaim_all` kept the first panic with `Option::or`, which dropped a
/// later payload outside any catch: a payload whose `Drop` panicked unwound
/// out of `clear` half done, with `len` still counting the values dropped.
#[test]
fn clear_finishes_past_a_panic_payload_whose_drop_panics() {
    let (values, drops) = ten_values(&[(2, Panics::Plainly), (5, Panics::WithABadPayload)]);
    let mut pool = HandlePool::new();
    let handles: Vec<Handle> = values.into_iter().map(|v| pool.insert(v)).collect();
    let cleared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.clear()));
    let payload = cleared.expect_err("the first panic is re-raised");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a value's drop panics")
    );
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 10);
    assert_eq!(pool.len(), 0);
    assert_eq!(pool.iter(&pin()).count(), 0);
    assert!(handles.iter().all(|&h| !pool.contains(h)));
}

/// `Drain`'s `Drop` was `for_each(drop)`: the first panicking `Drop` stopped
/// it, and the values after it stayed in the pool, their handles resolving,
/// although `drain` promises every old handle stale whether or not the
/// iterator is consumed.
#[test]
fn dropping_a_drain_drops_every_value_even_if_one_panics() {
    let (values, drops) = ten_values(&[(1, Panics::Plainly)]);
    let mut pool = HandlePool::new();
    let handles: Vec<Handle> = values.into_iter().map(|v| pool.insert(v)).collect();
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(pool.drain())));
    assert!(dropped.is_err(), "the first panic is re-raised");
    assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 10);
    assert_eq!(pool.len(), 0);
    assert!(handles.iter().all(|&h| !pool.contains(h)));
}
