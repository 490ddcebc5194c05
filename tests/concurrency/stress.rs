//! Multi-threaded stress with std threads: ownership checks under churn,
//! racing removes, readers holding references across removes, and bounded
//! memory under insert/remove churn. Bounded in time; the `#[ignore]`d
//! variants run longer
//! (`cargo test --release --test concurrency stress:: -- --ignored`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use handle_pool::{pin, Config, Handle, HandlePool};

use crate::common::{self, Lock, Rng, StartLine};
use crate::serial;

/// A value tagged with its inserting thread and a per-thread counter. The
/// boxed check word makes a read of a freed or reused value likely to show.
#[derive(Debug, PartialEq, Eq)]
struct Tag {
    thread: usize,
    n: u64,
    check: Box<u64>,
}

const MAGIC: u64 = 0x9e37_79b9_7f4a_7c15;

impl Tag {
    fn new(thread: usize, n: u64) -> Self {
        Tag {
            thread,
            n,
            check: Box::new(n ^ MAGIC ^ thread as u64),
        }
    }

    fn is(&self, thread: usize, n: u64) -> bool {
        self.thread == thread && self.n == n && *self.check == n ^ MAGIC ^ thread as u64
    }
}

/// What one worker leaves behind.
struct Outcome {
    live: Vec<(Handle, u64)>,
    removed: Vec<Handle>,
    ops: u64,
}

fn check_live(pool: &HandlePool<Tag>, thread: usize, h: Handle, n: u64) {
    let guard = pin();
    let got = pool.get(h, &guard).expect("own live handle missing");
    assert!(
        got.is(thread, n),
        "{h:?} gave {got:?}, expected ({thread}, {n})"
    );
    drop(guard);
    assert_eq!(pool.with(h, |v| v.is(thread, n)), Some(true), "{h:?}");
    assert!(pool.contains(h));
}

fn check_removed(pool: &HandlePool<Tag>, h: Handle) {
    let guard = pin();
    assert!(pool.get(h, &guard).is_none(), "removed {h:?} resolves");
    drop(guard);
    assert_eq!(pool.with(h, |v| (v.thread, v.n)), None, "removed {h:?}");
    assert!(!pool.contains(h), "removed {h:?} resolves");
    assert!(!pool.remove(h), "removed {h:?} removed again");
}

/// Inserts its own values, checks them, removes some, and checks that the
/// removed ones stay gone, until `deadline`.
fn worker(pool: &HandlePool<Tag>, thread: usize, deadline: Instant) -> Outcome {
    let mut rng = Rng::new(thread as u64 + 1);
    let mut live: Vec<(Handle, u64)> = Vec::new();
    let mut removed: Vec<Handle> = Vec::new();
    let mut next = 0u64;
    let mut ops = 0u64;
    loop {
        if ops % 64 == 0 && Instant::now() >= deadline {
            break;
        }
        ops += 1;
        match rng.below(16) {
            // Insert, sometimes through insert_with.
            0..=5 => {
                let h = if rng.below(4) == 0 {
                    let mut shown = None;
                    let h = pool.insert_with(|h| {
                        shown = Some(h);
                        Tag::new(thread, next)
                    });
                    assert_eq!(shown, Some(h));
                    h
                } else {
                    pool.insert(Tag::new(thread, next))
                };
                live.push((h, next));
                next += 1;
            }
            // Remove one of ours.
            6..=10 if !live.is_empty() => {
                let (h, n) = live.swap_remove(rng.below(live.len()));
                check_live(pool, thread, h, n);
                assert!(pool.remove(h), "own live {h:?} could not be removed");
                check_removed(pool, h);
                removed.push(h);
            }
            // Check a live one, holding the reference a little while.
            11..=13 if !live.is_empty() => {
                let (h, n) = live[rng.below(live.len())];
                let guard = pin();
                let value = pool.get(h, &guard).expect("own live handle missing");
                for _ in 0..rng.below(8) {
                    std::hint::spin_loop();
                }
                assert!(value.is(thread, n), "{h:?} gave {value:?}");
                drop(guard);
                check_live(pool, thread, h, n);
            }
            // Check a removed one: stale forever.
            14 if !removed.is_empty() => {
                check_removed(pool, removed[rng.below(removed.len())]);
            }
            // Keep the live set from growing without bound.
            _ if live.len() > 256 => {
                for (h, _) in live.drain(..128) {
                    assert!(pool.remove(h));
                    removed.push(h);
                }
            }
            _ => {}
        }
    }
    for &(h, n) in &live {
        check_live(pool, thread, h, n);
    }
    for &h in &removed {
        check_removed(pool, h);
    }
    Outcome { live, removed, ops }
}

