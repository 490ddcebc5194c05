//! What every model shares: a drop-counting value, a recorder that performs
//! operations and logs them, and a runner for setup / threads / teardown.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use handle_pool::{pin, Config, Guard, Handle, HandlePool};

use super::history::{self, Event, History, Id, Op, Outcome};

/// The pool type every model uses.
pub type Pool = HandlePool<Tracked>;

/// A value that counts its drops and detects being read after (or while)
/// being dropped.
///
/// `payload` is a loom `UnsafeCell`: readers read it, `Drop` overwrites it,
/// so loom reports a causality violation if a drop is not ordered after every
/// read through a reference the pool handed out (and after the write that
/// created the value). Reading it also checks, by value, that the memory
/// still holds this value and not a successor that reused the slot.
pub struct Tracked {
    id: Id,
    payload: loom::cell::UnsafeCell<u64>,
    log: Arc<DropLog>,
}

const POISON: u64 = u64::MAX;

fn payload_of(id: Id) -> u64 {
    0x5EED_0000_0000 | u64::from(id)
}

// SAFETY: the payload cell is written only by `Drop`, through `&mut self`;
// every other access reads it. Loom runs all model threads on one OS thread
// and checks that each read and the write are ordered by happens-before,
// which is exactly the property under test.
unsafe impl Sync for Tracked {}

impl Tracked {
    fn new(id: Id, log: &Arc<DropLog>) -> Self {
        log.created[id as usize].store(true, Ordering::Relaxed);
        Tracked {
            id,
            payload: loom::cell::UnsafeCell::new(payload_of(id)),
            log: Arc::clone(log),
        }
    }

    /// The value's id, after checking that it is intact and not dropped.
    pub fn id(&self) -> Id {
        // SAFETY: a shared read; the only write is in `Drop` (see the `Sync` impl).
        let payload = self.payload.with(|p| unsafe { *p });
        assert_eq!(
            payload,
            payload_of(self.id),
            "value {} read after its drop (or its slot was overwritten)",
            self.id
        );
        assert_eq!(
            self.log.drops(self.id),
            0,
            "value {} read after its drop",
            self.id
        );
        self.id
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.log.drops[self.id as usize].fetch_add(1, Ordering::Relaxed);
        // SAFETY: `&mut self`: no shared reference is left, which loom checks.
        self.payload.with_mut(|p| unsafe { *p = POISON });
    }
}

/// Drop counts per value id. Plain std atomics: bookkeeping, not modelled.
pub struct DropLog {
    created: Vec<AtomicBool>,
    drops: Vec<AtomicUsize>,
}

impl DropLog {
    pub fn new(values: usize) -> Arc<Self> {
        Arc::new(DropLog {
            created: (0..values).map(|_| AtomicBool::new(false)).collect(),
            drops: (0..values).map(|_| AtomicUsize::new(0)).collect(),
        })
    }

    /// How many times value `id` was dropped so far.
    pub fn drops(&self, id: Id) -> usize {
        self.drops[id as usize].load(Ordering::Relaxed)
    }

    /// Every value created was dropped exactly once.
    pub fn assert_each_dropped_once(&self) {
        for (id, (created, drops)) in self.created.iter().zip(&self.drops).enumerate() {
            let expected = usize::from(created.load(Ordering::Relaxed));
            assert_eq!(
                drops.load(Ordering::Relaxed),
                expected,
                "value {id} dropped the wrong number of times"
            );
        }
    }
}

/// Performs operations on a pool and records them with their results.
pub struct Recorder {
    log: Arc<DropLog>,
    handles: BTreeMap<Id, Handle>,
    events: Vec<Event>,
    /// Every `(handle, id)` an iteration yielded, checked once all handles are known.
    yielded: Vec<(Handle, Id)>,
}

impl Recorder {
    pub fn new(log: Arc<DropLog>) -> Self {
        Recorder {
            log,
            handles: BTreeMap::new(),
            events: Vec::new(),
            yielded: Vec::new(),
        }
    }

