//! Tools the integration tests share: values that count their drops, the
//! small pool configurations, one deterministic generator, a thread that
//! holds reclamation back with a guard, the operation strategy of the model
//! tests, a panic hook that keeps expected panics quiet, and thread
//! plumbing (a scope, a start line, a lock) that ThreadSanitizer can see.
//! Each test binary (`tests/<binary>.rs`) includes this once with
//! `mod common;`; its modules (`tests/<binary>/<module>.rs`) use it as
//! `crate::common`.

// Each test binary uses only some of these tools.
#![allow(dead_code)]

use std::any::Any;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::panic;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Once};
use std::thread;

use handle_pool::{pin, Config, Handle, HandlePool};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Values that count their drops.

/// Counts the [`Counted`] values made from it that are still alive.
#[derive(Debug, Default)]
pub struct Alive(Arc<()>);

/// One live value of an [`Alive`] count; a clone counts as another value.
#[derive(Clone, Debug)]
pub struct Counted(Arc<()>);

impl Alive {
    pub fn new() -> Self {
        Alive::default()
    }

    /// A new value, alive until dropped.
    pub fn value(&self) -> Counted {
        Counted(Arc::clone(&self.0))
    }

    /// `n` new values.
    pub fn values(&self, n: usize) -> impl Iterator<Item = Counted> + '_ {
        (0..n).map(|_| self.value())
    }

    /// How many values are alive.
    pub fn count(&self) -> usize {
        Arc::strong_count(&self.0) - 1
    }
}

/// Per-id drop counters shared by the [`Tracked`] values of one test.
pub struct Log {
    drops: Vec<AtomicU32>,
}

impl Log {
    /// Counters for the ids `0..n`.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Log {
            drops: (0..n).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// How many ids the log counts.
    pub fn len(&self) -> usize {
        self.drops.len()
    }

    /// How many times the value with this id was dropped.
    pub fn count(&self, id: usize) -> u32 {
        self.drops[id].load(Ordering::SeqCst)
    }

    /// How many ids were dropped at least once.
    pub fn dropped(&self) -> usize {
        (0..self.len()).filter(|&i| self.count(i) > 0).count()
    }

    /// Asserts no value was dropped twice, and returns how many were dropped.
    pub fn check_at_most_once(&self) -> usize {
        for id in 0..self.len() {
            assert!(
                self.count(id) <= 1,
                "value {id} dropped {} times",
                self.count(id)
            );
        }
        self.dropped()
    }

    pub fn assert_all_once(&self) {
        for id in 0..self.len() {
            assert_eq!(self.count(id), 1, "value {id}");
        }
    }

    pub fn assert_none(&self) {
        assert_eq!(self.dropped(), 0, "no value should be dropped yet");
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Log({} dropped)", self.dropped())
    }
}

/// A value that records its drop in a [`Log`] and, if asked to, panics in
/// `Drop`.
#[derive(Debug)]
pub struct Tracked {
    pub id: usize,
    pub log: Arc<Log>,
    panics: bool,
}

impl Tracked {
    pub fn new(id: usize, log: &Arc<Log>) -> Self {
        Tracked {
            id,
            log: Arc::clone(log),
            panics: false,
        }
    }

    pub fn panicking(id: usize, log: &Arc<Log>) -> Self {
        let mut value = Tracked::new(id, log);
        value.panics = true;
        value
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.log.drops[self.id].fetch_add(1, Ordering::SeqCst);
        if self.panics {
            panic!("Tracked {} panics in drop", self.id);
        }
    }
}

/// An iterator whose `size_hint` claims an exact length it does not have.
pub struct Lying {
    pub claimed: usize,
    pub actual: std::ops::Range<u32>,
}

impl Iterator for Lying {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        self.actual.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.claimed, Some(self.claimed))
    }
}

// ---------------------------------------------------------------------------
// Pool configurations.

/// The default pool with removals retired in batches of `batch`.
pub fn with_batch(batch: u32) -> Config {
    Config {
        batch,
        ..Config::default()
    }
}

/// One stripe, single fresh slots, buckets of 1, 2, 4…: reuse order is easy
/// to predict.
pub fn predictable(max_generation: u32, max_slots: u32, batch: u32) -> Config {
    Config {
        max_slots,
        ..Config::tiny(max_generation, batch)
    }
}