fn ownership_run(pool: HandlePool<Tag>, threads: usize, run_for: Duration) {
    let deadline = Instant::now() + run_for;
    let outcomes: Vec<Outcome> = common::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || worker(pool, t, deadline))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Quiescent now: len is exact and iter yields exactly the live set.
    let mut expected: HashMap<Handle, (usize, u64)> = HashMap::new();
    for (t, outcome) in outcomes.iter().enumerate() {
        for &(h, n) in &outcome.live {
            assert!(expected.insert(h, (t, n)).is_none(), "{h:?} owned twice");
        }
    }
    assert_eq!(pool.len(), expected.len());
    let guard = pin();
    let mut seen = 0;
    for (h, v) in pool.iter(&guard) {
        let &(t, n) = expected.get(&h).expect("iter yields a handle nobody owns");
        assert!(v.is(t, n), "iter: {h:?} gave {v:?}");
        seen += 1;
    }
    assert_eq!(seen, expected.len(), "iter yields every live value once");
    for outcome in &outcomes {
        for &h in &outcome.removed {
            assert!(!pool.contains(h));
        }
    }
    let ops: u64 = outcomes.iter().map(|o| o.ops).sum();
    let removed: usize = outcomes.iter().map(|o| o.removed.len()).sum();
    eprintln!(
        "{threads} threads: {ops} ops, {removed} removes, {} live, capacity {}",
        expected.len(),
        pool.capacity()
    );
    assert!(ops > 0);
}

/// Small buckets, two stripes, short batches and a low generation limit:
/// growth, reuse, stealing between stripes and retirement all happen often.
fn small_config() -> Config {
    Config {
        first_bucket_shift: 1,
        max_generation: 16,
        stripes: 2,
        fresh_block: 2,
        batch: 2,
        ..Config::default()
    }
}

fn ownership(threads: usize, run_for: Duration) {
    ownership_run(HandlePool::new(), threads, run_for);
    ownership_run(HandlePool::with_config(small_config()), threads, run_for);
}

#[test]
fn ownership_2_threads() {
    let _serial = serial();
    ownership(2, Duration::from_millis(300));
}

#[test]
fn ownership_4_threads() {
    let _serial = serial();
    ownership(4, Duration::from_millis(300));
}

#[test]
fn ownership_8_threads() {
    let _serial = serial();
    ownership(8, Duration::from_millis(300));
}

#[test]
#[ignore = "long stress: cargo test --release --test concurrency stress:: -- --ignored"]
fn ownership_long() {
    let _serial = serial();
    for threads in [2, 4, 8, 16] {
        ownership(threads, Duration::from_secs(5));
    }
}