    /// A recorder for a thread that knows the handles this one knows.
    fn fork(&self) -> Self {
        Recorder {
            handles: self.handles.clone(),
            ..Recorder::new(Arc::clone(&self.log))
        }
    }

    fn record(&mut self, op: Op, outcome: Outcome) {
        self.events.push(Event { op, outcome });
    }

    /// The drop log, to look at drop counts.
    pub fn log(&self) -> &DropLog {
        &self.log
    }

    /// The handle the insert of `id` returned.
    pub fn handle(&self, id: Id) -> Handle {
        self.handles[&id]
    }

    /// A new value with this id, not inserted (for models that insert by hand).
    pub fn value(&self, id: Id) -> Tracked {
        Tracked::new(id, &self.log)
    }

    /// `insert`.
    pub fn insert(&mut self, pool: &Pool, id: Id) -> Handle {
        let handle = pool.insert(self.value(id));
        self.handles.insert(id, handle);
        self.record(Op::Insert(id), Outcome::Inserted(true));
        handle
    }

    /// `insert_many`: one `Insert` event per value (it publishes them one
    /// by one).
    pub fn insert_many(&mut self, pool: &Pool, ids: &[Id]) -> Vec<Handle> {
        let values: Vec<Tracked> = ids.iter().map(|&id| self.value(id)).collect();
        let handles = pool.insert_many(values);
        assert_eq!(
            handles.len(),
            ids.len(),
            "insert_many returns one handle per value"
        );
        for (&id, &handle) in ids.iter().zip(&handles) {
            self.handles.insert(id, handle);
            self.record(Op::Insert(id), Outcome::Inserted(true));
        }
        handles
    }

    /// `try_insert`; a value refused is handed back and dropped here.
    pub fn try_insert(&mut self, pool: &Pool, id: Id) -> Option<Handle> {
        let handle = match pool.try_insert(self.value(id)) {
            Ok(handle) => {
                self.handles.insert(id, handle);
                Some(handle)
            }
            Err(error) => {
                assert_eq!(
                    error.into_inner().id(),
                    id,
                    "CapacityError gives the value back"
                );
                None
            }
        };
        self.record(Op::TryInsert(id), Outcome::Inserted(handle.is_some()));
        handle
    }

    /// `remove`.
    pub fn remove(&mut self, pool: &Pool, id: Id) -> bool {
        let removed = pool.remove(self.handle(id));
        self.record(Op::Remove(id), Outcome::Bool(removed));
        removed
    }