/// Like [`predictable`], with two stripes handing out fresh slots two at a
/// time: slots move between stripes.
pub fn striped(max_generation: u32, max_slots: u32, batch: u32) -> Config {
    Config {
        stripes: 2,
        fresh_block: 2,
        ..predictable(max_generation, max_slots, batch)
    }
}

// ---------------------------------------------------------------------------
// A deterministic generator.

/// xorshift64*: a small deterministic generator (one per thread).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

// ---------------------------------------------------------------------------
// A thread that holds reclamation back.

/// A thread holding a guard from [`PinnedThread::start`] until
/// [`PinnedThread::release`]: no removal made in between can be reclaimed,
/// in any pool.
pub struct PinnedThread {
    release: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl PinnedThread {
    /// Starts the thread and returns once it is pinned.
    pub fn start() -> Self {
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let guard = pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        });
        pinned_rx.recv().unwrap();
        PinnedThread { release, thread }
    }

    /// Unpins the thread and waits for it to end.
    pub fn release(self) {
        self.release.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

// ---------------------------------------------------------------------------
// A test alone in its own process.

/// Runs `scenario` in a child process where no other test runs: this test
/// binary, re-executed on the one test `name` with `--test-threads=1`.
/// `module` is the caller's `module_path!()` and `name` its test function's
/// name; together they make the name libtest knows the test by (the module
/// path without the binary's name), as `--exact` needs it.
///
/// In the child, `scenario` runs as the test's body: a panic fails the
/// test, and with it the child. In the parent, this waits for the child
/// and fails, with the child's output, unless the child ran exactly that
/// test and it passed. For tests whose outcome another test of the same
/// binary could change: reclamation is process-wide, so a guard held by
/// any test holds back every pool's batches sealed after it was pinned; or
/// whose process is spoiled afterwards (a forgotten guard, a mapping limit
/// nearly spent, a fork).
pub fn in_child_process(module: &str, name: &str, scenario: impl FnOnce()) {
    const KEY: &str = "HANDLE_POOL_TEST_IN_CHILD";
    let test = match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    };
    if std::env::var(KEY).as_deref() == Ok(test.as_str()) {
        scenario();
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test, "--test-threads=1", "--nocapture"])
        .env(KEY, &test)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} failed in its child process ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------
// The operation strategy of the model tests.

/// Where a forged handle's bits come from.
#[derive(Clone, Debug)]
pub enum Bits {
    /// Anything at all, or a small index and generation.
    Raw(u64),
    /// A handle the side issued (the `pick`th, among the live ones or among
    /// all), with its index and generation nudged by -1, 0 or +1: often a
    /// live, stale or future handle.
    Near {
        live: bool,
        pick: usize,
        index: i8,
        generation: i8,
    },
}

/// A handle made with `Handle::from_bits`.
#[derive(Clone, Debug)]
pub struct Forged {
    pub bits: Bits,
    /// Interpret the bits as a reference-table handle (and map it to the
    /// pool) rather than as a pool handle.
    pub on_table: bool,
}

impl Forged {
    /// The forged handle, given the handles of the side it is forged on:
    /// those live now and all it ever issued. `None` when the bits need a
    /// handle the side does not have, or are no valid handle.
    pub fn handle(&self, live: &[Handle], issued: &[Handle]) -> Option<Handle> {
        let bits = match self.bits {
            Bits::Raw(bits) => bits,
            Bits::Near {
                live: from_live,
                pick,
                index,
                generation,
            } => {
                let from = if from_live { live } else { issued };
                if from.is_empty() {
                    return None;
                }
                let base = from[pick % from.len()];
                let index = u64::from(base.index()).checked_add_signed(index.into())?;
                let generation =
                    u64::from(base.generation()).checked_add_signed(generation.into())?;
                (generation << 32) | index
            }
        };
        Handle::from_bits(bits)
    }
}

/// Which handle an operation uses.
#[derive(Clone, Debug)]
pub enum Target {
    /// The live handle at this position (modulo the count).
    Live(usize),
    /// The stale handle at this position (modulo the count).
    Stale(usize),
    Forged(Forged),
}

/// One step of a model test.
#[derive(Clone, Debug)]
pub enum Op {
    Insert,
    TryInsert,
    InsertWith,
    /// `insert_many` of this many values.
    InsertMany(usize),
    Remove(Target),
    RemoveMany(Vec<Target>),
    Lookup(Target),
    Take(Target),
    GetMut(Target, u64),
    IsEmpty,
    Retain(u64),
    Clear,
    Reclaim,
    Iter,
    IterMut,
    Drain(usize),
}

