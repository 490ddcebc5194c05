//! Workloads shared by the criterion bench (`benches/pool.rs`) and the report
//! generator (`src/bin/bench_report.rs`).
//!
//! Every workload runs its threads on a [`Barrier`]; each thread takes its
//! start time when it leaves the barrier and its end time when its timed loop
//! ends, and a run's time is the whole parallel section: the latest end minus
//! the earliest start. Random inputs (key sequences, operation mixes) are
//! generated before the barrier, with a seeded [`fastrand::Rng`], so every
//! run draws the same inputs.

#![allow(dead_code)] // each of the two users uses part of the module

pub mod adapters;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

pub use adapters::{for_each_pool, Pool, PoolVisitor, Session, REPIN_EVERY};

/// One timed run of a workload.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Wall time of the parallel section.
    pub elapsed: Duration,
    /// Operations done (lookups, inserts, or insert+remove pairs for churn).
    pub ops: u64,
    /// The pool's capacity at the end of the run, if it exposes one.
    pub capacity: Option<usize>,
    /// The largest number of live values at any moment (an upper bound for
    /// `mixed`), for the workloads that record memory.
    pub peak_live: Option<u64>,
}

impl Sample {
    /// Throughput in millions of operations per second.
    pub fn mops(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

/// Start and end times of one thread's timed section.
pub struct Clock<'b> {
    barrier: &'b Barrier,
    start: Option<Instant>,
    end: Option<Instant>,
}

impl Clock<'_> {
    /// Waits for every thread, then starts this thread's clock.
    #[inline]
    pub fn start(&mut self) {
        self.barrier.wait();
        self.start = Some(Instant::now());
    }

    /// Stops this thread's clock.
    #[inline]
    pub fn stop(&mut self) {
        self.end = Some(Instant::now());
    }
}

/// Calls [`Session::quiesce`] once `done`, the operations this thread has
/// done so far, reaches a multiple of [`REPIN_EVERY`]. `done` is a local of
/// the workload's loop, so the count costs a register, as it would in a
/// worker's loop; a count kept in the session would live in memory (the
/// session's address escapes into the re-pin call) and put a store-to-load
/// dependency into every operation of the guard-holding rows.
#[inline(always)]
fn quiesce_every_repin<S: Session>(s: &mut S, done: u64) {
    if done % REPIN_EVERY == 0 {
        s.quiesce();
    }
}