    /// `remove_get` under `guard`: recorded as a `remove`; the value handed
    /// over is checked intact, and returned to be read again while `guard`
    /// lives.
    pub fn remove_get<'g>(
        &mut self,
        pool: &'g Pool,
        id: Id,
        guard: &'g Guard,
    ) -> Option<&'g Tracked> {
        let value = pool.remove_get(self.handle(id), guard);
        if let Some(value) = value {
            assert_eq!(value.id(), id, "remove_get hands over the value it removed");
        }
        self.record(Op::Remove(id), Outcome::Bool(value.is_some()));
        value
    }

    /// `remove_with`, reading the value in the closure: recorded as a
    /// `remove`; the value seen is checked intact.
    pub fn remove_with(&mut self, pool: &Pool, id: Id) -> bool {
        let seen = pool.remove_with(self.handle(id), Tracked::id);
        if let Some(seen) = seen {
            assert_eq!(seen, id, "remove_with shows the value it removed");
        }
        self.record(Op::Remove(id), Outcome::Bool(seen.is_some()));
        seen.is_some()
    }

    /// `remove_many`; recorded as one part per handle plus the total.
    pub fn remove_many(&mut self, pool: &Pool, ids: &[Id]) -> usize {
        let handles: Vec<Handle> = ids.iter().map(|&id| self.handle(id)).collect();
        let removed = pool.remove_many(&handles);
        for &id in ids {
            self.record(Op::RemovePart(id), Outcome::Done);
        }
        self.record(Op::RemoveManyEnd, Outcome::Count(removed));
        removed
    }

    /// `flush`. Not recorded: it changes no logical state (it only drops
    /// values already removed and makes their slots reusable).
    pub fn flush(&mut self, pool: &Pool) {
        pool.flush();
    }

    /// `get` under a fresh guard; checks the value read is intact.
    pub fn get(&mut self, pool: &Pool, id: Id) -> Option<Id> {
        let guard = pin();
        let found = pool.get(self.handle(id), &guard).map(Tracked::id);
        drop(guard);
        self.record_get(id, found);
        found
    }

    /// `with` (a one-call read: announced in the thread's word, or pinned
    /// for a thread past the stripe count); checks the value read is intact.
    pub fn with(&mut self, pool: &Pool, id: Id) -> Option<Id> {
        let found = pool.with(self.handle(id), Tracked::id);
        self.record_get(id, found);
        found
    }

    /// Records a `get` a model performed by hand (to hold the reference).
    pub fn record_get(&mut self, id: Id, found: Option<Id>) {
        self.record(Op::Get(id), Outcome::Value(found));
    }

    /// `contains`.
    pub fn contains(&mut self, pool: &Pool, id: Id) -> bool {
        let found = pool.contains(self.handle(id));
        self.record(Op::Contains(id), Outcome::Bool(found));
        found
    }

    /// `iter` under a fresh guard; checks index order and every value read.
    pub fn iter(&mut self, pool: &Pool) -> Vec<(Handle, Id)> {
        self.record(Op::IterBegin, Outcome::Done);
        let guard = pin();
        let items: Vec<(Handle, Id)> = pool.iter(&guard).map(|(h, v)| (h, v.id())).collect();
        drop(guard);
        assert!(
            items.windows(2).all(|w| w[0].0.index() < w[1].0.index()),
            "iter must visit slots once each, in index order: {items:?}"
        );
        self.yielded.extend(items.iter().copied());
        let ids = items.iter().map(|&(_, id)| id).collect();
        self.record(Op::IterEnd, Outcome::Yielded(ids));
        items
    }

    /// `len`: only meaningful when nothing else is in flight (setup, teardown).
    pub fn len(&mut self, pool: &Pool) -> usize {
        let n = pool.len();
        self.record(Op::Len, Outcome::Count(n));
        n
    }

    /// In a sequential phase: every known handle's `get`, then `iter` and `len`.
    pub fn observe_all(&mut self, pool: &Pool) {
        let ids: Vec<Id> = self.handles.keys().copied().collect();
        for id in ids {
            self.get(pool, id);
        }
        self.iter(pool);
        self.len(pool);
    }

    /// Takes in what a joined thread learnt and did.
    fn absorb(&mut self, other: Recorder) -> Vec<Event> {
        self.handles.extend(other.handles);
        self.yielded.extend(other.yielded);
        other.events
    }
}

/// A step of a model: what one thread (or a sequential phase) does.
pub type Step = Arc<dyn Fn(&Pool, &mut Recorder) + Send + Sync>;

/// What the model does before the threads start or after they finish,
/// with exclusive access.
pub type Exclusive = Arc<dyn Fn(&mut Pool, &mut Recorder) + Send + Sync>;

/// A model: a pool configuration, a sequential setup, 2 or 3 threads, and a
/// sequential teardown. Running it under loom checks, for every explored
/// execution, that the history is explainable by `ReferenceTable`, that no
/// panic was swallowed anywhere, and that every value is dropped exactly once
/// after the pool is dropped and the pending reclamations have run.
pub struct Model {
    pub config: Config,
    /// How many distinct value ids the model uses (`0..values`).
    pub values: usize,
    pub setup: Exclusive,
    /// The last one runs on the model's main thread, the others are spawned.
    pub threads: Vec<Step>,
    pub teardown: Exclusive,
}

/// Wraps a closure as a [`Step`].
pub fn step(f: impl Fn(&Pool, &mut Recorder) + Send + Sync + 'static) -> Step {
    Arc::new(f)
}

/// Wraps a closure as a setup (exclusive access, like a teardown).
pub fn setup(f: impl Fn(&mut Pool, &mut Recorder) + Send + Sync + 'static) -> Exclusive {
    Arc::new(f)
}