fn nudge() -> impl Strategy<Value = i8> {
    prop_oneof![2 => Just(0i8), 1 => -1i8..=1]
}

fn forged() -> impl Strategy<Value = Forged> {
    let bits = prop_oneof![
        1 => any::<u64>().prop_map(Bits::Raw),
        2 => (0u32..10, 0u32..5)
            .prop_map(|(i, g)| Bits::Raw((u64::from(g) << 32) | u64::from(i))),
        4 => (any::<bool>(), any::<usize>(), nudge(), nudge()).prop_map(
            |(live, pick, index, generation)| Bits::Near {
                live,
                pick,
                index,
                generation
            }
        ),
    ];
    (bits, any::<bool>()).prop_map(|(bits, on_table)| Forged { bits, on_table })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => any::<usize>().prop_map(Target::Live),
        1 => any::<usize>().prop_map(Target::Stale),
        2 => forged().prop_map(Target::Forged),
    ]
}

/// Any operation. `batches` weighs `InsertMany` and `RemoveMany` each, and
/// `reclaims` weighs `Reclaim`, against 31 for the other operations
/// together.
pub fn op(batches: u32, reclaims: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Insert),
        3 => Just(Op::TryInsert),
        2 => Just(Op::InsertWith),
        batches => (0usize..20).prop_map(Op::InsertMany),
        6 => target().prop_map(Op::Remove),
        batches => proptest::collection::vec(target(), 0..20).prop_map(Op::RemoveMany),
        4 => target().prop_map(Op::Lookup),
        3 => target().prop_map(Op::Take),
        1 => (target(), 0u64..1000).prop_map(|(t, d)| Op::GetMut(t, d)),
        1 => Just(Op::IsEmpty),
        1 => (2u64..5).prop_map(Op::Retain),
        1 => Just(Op::Clear),
        reclaims => Just(Op::Reclaim),
        1 => Just(Op::Iter),
        1 => Just(Op::IterMut),
        1 => (0usize..6).prop_map(Op::Drain),
    ]
}

/// The element at position `i` modulo the length, if there is any.
pub fn pick<T: Copy>(list: &[T], i: usize) -> Option<T> {
    (!list.is_empty()).then(|| list[i % list.len()])
}

/// Churn: each of `threads` threads does `pairs` insert→remove pairs,
/// keeping a window of `window` live values (with `check`, each read back
/// with `get_cloned` before its remove), then removes them all. Returns the
/// pool's capacity and slots used afterwards.
pub fn churn(threads: usize, pairs: usize, window: usize, check: bool) -> (usize, usize) {
    let pool: HandlePool<u64> = HandlePool::new();
    scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || churn_on(pool, (t * pairs) as u64, pairs, window, check))
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    });
    (pool.capacity(), pool.slots_used())
}

/// One thread's part of [`churn`]: `pairs` inserts of the values from
/// `first` on, each value removed once `window` more are live (checked
/// first, with a one-call read, if `check`), then the rest removed.
pub fn churn_on(pool: &HandlePool<u64>, first: u64, pairs: usize, window: usize, check: bool) {
    use std::collections::VecDeque;
    let mut live = VecDeque::with_capacity(window);
    for value in (first..).take(pairs) {
        live.push_back((pool.insert(value), value));
        if live.len() == window {
            let (h, v) = live.pop_front().unwrap();
            if check {
                assert_eq!(pool.get_cloned(h), Some(v));
            }
            assert!(pool.remove(h));
        }
    }
    for (h, _) in live {
        assert!(pool.remove(h));
    }
}

// ---------------------------------------------------------------------------
// Expected panics, kept quiet.

/// The messages of the panics kept quiet now, one entry per live
/// [`QuietPanics`].
/// (A [`Lock`], not an std `Mutex`: the hook reads it on whichever thread
/// panics, and ThreadSanitizer sees only the former's synchronisation.)
static QUIET: Lock<Vec<&'static str>> = Lock::new(Vec::new());