/// Every thread tries to remove every handle of a round: exactly one
/// remove per handle succeeds.
fn double_remove_race(threads: usize, rounds: usize, per_round: usize, config: Config) {
    let pool: HandlePool<Tag> = HandlePool::with_config(config);
    let batch: Lock<Vec<Handle>> = Lock::new(Vec::new());
    let wins: Vec<AtomicUsize> = (0..per_round).map(|_| AtomicUsize::new(0)).collect();
    let start = StartLine::new(threads + 1);
    let done = StartLine::new(threads + 1);
    common::scope(|s| {
        for t in 0..threads {
            let (pool, batch, wins, start, done) = (&pool, &batch, &wins, &start, &done);
            s.spawn(move || {
                for _ in 0..rounds {
                    start.wait();
                    let handles = batch.lock().clone();
                    // Different threads walk the batch in different orders.
                    let order: Vec<usize> = if t % 2 == 0 {
                        (0..handles.len()).collect()
                    } else {
                        (0..handles.len()).rev().collect()
                    };
                    for i in order {
                        if pool.remove(handles[i]) {
                            wins[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    done.wait();
                }
            });
        }
        for round in 0..rounds {
            let handles: Vec<Handle> = (0..per_round)
                .map(|i| pool.insert(Tag::new(round, i as u64)))
                .collect();
            *batch.lock() = handles.clone();
            start.wait();
            done.wait();
            for (i, win) in wins.iter().enumerate() {
                assert_eq!(
                    win.swap(0, Ordering::Relaxed),
                    1,
                    "round {round}: handle {i} removed by {} threads",
                    threads
                );
            }
            assert!(pool.is_empty(), "round {round}");
            for h in handles {
                assert!(!pool.contains(h));
            }
        }
    });
}

#[test]
fn double_remove_exactly_one_wins_2_threads() {
    let _serial = serial();
    double_remove_race(2, 200, 32, Config::default());
}

#[test]
fn double_remove_exactly_one_wins_4_threads() {
    let _serial = serial();
    double_remove_race(4, 150, 32, small_config());
}

#[test]
fn double_remove_exactly_one_wins_8_threads() {
    let _serial = serial();
    double_remove_race(8, 100, 32, small_config());
}

/// Inserts, retrying while a small pool is full (each try reclaims what no
/// reader holds back; the pins and flushes between tries touch only
/// crossbeam-epoch's own state); gives up after a few seconds.
fn insert_retrying(pool: &HandlePool<Tag>, thread: usize, n: u64) -> Handle {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match pool.try_insert(Tag::new(thread, n)) {
            Ok(h) => return h,
            Err(_) if Instant::now() < deadline => {
                pin().flush();
                thread::yield_now();
            }
            Err(_) => panic!("the pool stayed full for 10 s"),
        }
    }
}

/// A reader holds `&T` under a guard while another thread removes the value
/// and churns the pool: the reference keeps reading the right value, and
/// the slot is not reused while the guard lives.
///
/// The two sides talk over channels: if either panics, its ends are dropped
/// and the other stops waiting instead of hanging.
fn reader_across_remove(config: Config, rounds: usize) {
    const PATIENCE: Duration = Duration::from_secs(20);
    let pool: HandlePool<Tag> = HandlePool::with_config(config);
    let mut reused_while_pinned = 0;
    common::scope(|s| {
        let (to_reader, from_main) = mpsc::channel::<(Handle, u64)>();
        let (resume_reader, resumed) = mpsc::channel::<()>();
        let (to_main, from_reader) = mpsc::channel::<()>();
        let pool = &pool;
        s.spawn(move || {
            while let Ok((h, n)) = from_main.recv() {
                let guard = pin();
                let value = pool.get(h, &guard).expect("live");
                assert!(value.is(0, n));
                // Holding the reference: let the main thread remove it.
                if to_main.send(()).is_err() || resumed.recv().is_err() {
                    return;
                }
                assert!(value.is(0, n), "the reference changed: {value:?}");
                assert!(pool.get(h, &guard).is_none());
                drop(guard);
                if to_main.send(()).is_err() {
                    return;
                }
            }
        });
        for round in 0..rounds {
            let n = round as u64;
            let h = insert_retrying(pool, 0, n);
            to_reader.send((h, n)).unwrap();
            from_reader.recv_timeout(PATIENCE).expect("reader gone");
            assert!(pool.remove(h));
            // Churn, trying to get the removed slot reused.
            for i in 0..64 {
                if let Ok(other) = pool.try_insert(Tag::new(1, i)) {
                    if other.index() == h.index() {
                        reused_while_pinned += 1;
                    }
                    assert!(pool.remove(other));
                }
                pin().flush();
            }
            resume_reader.send(()).unwrap();
            from_reader.recv_timeout(PATIENCE).expect("reader gone");
        }
    });
    assert_eq!(
        reused_while_pinned, 0,
        "a slot was reused while a reader held a reference into it"
    );
    assert!(pool.is_empty());
}

#[test]
fn reader_keeps_its_value_across_a_remove() {
    let _serial = serial();
    reader_across_remove(Config::default(), 200);
}

#[test]
fn reader_keeps_its_value_across_a_remove_with_eager_batches() {
    let _serial = serial();
    // Batches of one, four slots in all: every remove seals its batch at
    // once, and the churn would reuse the slot at once if it could.
    reader_across_remove(
        Config {
            first_bucket_shift: 0,
            max_slots: 4,
            stripes: 1,
            fresh_block: 1,
            batch: 1,
            ..Config::default()
        },
        200,
    );
}

/// 8 threads of insert/remove pairs, each with at most 64 values live: the
/// pool must keep reusing slots instead of growing.
fn churn_capacity(threads: usize, pairs_per_thread: usize) -> usize {
    const WINDOW: usize = 64;
    let start = Instant::now();
    let (capacity, _) = common::churn(threads, pairs_per_thread, WINDOW, true);
    eprintln!(
        "churn: {threads} threads x {pairs_per_thread} pairs in {:?}: capacity {capacity} slots \
         (at most {} live)",
        start.elapsed(),
        threads * WINDOW
    );
    capacity
}

/// 8 threads of insert/remove pairs with at most 64 values live each: the
/// pool must keep reusing slots. How far capacity grows depends on the
/// scheduler: a thread preempted in the middle of a read holds every reuse
/// back, so on a loaded 2-core machine this run reached 16_320 to 131_008
/// slots when reclamation went through crossbeam-epoch (capacity grows in
/// doubling buckets: …, 65_472, 131_008, 262_080, 524_224). The
/// strict bound is the ignored `churn_keeps_capacity_bounded_long`; here
/// assert that slots are reused at all (without reuse 1.2 M pairs would need
/// 1.2 M slots) and print the figure.
#[test]
fn churn_reuses_slots() {
    let _serial = serial();
    let capacity = churn_capacity(8, 150_000);
    assert!(capacity < 512 * 1024, "capacity reached {capacity} slots");
}

/// Capacity stays far below 64 Ki slots for at most 64 live values per
/// thread, also with threads outnumbering cores, where a thread preempted
/// in the middle of a read holds reclamation back for everyone: inserts
/// that find reclamation behind yield until it runs again (see
/// `handle_pool::design`).
/// On the 2-core machine (release, 2026-11-23), 32 threads x 2 M pairs
/// ended at 16,320, 20,416 and 24,512 slots; before the inserts yielded
/// long enough, at 196,544 to 393,152; with quiet-stripe transfers, 6,080
/// (the same run on the commit before: 14,272).
#[test]
#[ignore = "long stress: cargo test --release --test concurrency stress:: -- --ignored"]
fn churn_keeps_capacity_bounded_long() {
    let _serial = serial();
    for threads in [2, 8, 32] {
        let capacity = churn_capacity(threads, 2_000_000);
        eprintln!("threads {threads}: capacity {capacity}");
        assert!(capacity < 64 * 1024, "capacity reached {capacity} slots");
    }
}