/// Wraps a closure as a teardown.
pub fn teardown(f: impl Fn(&mut Pool, &mut Recorder) + Send + Sync + 'static) -> Exclusive {
    Arc::new(f)
}

impl Model {
    /// Explores the model; returns how many executions loom ran.
    pub fn check(self, name: &str) -> usize {
        self.check_with_preemptions(name, None)
    }

    /// Explores the model with the preemption bound lowered to `cap`, for a
    /// model whose interleaving of interest needs no more.
    pub fn check_with_preemptions(self, name: &str, cap: Option<usize>) -> usize {
        let model = Arc::new(self);
        explore_with(name, cap, move || model.run_once())
    }

    fn run_once(&self) {
        assert!((2..=3).contains(&self.threads.len()));
        let log = DropLog::new(self.values);
        let mut pool = Pool::with_config(self.config);
        let mut main = Recorder::new(Arc::clone(&log));
        (self.setup)(&mut pool, &mut main);
        let pool = Arc::new(pool);
        let setup_events = std::mem::take(&mut main.events);

        let (last, spawned) = self.threads.split_last().expect("at least two threads");
        let workers: Vec<Parked<Recorder>> = spawned
            .iter()
            .map(|step| {
                let (step, pool, mut recorder) = (Arc::clone(step), Arc::clone(&pool), main.fork());
                spawn_parked(move || {
                    step(&pool, &mut recorder);
                    recorder
                })
            })
            .collect();
        let mut own = main.fork();
        last(&pool, &mut own);
        let mut thread_events = Vec::new();
        for worker in &workers {
            thread_events.push(main.absorb(worker.finished()));
        }
        thread_events.push(main.absorb(own));

        let mut pool = Arc::into_inner(pool).expect("every thread has let go of the pool");
        (self.teardown)(&mut pool, &mut main);
        let history = History {
            setup: setup_events,
            threads: thread_events,
            teardown: std::mem::take(&mut main.events),
        };
        for &(handle, id) in &main.yielded {
            assert_eq!(
                handle,
                main.handle(id),
                "iter yielded value {id} with a handle its insert did not return"
            );
        }
        history::check(
            &history,
            self.config.max_generation,
            u64::from(self.config.max_slots),
        );

        drop(pool);
        log.assert_each_dropped_once();
        for worker in workers {
            worker.release();
        }
    }
}

/// A spawned model thread that, once its work is done, stays parked until
/// the main thread releases it.
///
/// Why: loom's `join` synchronises with the end of the thread's closure, but
/// the thread's epoch participant (crossbeam's thread-local) is unregistered
/// after that, when loom drops the thread-locals, and that pins once more.
/// With nothing ordering it before the teardown, loom lets the main thread
/// see that participant pinned at an old epoch for as many flushes as it
/// likes, so reclamation in the teardown would be allowed never to progress
/// (real threads finish their thread-local destructors before `join`
/// returns). Keeping the thread alive, parked and unpinned, until the
/// teardown is over makes the teardown's reclamation deterministic.
pub struct Parked<T> {
    gate: Arc<Gate<T>>,
    join: loom::thread::JoinHandle<()>,
}

/// The hand-over between a parked thread and the main thread: a loom mutex
/// and condition variables, so that a waiting thread is blocked (not
/// spinning, which would multiply loom's branches) and each hand-over
/// orders everything before it.
struct Gate<T> {
    state: loom::sync::Mutex<GateState<T>>,
    finished: loom::sync::Condvar,
    released: loom::sync::Condvar,
}

struct GateState<T> {
    result: Option<T>,
    released: bool,
}