/// Keeps quiet, until the returned value is dropped, every panic whose
/// message is exactly `marker`, on any thread: for panics a passing test
/// expects (a test's own values panicking in `Drop`, in a child process
/// that prints its output), so that a passing run prints no panic. Choose a
/// marker no other panic uses. Every other panic goes to the hook that was
/// installed before (the default one, which prints it, into the test's
/// captured output).
///
/// The panic hook is process-wide and tests run at the same time: it is
/// installed once, the first time, and never taken down or replaced, so no
/// test can restore a hook out of order or lose another's markers. A
/// marker counts while any [`QuietPanics`] for it lives.
pub fn quiet_panics(marker: &'static str) -> QuietPanics {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !is_quiet(info.payload()) {
                previous(info);
            }
        }));
    });
    QUIET.lock().push(marker);
    QuietPanics { marker }
}

/// Whether a panic's payload is a message kept quiet now.
fn is_quiet(payload: &(dyn Any + Send)) -> bool {
    let message = match payload.downcast_ref::<&'static str>() {
        Some(message) => Some(*message),
        None => payload.downcast_ref::<String>().map(String::as_str),
    };
    message.is_some_and(|message| QUIET.lock().contains(&message))
}

/// Keeps the panics with its marker quiet while it lives (see
/// [`quiet_panics`]).
#[must_use = "the panics are kept quiet only while this lives"]
pub struct QuietPanics {
    marker: &'static str,
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        let mut quiet = QUIET.lock();
        if let Some(at) = quiet.iter().position(|&m| m == self.marker) {
            quiet.swap_remove(at);
        }
    }
}

// ---------------------------------------------------------------------------
// Thread plumbing that ThreadSanitizer can see.
//
// The sanitizer pass links std uninstrumented (the stable toolchain has no
// rust-src to rebuild it with), so ThreadSanitizer sees none of the
// synchronisation std does in its own compiled code: not the end of
// `std::thread::scope` (a count of running threads and a park), nor
// `std::sync::Barrier`, nor `std::sync::Mutex` (futex words). A test whose
// threads hand data over through those is reported as racing on that data,
// though it does not. What follows is the same plumbing built on atomics
// compiled in the test crate itself, which the sanitizer instruments: what
// a test does through these is synchronised in ThreadSanitizer's eyes too.
// (A `JoinHandle::join`, std's or a scope's, is fine as it is: it ends in
// `pthread_join`, which ThreadSanitizer intercepts.)

/// The threads of one [`scope`] that have ended, for the scope's end to
/// acquire.
#[derive(Default)]
struct Ends {
    spawned: AtomicUsize,
    ended: AtomicUsize,
}

/// Like [`std::thread::scope`], and the end of the scope is visible to
/// ThreadSanitizer: each thread's last act is a `Release` on a count that
/// the scope's end (and each [`ScopedJoinHandle::join`]) reads with
/// `Acquire`, so everything a thread did happens before what follows the
/// scope, for the sanitizer as for the language.
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&Scope<'scope, 'env>) -> T,
{
    let ends = Arc::new(Ends::default());
    let result = thread::scope(|s| {
        f(&Scope {
            inner: s,
            ends: Arc::clone(&ends),
        })
    });
    // Every spawned thread has ended by now (std's scope waited for them);
    // this load is the join ThreadSanitizer sees.
    let ended = ends.ended.load(Ordering::Acquire);
    assert_eq!(
        ended,
        ends.spawned.load(Ordering::Relaxed),
        "a scoped thread outlived its scope"
    );
    result
}

/// The scope [`scope`] hands its closure: spawns threads that mark their
/// end for the scope to see.
pub struct Scope<'scope, 'env: 'scope> {
    inner: &'scope thread::Scope<'scope, 'env>,
    ends: Arc<Ends>,
}

/// Marks its thread's end when dropped: after the thread's closure (and
/// what it captured) is gone, also when it unwinds.
struct Ending(Arc<Ends>);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::Release);
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Like [`std::thread::Scope::spawn`].
    pub fn spawn<F, T>(&self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.ends.spawned.fetch_add(1, Ordering::Relaxed);
        let ending = Ending(Arc::clone(&self.ends));
        let inner = self.inner.spawn(move || {
            let _ending = ending;
            f()
        });
        ScopedJoinHandle {
            inner,
            ends: Arc::clone(&self.ends),
        }
    }
}