/// Runs `body` on one thread per input, each inside its own session, and
/// returns the time from the earliest [`Clock::start`] to the latest
/// [`Clock::stop`], with the bodies' outputs in input order.
pub fn parallel<P, I, O>(
    pool: &P,
    inputs: Vec<I>,
    body: impl Fn(&mut P::Session<'_>, I, &mut Clock<'_>) -> O + Sync,
) -> (Duration, Vec<O>)
where
    P: Pool,
    I: Send,
    O: Send,
{
    assert!(
        !(P::SINGLE_THREAD && inputs.len() > 1),
        "{} runs on one thread only",
        P::NAME
    );
    let barrier = Barrier::new(inputs.len());
    let results: Vec<(Instant, Instant, O)> = std::thread::scope(|scope| {
        let handles: Vec<_> = inputs
            .into_iter()
            .map(|input| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    pool.session(|session| {
                        let mut clock = Clock {
                            barrier,
                            start: None,
                            end: None,
                        };
                        let out = body(session, input, &mut clock);
                        let start = clock.start.expect("the body starts its clock");
                        let end = clock.end.expect("the body stops its clock");
                        (start, end, out)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let start = results
        .iter()
        .map(|r| r.0)
        .min()
        .expect("at least one thread");
    let end = results
        .iter()
        .map(|r| r.1)
        .max()
        .expect("at least one thread");
    (end - start, results.into_iter().map(|r| r.2).collect())
}

/// Inserts `n` values from the calling thread and returns their keys.
pub fn prefill<P: Pool>(pool: &P, n: usize) -> Vec<P::Key> {
    pool.session(|s| (0..n as u64).map(|i| s.insert(i)).collect())
}

// ---------------------------------------------------------------- get / hot

/// Longest precomputed key sequence per thread; longer runs repeat it.
const SEQUENCE_MAX: usize = 1 << 18;

/// A prefilled pool and, per thread, a random sequence of its live keys.
pub struct GetFixture<P: Pool> {
    pool: P,
    sequences: Vec<Vec<P::Key>>,
    /// How many times each thread walks its sequence.
    repeats: usize,
    /// Sum of the values each thread must find.
    expected: Vec<u64>,
}

impl<P: Pool> GetFixture<P> {
    /// `entries` prefilled values; `total_ops` lookups split evenly over
    /// `threads`, drawn uniformly from the first `distinct` values (`hot`: 16).
    /// Each thread walks a precomputed sequence of at most `SEQUENCE_MAX`
    /// keys, repeated as often as needed.
    pub fn new(entries: usize, distinct: usize, threads: usize, total_ops: usize) -> Self {
        let pool = P::create(entries);
        let keys = prefill(&pool, entries);
        let distinct = distinct.min(entries);
        let per_thread = (total_ops / threads).max(1);
        let len = per_thread.min(SEQUENCE_MAX);
        let repeats = per_thread.div_ceil(len);
        let mut sequences = Vec::with_capacity(threads);
        let mut expected = Vec::with_capacity(threads);
        for t in 0..threads {
            let mut rng = fastrand::Rng::with_seed(0x6E7 + t as u64);
            let mut sum = 0u64;
            let seq: Vec<P::Key> = (0..len)
                .map(|_| {
                    // Values were inserted as 0..entries, in key order.
                    let i = rng.usize(..distinct);
                    sum = sum.wrapping_add(i as u64);
                    keys[i]
                })
                .collect();
            sequences.push(seq);
            expected.push(sum.wrapping_mul(repeats as u64));
        }
        GetFixture {
            pool,
            sequences,
            repeats,
            expected,
        }
    }

    /// Lookups one [`run`](Self::run) does.
    pub fn ops(&self) -> u64 {
        self.sequences.iter().map(|s| s.len() as u64).sum::<u64>() * self.repeats as u64
    }

    /// One timed run: every thread looks up its sequence, `repeats` times,
    /// with [`Session::get`].
    pub fn run(&self) -> Sample {
        // A miss adds u64::MAX, so any miss breaks the checksum.
        self.run_lookups(|s, key| s.get(key).unwrap_or(u64::MAX), &self.expected)
    }

    /// One timed run as [`run`](Self::run), with [`Session::contains`].
    pub fn run_contains(&self) -> Sample {
        let hits: Vec<u64> = self
            .sequences
            .iter()
            .map(|seq| seq.len() as u64 * self.repeats as u64)
            .collect();
        self.run_lookups(|s, key| u64::from(s.contains(key)), &hits)
    }

    /// Every thread sums `lookup` over its sequence, `repeats` times; the
    /// sums must be `expected`.
    #[inline(always)]
    fn run_lookups(
        &self,
        lookup: impl Fn(&mut P::Session<'_>, P::Key) -> u64 + Sync,
        expected: &[u64],
    ) -> Sample {
        let inputs: Vec<&[P::Key]> = self.sequences.iter().map(|s| s.as_slice()).collect();
        let repeats = self.repeats;
        let (elapsed, sums) = parallel(&self.pool, inputs, |s, seq, clock| {
            clock.start();
            let mut sum = 0u64;
            for _ in 0..repeats {
                // Chunks, as a worker re-pinning between batches writes it:
                // no per-lookup count or branch, which at a few nanoseconds
                // a lookup would be a tenth of the guard-holding rows' time.
                for chunk in seq.chunks(REPIN_EVERY as usize) {
                    for &key in chunk {
                        sum = sum.wrapping_add(lookup(s, key));
                    }
                    s.quiesce();
                }
            }
            clock.stop();
            black_box(sum)
        });
        assert_eq!(sums, expected, "{}: lookups of live keys failed", P::NAME);
        Sample {
            elapsed,
            ops: self.ops(),
            capacity: None,
            peak_live: None,
        }
    }
}

// ---------------------------------------------------------------- churn

/// `churn`: every thread inserts then removes; `total_pairs` split evenly
/// over the threads. Counts pairs.
pub fn churn<P: Pool>(threads: usize, total_pairs: usize) -> Sample {
    let pairs = (total_pairs / threads).max(1);
    let pool = P::create(threads * pairs);
    let (elapsed, ok) = parallel(&pool, vec![(); threads], |s, (), clock| {
        clock.start();
        let mut ok = true;
        for i in 0..pairs as u64 {
            let key = s.insert(i);
            ok &= s.remove(key);
            quiesce_every_repin(s, 2 * (i + 1));
        }
        clock.stop();
        ok
    });
    assert!(ok.iter().all(|&ok| ok), "{}: churn remove failed", P::NAME);
    Sample {
        elapsed,
        ops: (threads * pairs) as u64,
        capacity: pool.capacity(),
        peak_live: Some(threads as u64),
    }
}

/// The live window per thread in `churn_window64`.
pub const WINDOW: usize = 64;

/// `churn_window64`: every thread keeps its last [`WINDOW`] values live;
/// each step inserts a new value and removes the oldest; `total_steps` split
/// evenly over the threads. Counts steps (pairs).
pub fn churn_window<P: Pool>(threads: usize, total_steps: usize) -> Sample {
    let steps = (total_steps / threads).max(1);
    let pool = P::create(threads * (steps + WINDOW));
    let (elapsed, ok) = parallel(&pool, vec![(); threads], |s, (), clock| {
        let mut window: Vec<P::Key> = (0..WINDOW as u64).map(|i| s.insert(i)).collect();
        clock.start();
        let mut ok = true;
        let mut oldest = 0;
        for i in 0..steps as u64 {
            let key = s.insert(i);
            ok &= s.remove(window[oldest]);
            window[oldest] = key;
            oldest = (oldest + 1) % WINDOW;
            quiesce_every_repin(s, 2 * (i + 1));
        }
        clock.stop();
        ok
    });
    assert!(ok.iter().all(|&ok| ok), "{}: window remove failed", P::NAME);
    Sample {
        elapsed,
        ops: (threads * steps) as u64,
        capacity: pool.capacity(),
        // Each thread holds WINDOW values, and one more between its insert and remove.
        peak_live: Some((threads * (WINDOW + 1)) as u64),
    }
}

// ---------------------------------------------------------------- mixed

const OP_GET: u32 = 0;
const OP_INSERT: u32 = 1;
const OP_REMOVE: u32 = 2;

/// `mixed`'s inputs: a prefilled pool, the shared handle array and, per
/// thread, the operations (`index << 2 | op`).
pub struct MixedFixture<P: Pool> {
    pool: P,
    shared: Vec<AtomicU64>,
    programs: Vec<Vec<u32>>,
}

impl<P: Pool> MixedFixture<P> {
    /// `entries` prefilled values; `total_ops` operations split evenly over
    /// the threads: 90% get, 5% insert, 5% remove, each on a random entry of
    /// the shared array.
    pub fn new(entries: usize, threads: usize, total_ops: usize) -> Self {
        let ops_per_thread = (total_ops / threads).max(1);
        let pool = P::create(entries + threads * ops_per_thread);
        let keys = prefill(&pool, entries);
        let shared = keys
            .into_iter()
            .map(|k| AtomicU64::new(P::key_to_bits(k)))
            .collect();
        let programs = (0..threads)
            .map(|t| {
                let mut rng = fastrand::Rng::with_seed(0x313 + t as u64);
                (0..ops_per_thread)
                    .map(|_| {
                        let op = match rng.u32(..100) {
                            0..=89 => OP_GET,
                            90..=94 => OP_INSERT,
                            _ => OP_REMOVE,
                        };
                        ((rng.usize(..entries) as u32) << 2) | op
                    })
                    .collect()
            })
            .collect();
        MixedFixture {
            pool,
            shared,
            programs,
        }
    }

    /// The one timed run this fixture allows (it consumes the fixture).
    ///
    /// An insert stores its new key into the array at its random position
    /// (the key it overwrites, if still live, stays in the pool unreachable);
    /// a remove removes whatever key is at its position; gets and removes may
    /// therefore meet stale keys.
    pub fn run(self) -> Sample {
        let entries = self.shared.len() as u64;
        let shared = &self.shared;
        let inputs: Vec<&[u32]> = self.programs.iter().map(|p| p.as_slice()).collect();
        let (elapsed, peaks) = parallel(&self.pool, inputs, |s, program, clock| {
            clock.start();
            let mut sum = 0u64;
            // Running count of this thread's inserts minus its successful
            // removes, and its maximum: summed over threads, an upper bound
            // on how far the live count rose above the prefill.
            let (mut delta, mut peak) = (0i64, 0i64);
            for (i, &word) in program.iter().enumerate() {
                let slot = &shared[(word >> 2) as usize];
                match word & 3 {
                    OP_GET => {
                        let key = P::key_from_bits(slot.load(Ordering::Relaxed));
                        sum = sum.wrapping_add(s.get(key).unwrap_or(1));
                    }
                    OP_INSERT => {
                        let key = s.insert(i as u64);
                        slot.store(P::key_to_bits(key), Ordering::Relaxed);
                        delta += 1;
                        peak = peak.max(delta);
                    }
                    _ => {
                        let key = P::key_from_bits(slot.load(Ordering::Relaxed));
                        delta -= s.remove(key) as i64;
                    }
                }
                quiesce_every_repin(s, i as u64 + 1);
            }
            clock.stop();
            black_box(sum);
            peak
        });
        let capacity = self.pool.capacity();
        Sample {
            elapsed,
            ops: self.programs.iter().map(|p| p.len() as u64).sum(),
            capacity,
            peak_live: Some(entries + peaks.iter().sum::<i64>() as u64),
        }
    }
}

// ---------------------------------------------------------------- insert

/// `insert`: an empty pool grows to `total` values, inserted by `threads`
/// threads in equal shares.
pub fn insert<P: Pool>(threads: usize, total: usize) -> Sample {
    let pool = P::create(total);
    let per_thread = (total / threads).max(1);
    let (elapsed, _) = parallel(&pool, vec![(); threads], |s, (), clock| {
        clock.start();
        for i in 0..per_thread as u64 {
            black_box(s.insert(i));
            quiesce_every_repin(s, i + 1);
        }
        clock.stop();
    });
    let sample = Sample {
        elapsed,
        ops: (per_thread * threads) as u64,
        capacity: pool.capacity(),
        peak_live: None,
    };
    // Dropping a full pool takes a while; keep it out of the caller's loop
    // timing as well as the sample.
    drop(pool);
    sample
}

// ---------------------------------------------------------------- the matrix

/// The workloads, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Random lookups of live keys in a prefilled pool of this many entries.
    Get(usize),
    /// As `Get`, each lookup a membership test (`contains`).
    Contains(usize),
    /// Insert then remove, per thread.
    Churn,
    /// Insert new, remove oldest, 64 live per thread.
    ChurnWindow64,
    /// 90% get, 5% insert, 5% remove on a shared array of 100k handles.
    Mixed,
    /// Insert-only growth from empty to 1M values.
    Insert,
    /// Every thread looks up the same 16 handles.
    Hot,
}

/// Entries prefilled for `mixed`.
pub const MIXED_ENTRIES: usize = 100_000;
/// Values inserted in `insert`.
pub const INSERT_TOTAL: usize = 1_000_000;
/// Handles looked up in `hot`.
pub const HOT_KEYS: usize = 16;

impl Workload {
    /// Short id (bench group names, chart titles).
    pub fn id(self) -> String {
        match self {
            Workload::Get(n) => format!("get_{}", size_label(n)),
            Workload::Contains(n) => format!("contains_{}", size_label(n)),
            Workload::Churn => "churn".into(),
            Workload::ChurnWindow64 => "churn_window64".into(),
            Workload::Mixed => "mixed".into(),
            Workload::Insert => "insert".into(),
            Workload::Hot => "hot".into(),
        }
    }

    /// What one operation is.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Churn | Workload::ChurnWindow64 => "insert+remove pairs",
            Workload::Insert => "inserts",
            Workload::Mixed => "operations",
            Workload::Get(_) | Workload::Contains(_) | Workload::Hot => "lookups",
        }
    }

    /// Whether capacity and peak live count are recorded.
    pub fn records_memory(self) -> bool {
        matches!(
            self,
            Workload::Churn | Workload::ChurnWindow64 | Workload::Mixed
        )
    }

    /// A one-line description for reports.
    pub fn describe(self) -> String {
        match self {
            Workload::Get(n) => format!(
                "{} prefilled entries; each thread looks up a precomputed random sequence of live keys",
                size_label(n)
            ),
            Workload::Contains(n) => format!(
                "as get_{}, each lookup a membership test: the pool's own `contains` (`contains_key`), or a get where it has none (concurrent-slotmap)",
                size_label(n)
            ),
            Workload::Churn => "each thread inserts a value and removes it again".into(),
            Workload::ChurnWindow64 => {
                "each thread keeps a window of 64 live values: insert new, remove oldest".into()
            }
            Workload::Mixed => "100k prefilled entries in a shared key array; 90% get, 5% insert (stores its key at a random position), 5% remove (random position; may be stale)".into(),
            Workload::Insert => "empty pool grows to 1M values, inserts split evenly over the threads".into(),
            Workload::Hot => "every thread looks up the same 16 keys (100k-entry pool)".into(),
        }
    }
}

/// `100k`, `1M`.
pub fn size_label(n: usize) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n % 1000 == 0 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// Sizes of one run per workload: operations in total, split evenly over
/// the threads, so a run's work does not depend on the thread count.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Lookups in `get` and `hot`.
    pub get_ops: usize,
    /// Insert+remove pairs in `churn` and `churn_window64`.
    pub churn_pairs: usize,
    /// Operations in `mixed`.
    pub mixed_ops: usize,
    /// Inserts in `insert`.
    pub insert_total: usize,
}

impl Scale {
    /// The full sizes.
    pub const FULL: Scale = Scale {
        get_ops: 8_000_000,
        churn_pairs: 4_000_000,
        mixed_ops: 4_000_000,
        insert_total: INSERT_TOTAL,
    };

    /// The sizes of the quick modes.
    pub const QUICK: Scale = Scale {
        get_ops: 2_000_000,
        churn_pairs: 1_000_000,
        mixed_ops: 1_000_000,
        insert_total: INSERT_TOTAL / 4,
    };
}

/// Operations one run of `workload` does with `threads` threads (the
/// throughput unit criterion is given).
pub fn ops_per_run(workload: Workload, threads: usize, scale: Scale) -> u64 {
    let split = |total: usize| ((total / threads).max(1) * threads) as u64;
    match workload {
        Workload::Get(_) | Workload::Contains(_) | Workload::Hot => {
            let per_thread = (scale.get_ops / threads).max(1);
            let len = per_thread.min(SEQUENCE_MAX);
            (len * per_thread.div_ceil(len) * threads) as u64
        }
        Workload::Churn | Workload::ChurnWindow64 => split(scale.churn_pairs),
        Workload::Mixed => split(scale.mixed_ops),
        Workload::Insert => split(scale.insert_total),
    }
}

/// One complete, freshly set-up run of `workload` for pool `P`. (The
/// criterion bench reuses `get` fixtures across iterations instead.)
pub fn run_once<P: Pool>(workload: Workload, threads: usize, scale: Scale) -> Sample {
    match workload {
        Workload::Get(n) => GetFixture::<P>::new(n, n, threads, scale.get_ops).run(),
        Workload::Contains(n) => GetFixture::<P>::new(n, n, threads, scale.get_ops).run_contains(),
        Workload::Hot => {
            GetFixture::<P>::new(MIXED_ENTRIES, HOT_KEYS, threads, scale.get_ops).run()
        }
        Workload::Churn => churn::<P>(threads, scale.churn_pairs),
        Workload::ChurnWindow64 => churn_window::<P>(threads, scale.churn_pairs),
        Workload::Mixed => MixedFixture::<P>::new(MIXED_ENTRIES, threads, scale.mixed_ops).run(),
        Workload::Insert => insert::<P>(threads, scale.insert_total),
    }
}

/// One pool type, as plain data and a monomorphised runner.
#[derive(Clone, Copy)]
pub struct PoolEntry {
    /// [`Pool::NAME`].
    pub name: &'static str,
    /// [`Pool::SINGLE_THREAD`].
    pub single_thread: bool,
    /// [`Pool::IS_HANDLE_POOL`].
    pub is_handle_pool: bool,
    /// [`run_once`] for this pool.
    pub run: fn(Workload, usize, Scale) -> Sample,
}

/// Every pool, in report order.
pub fn pool_table() -> Vec<PoolEntry> {
    struct Collect(Vec<PoolEntry>);
    impl PoolVisitor for Collect {
        fn visit<P: Pool>(&mut self) {
            self.0.push(PoolEntry {
                name: P::NAME,
                single_thread: P::SINGLE_THREAD,
                is_handle_pool: P::IS_HANDLE_POOL,
                run: run_once::<P>,
            });
        }
    }
    let mut collect = Collect(Vec::new());
    for_each_pool(&mut collect);
    collect.0
}