/// Spawns `work` on a loom thread that parks once `work` returns.
pub fn spawn_parked<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Parked<T> {
    let gate = Arc::new(Gate {
        state: loom::sync::Mutex::new(GateState {
            result: None,
            released: false,
        }),
        finished: loom::sync::Condvar::new(),
        released: loom::sync::Condvar::new(),
    });
    let thread_gate = Arc::clone(&gate);
    let join = loom::thread::spawn(move || {
        let value = work();
        let mut state = thread_gate.state.lock().expect("gate");
        state.result = Some(value);
        thread_gate.finished.notify_one();
        while !state.released {
            state = thread_gate.released.wait(state).expect("gate");
        }
    });
    Parked { gate, join }
}

impl<T> Parked<T> {
    /// Waits until the work is done and returns its result.
    pub fn finished(&self) -> T {
        let mut state = self.gate.state.lock().expect("gate");
        loop {
            if let Some(value) = state.result.take() {
                return value;
            }
            state = self.gate.finished.wait(state).expect("gate");
        }
    }

    /// Lets the thread exit and joins it.
    pub fn release(self) {
        let mut state = self.gate.state.lock().expect("gate");
        state.released = true;
        self.gate.released.notify_one();
        drop(state);
        self.join.join().expect("a model thread panicked");
    }
}

std::thread_local! {
    /// Unexpected panics seen on this OS thread (loom runs a model's threads
    /// on one).
    static PANICS: Cell<usize> = const { Cell::new(0) };
}

/// The payload of a panic a model raises on purpose (see [`expect_panic`]).
pub struct ExpectedPanic;

/// Counts every panic, also those the pool catches and discards (a value's
/// `Drop` during a reclamation runs under `catch_unwind`), so a loom report
/// or an assertion inside such a drop cannot go unnoticed. Panics with an
/// [`ExpectedPanic`] payload are neither counted nor printed.
fn install_panic_counter() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().is::<ExpectedPanic>() {
                return;
            }
            PANICS.with(|count| count.set(count.get() + 1));
            previous(info);
        }));
    });
}

/// Runs `f`, which is expected to raise [`ExpectedPanic`]; returns whether
/// it did. Any other panic goes on unwinding.
pub fn expect_panic(f: impl FnOnce()) -> bool {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(()) => false,
        Err(payload) if payload.is::<ExpectedPanic>() => true,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Runs `f` under loom, failing an execution in which any unexpected panic
/// happened, even a caught one. Returns how many executions were explored,
/// and prints it. The preemption bound is `LOOM_MAX_PREEMPTIONS`, lowered to
/// `cap` if that is smaller.
pub fn explore_with(name: &str, cap: Option<usize>, f: impl Fn() + Send + Sync + 'static) -> usize {
    install_panic_counter();
    let executions = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&executions);
    let run = move || {
        counter.fetch_add(1, Ordering::Relaxed);
        PANICS.with(|count| count.set(0));
        f();
        assert_eq!(
            PANICS.with(Cell::get),
            0,
            "a panic happened in this execution and was caught (see the message above)"
        );
    };
    match cap {
        None => loom::model(run),
        Some(cap) => {
            // A `Builder` reads the same `LOOM_*` variables as `loom::model`,
            // but installs no `LOOM_LOG` subscriber.
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(builder.preemption_bound.map_or(cap, |n| n.min(cap)));
            // Long models: one execution may take more than the default 1000
            // scheduling decisions without any spinning.
            builder.max_branches = builder.max_branches.max(LONG_MODEL_BRANCHES);
            builder.check(run);
        }
    }
    let n = executions.load(Ordering::Relaxed);
    eprintln!("{name}: {n} executions");
    n
}

/// The branch limit for capped (long) models.
const LONG_MODEL_BRANCHES: usize = 20_000;

/// [`explore_with`] at the bound `LOOM_MAX_PREEMPTIONS` gives.
pub fn explore(name: &str, f: impl Fn() + Send + Sync + 'static) -> usize {
    explore_with(name, None, f)
}

/// Records that an execution reached some interesting state, so a model can
/// assert it explored what it is meant to and did not pass vacuously.
#[derive(Clone, Default)]
pub struct Reached(Arc<AtomicBool>);

impl Reached {
    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn assert(&self, what: &str) {
        assert!(
            self.0.load(Ordering::Relaxed),
            "no explored execution reached: {what}"
        );
    }
}