/// Like [`std::thread::ScopedJoinHandle`].
pub struct ScopedJoinHandle<'scope, T> {
    inner: thread::ScopedJoinHandle<'scope, T>,
    ends: Arc<Ends>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the thread to end and returns its result, as std's `join`.
    pub fn join(self) -> thread::Result<T> {
        let result = self.inner.join();
        // `pthread_join` already told ThreadSanitizer; this says it again
        // in the terms of the scope's count.
        self.ends.ended.load(Ordering::Acquire);
        result
    }

    /// Whether the thread's closure has returned, as std's `is_finished`.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

/// A start line for a fixed number of threads, like [`std::sync::Barrier`]
/// (and reusable as it is), on atomics: whatever any thread did before
/// [`wait`](StartLine::wait) happens before what every thread does after
/// it. Waiters spin with `yield_now`, since the test machine may have
/// fewer cores than threads.
pub struct StartLine {
    parties: usize,
    arrived: AtomicUsize,
    round: AtomicUsize,
}

impl StartLine {
    pub fn new(parties: usize) -> Self {
        assert!(parties > 0);
        StartLine {
            parties,
            arrived: AtomicUsize::new(0),
            round: AtomicUsize::new(0),
        }
    }

    /// Waits until all `parties` threads have arrived. Returns `true` on
    /// the thread that arrived last (as std's `is_leader`).
    pub fn wait(&self) -> bool {
        let round = self.round.load(Ordering::Acquire);
        // AcqRel: each arrival releases what its thread did before, and the
        // last one acquires all of it (the arrivals are one chain of
        // read-modify-writes) ...
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            // ... which it hands on to every waiter. Nobody arrives for the
            // next round before seeing this one's end, so the count is
            // reset before it.
            self.arrived.store(0, Ordering::Relaxed);
            self.round.fetch_add(1, Ordering::Release);
            true
        } else {
            while self.round.load(Ordering::Acquire) == round {
                thread::yield_now();
            }
            false
        }
    }
}

/// A lock like [`std::sync::Mutex`] (without poisoning), spinning on an
/// atomic flag with `yield_now`: taking it is an `Acquire`, releasing it a
/// `Release`, both visible to ThreadSanitizer. For handing data between a
/// test's threads, not for long waits.
#[derive(Default)]
pub struct Lock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `LockGuard`, and at most one
// guard lives at a time (the flag is taken with a compare-exchange), so
// sharing the lock hands the value to one thread at a time, as a `Mutex`
// does: `T: Send` suffices.
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    pub const fn new(value: T) -> Self {
        Lock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Waits for the lock and takes it until the guard is dropped.
    pub fn lock(&self) -> LockGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            thread::yield_now();
        }
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(|| LockGuard { lock: self })
    }

    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.try_lock() {
            Some(value) => f.debug_tuple("Lock").field(&*value).finish(),
            None => f.write_str("Lock(<locked>)"),
        }
    }
}

/// The taken [`Lock`]: its value, until dropped.
pub struct LockGuard<'a, T> {
    lock: &'a Lock<T>,
}

impl<T> Deref for LockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the
        // value exists while it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for LockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference
        // through this guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for LockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// Runs `f` on a worker thread of rayon's global pool, waits for it, and
/// returns what it returned (or resumes its panic here).
///
/// For tests of parallel iteration, so that ThreadSanitizer sees how the
/// work comes back: called from a thread outside the pool, rayon hands the
/// work to a worker and waits for it on a `LockLatch` (an std `Mutex` and
/// `Condvar`, whose synchronisation the sanitizer cannot see), so whatever
/// the workers produced (collected vectors, the job's result) would be
/// reported as racing with the caller's reads. On a worker, rayon's joins
/// wait on atomic latches in rayon's own code, which the sanitizer pass
/// compiles instrumented, and the work gets here through a [`Lock`].
pub fn on_rayon_worker<R, F>(f: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let outcome: Arc<Lock<Option<thread::Result<R>>>> = Arc::default();
    let on_worker = Arc::clone(&outcome);
    rayon::spawn(move || {
        let result = panic::catch_unwind(panic::AssertUnwindSafe(f));
        *on_worker.lock() = Some(result);
    });
    loop {
        let result = outcome.lock().take();
        match result {
            Some(Ok(value)) => return value,
            Some(Err(payload)) => panic::resume_unwind(payload),
            None => thread::sleep(std::time::Duration::from_micros(100)),
        }
    }
}
