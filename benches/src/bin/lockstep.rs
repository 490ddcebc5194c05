//! A job system sharing one pool of game entities.
//!
//! rayon worker threads run a small simulation: each frame they update every
//! entity in parallel, despawn the expired ones and spawn children, all
//! through `&pool`. Entities follow handles to their target and their parent,
//! which may have been despawned since the handle was stored: those lookups
//! must come back `None` (and a handle that resolves must give back the very
//! entity it was made for, even after its slot has been reused).
//!
//! The same simulation, with the same seed, also runs on
//! `parking_lot::Mutex<SlotMap>` and on `std::sync::Mutex<SlotMap>`, in
//! lockstep with the first (one frame of each in turn, on the same workers),
//! so that changes in the machine's load hit all three alike. The runs must
//! agree after every frame (entity count, spawns, despawns, lookups, stale
//! lookups) and end in the same state (checksum), so the speeds in the table
//! compare equal work.
//!
//! ```sh
//! cargo run --release -p handle-pool-benches --bin lockstep                 # 200 frames: ~7 s on an idle 2-core machine
//! cargo run --release -p handle-pool-benches --bin lockstep -- --threads 8  # oversubscribed
//! cargo run --release -p handle-pool-benches --bin lockstep -- --long       # 5000 frames, with progress
//! ```
//!
//! Each frame has phases, parallel inside and separated by rayon's joins, so
//! the outcome does not depend on scheduling:
//!
//! 1. think: every entity reads its own state, its target's and its parent's
//!    state as of the frame start (`body[frame % 2]`), and writes its new
//!    state into the other buffer (`body[(frame + 1) % 2]`). Only the entity
//!    itself writes its fields, so atomics with `Relaxed` suffice: the phase
//!    boundaries (rayon joins) order everything else. Despawn and spawn are
//!    decided from the entity's own random state, never from a shared one.
//! 2. bookkeeping (one thread): ids for the children, the list of the dying.
//! 3. despawn and spawn at once: `remove` and `insert` race on the pool.
//!
//! The live list is kept sorted by entity id (survivors keep their order,
//! children get ids above every existing one), never by handle bits, so
//! every backend visits the entities in the same order.

use std::hash::{DefaultHasher, Hasher};
use std::process;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use fastrand::Rng;
use handle_pool::{pin, Guard, Handle, HandlePool};
use rayon::prelude::*;
use slotmap::{DefaultKey, Key as _, KeyData, SlotMap};

// ---------------------------------------------------------------------------
// Simulation parameters.

/// Entities at frame 0.
const INITIAL_ENTITIES: u64 = 20_000;
/// Births slow down as the population approaches this.
const SOFT_CAP: usize = 60_000;
/// Side of the square, wrapping world.
const WORLD: i32 = 4096;
const MAX_SPEED: i32 = 24;
const MAX_HP: i32 = 100;
/// Entities within this (Manhattan) distance of their target fight it.
const FIGHT_RANGE: i32 = 96;
/// Lifetimes are uniform in `MIN_LIFETIME..MIN_LIFETIME + LIFETIME_SPREAD` frames.
const MIN_LIFETIME: u64 = 10;
const LIFETIME_SPREAD: u64 = 90;

const DEFAULT_FRAMES: u32 = 200;
const LONG_FRAMES: u32 = 5_000;
const DEFAULT_SEED: u64 = 0x5eed_2024;

// ---------------------------------------------------------------------------
// Entities.

/// Position, velocity and health at one frame boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    x: i32,
    y: i32,
    vx: i32,
    vy: i32,
    hp: i32,
}

/// One buffer of an entity's state. Atomics because other tasks read it
/// through `&Entity` while the owner writes the other buffer.
#[derive(Default)]
struct Body {
    x: AtomicI32,
    y: AtomicI32,
    vx: AtomicI32,
    vy: AtomicI32,
    hp: AtomicI32,
}

impl Body {
    fn load(&self) -> State {
        State {
            x: self.x.load(Relaxed),
            y: self.y.load(Relaxed),
            vx: self.vx.load(Relaxed),
            vy: self.vy.load(Relaxed),
            hp: self.hp.load(Relaxed),
        }
    }

    fn store(&self, s: State) {
        self.x.store(s.x, Relaxed);
        self.y.store(s.y, Relaxed);
        self.vx.store(s.vx, Relaxed);
        self.vy.store(s.vy, Relaxed);
        self.hp.store(s.hp, Relaxed);
    }
}

/// A reference to another entity: its handle (as bits, so it fits an
/// atomic) and the id it had, to check that the handle never resolves to
/// anyone else. Bits 0 mean "none": neither `Handle` nor a slotmap key is
/// ever 0.
const NONE: u64 = 0;

/// A game entity. `K` is the backend's key type.
struct Entity<K> {
    /// Stable id, in spawn order: the live list is sorted by it.
    id: u64,
    born: u32,
    lifetime: u32,
    /// The entity that spawned this one, if any; fixed at spawn.
    parent: Option<(u64, K)>,
    /// Cleared once the parent's handle is found stale.
    follows_parent: AtomicBool,
    /// Target handle bits (`NONE` if no target) and the target's id.
    target_bits: AtomicU64,
    target_id: AtomicU64,
    /// This entity's own random generator, as its state
    /// ([`Rng::get_seed`]); only the entity advances it.
    rng: AtomicU64,
    /// Double-buffered state: `body[f % 2]` holds the state at the start of frame `f`.
    body: [Body; 2],
}

impl<K> Entity<K> {
    fn new(spec: Spawn<K>) -> Self {
        let entity = Entity {
            id: spec.id,
            born: spec.born,
            lifetime: spec.lifetime,
            follows_parent: AtomicBool::new(spec.parent.is_some()),
            parent: spec.parent,
            target_bits: AtomicU64::new(spec.target.map_or(NONE, |t| t.1)),
            target_id: AtomicU64::new(spec.target.map_or(0, |t| t.0)),
            rng: AtomicU64::new(spec.rng),
            body: Default::default(),
        };
        entity.body[spec.born as usize % 2].store(spec.state);
        entity
    }
}

/// A target: its entity id and its key bits.
type Target = (u64, u64);

/// Everything needed to make an entity, decided before it is inserted.
#[derive(Clone, Copy)]
struct Spawn<K> {
    id: u64,
    born: u32,
    lifetime: u32,
    parent: Option<(u64, K)>,
    target: Option<Target>,
    /// The generator's state ([`Rng::get_seed`]).
    rng: u64,
    state: State,
}

// ---------------------------------------------------------------------------
// The three backends behind one small trait.

/// What the simulation needs from a concurrent entity store.
trait Backend: Sync + Sized {
    type Key: Copy + Send + Sync;
    /// Held across the lookups of one task: an epoch guard for `HandlePool`,
    /// nothing for the mutexes (they lock per lookup).
    type Pin;
    const NAME: &'static str;
    /// The name in the closing sentence of the report.
    const LABEL: &'static str;

    fn create() -> Self;
    fn pin(&self) -> Self::Pin;
    /// Calls `f` on the entity `key` refers to, if it is still there.
    fn read<R>(
        &self,
        pin: &Self::Pin,
        key: Self::Key,
        f: impl FnOnce(&Entity<Self::Key>) -> R,
    ) -> Option<R>;
    fn insert(&self, entity: Entity<Self::Key>) -> Self::Key;
    fn remove(&self, key: Self::Key) -> bool;
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn key_bits(key: Self::Key) -> u64;
    fn key_from_bits(bits: u64) -> Self::Key;
}

impl Backend for HandlePool<Entity<Handle>> {
    type Key = Handle;
    type Pin = Guard;
    const NAME: &'static str = "handle_pool::HandlePool";
    const LABEL: &'static str = "handle-pool";

    fn create() -> Self {
        HandlePool::new()
    }
    fn pin(&self) -> Guard {
        pin()
    }
    #[inline]
    fn read<R>(
        &self,
        guard: &Guard,
        key: Handle,
        f: impl FnOnce(&Entity<Handle>) -> R,
    ) -> Option<R> {
        self.get(key, guard).map(f)
    }
    fn insert(&self, entity: Entity<Handle>) -> Handle {
        HandlePool::insert(self, entity)
    }
    fn remove(&self, key: Handle) -> bool {
        HandlePool::remove(self, key)
    }
    fn len(&self) -> usize {
        HandlePool::len(self)
    }
    fn capacity(&self) -> usize {
        HandlePool::capacity(self)
    }
    fn key_bits(key: Handle) -> u64 {
        key.to_bits()
    }
    fn key_from_bits(bits: u64) -> Handle {
        Handle::from_bits(bits).expect("bits of a handle")
    }
}

/// `Mutex<SlotMap>` for both mutex types, locking once per operation.
macro_rules! mutex_slotmap_backend {
    ($mutex:ty, $name:expr, $label:expr, $lock:ident) => {
        impl Backend for $mutex {
            type Key = DefaultKey;
            type Pin = ();
            const NAME: &'static str = $name;
            const LABEL: &'static str = $label;

            fn create() -> Self {
                <$mutex>::new(SlotMap::new())
            }
            fn pin(&self) {}
            #[inline]
            fn read<R>(
                &self,
                _: &(),
                key: DefaultKey,
                f: impl FnOnce(&Entity<DefaultKey>) -> R,
            ) -> Option<R> {
                $lock(self).get(key).map(f)
            }
            fn insert(&self, entity: Entity<DefaultKey>) -> DefaultKey {
                $lock(self).insert(entity)
            }
            fn remove(&self, key: DefaultKey) -> bool {
                // Drop the entity after unlocking.
                let removed = $lock(self).remove(key);
                removed.is_some()
            }
            fn len(&self) -> usize {
                $lock(self).len()
            }
            fn capacity(&self) -> usize {
                $lock(self).capacity()
            }
            fn key_bits(key: DefaultKey) -> u64 {
                key.data().as_ffi()
            }
            fn key_from_bits(bits: u64) -> DefaultKey {
                KeyData::from_ffi(bits).into()
            }
        }
    };
}

type ParkingLotSlotMap = parking_lot::Mutex<SlotMap<DefaultKey, Entity<DefaultKey>>>;
type StdSlotMap = std::sync::Mutex<SlotMap<DefaultKey, Entity<DefaultKey>>>;

fn lock_parking_lot<T>(m: &parking_lot::Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

fn lock_std<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock()
        .expect("a simulation task panicked while holding the lock")
}

mutex_slotmap_backend!(
    ParkingLotSlotMap,
    "parking_lot::Mutex<SlotMap>",
    "parking_lot Mutex<SlotMap>",
    lock_parking_lot
);
mutex_slotmap_backend!(
    StdSlotMap,
    "std::sync::Mutex<SlotMap>",
    "std Mutex<SlotMap>",
    lock_std
);

// ---------------------------------------------------------------------------
// One frame.

/// A child an entity decided to spawn; it gets its id in the bookkeeping phase.
struct Child {
    /// Seeds the child's generator.
    seed: u64,
    /// The parent's target, which the child inherits.
    target: Option<Target>,
    /// The parent's state at the end of the frame; the child starts next to it.
    parent_state: State,
}

/// What the think phase decided for one entity.
struct Outcome {
    despawn: bool,
    /// The child to spawn, if any.
    child: Option<Child>,
    lookups: u64,
    stale: u64,
}

/// What one entity sees of itself at the start of the frame.
struct Snapshot<K> {
    born: u32,
    lifetime: u32,
    parent: Option<(u64, K)>,
    follows_parent: bool,
    target: Option<Target>,
    rng: Rng,
    state: State,
}

/// Follows `key` and returns the other entity's state at the frame start,
/// or `None` if it was despawned. Panics if the handle resolves to an entity
/// other than `expected_id`: a stale handle must never do that.
fn follow<B: Backend>(
    b: &B,
    pin: &B::Pin,
    key: B::Key,
    expected_id: u64,
    cur: usize,
) -> Option<State> {
    let (id, state) = b.read(pin, key, |e| (e.id, e.body[cur].load()))?;
    assert_eq!(
        id,
        expected_id,
        "{}: a stale handle resolved to another entity",
        B::NAME
    );
    Some(state)
}

fn sign_step(from: i32, to: i32, step: i32) -> i32 {
    (to - from).signum() * step
}

/// Phase 1 for one entity: read itself, its target and its parent, write its
/// next state, decide whether it despawns and whether it spawns a child.
fn think<B: Backend>(
    b: &B,
    pin: &B::Pin,
    frame: u32,
    live: &[(u64, B::Key)],
    (id, key): (u64, B::Key),
) -> Outcome {
    let cur = frame as usize % 2;
    let me = b
        .read(pin, key, |e| {
            assert_eq!(
                e.id,
                id,
                "{}: a live handle resolved to another entity",
                B::NAME
            );
            let target_bits = e.target_bits.load(Relaxed);
            Snapshot {
                born: e.born,
                lifetime: e.lifetime,
                parent: e.parent,
                follows_parent: e.follows_parent.load(Relaxed),
                target: (target_bits != NONE).then(|| (e.target_id.load(Relaxed), target_bits)),
                rng: Rng::with_seed(e.rng.load(Relaxed)),
                state: e.body[cur].load(),
            }
        })
        .unwrap_or_else(|| panic!("{}: a live entity's handle came back None", B::NAME));
    let mut lookups = 1;
    let mut stale = 0;
    let mut rng = me.rng;
    let mut target = me.target;

    // The target: chase it, fight it when close; find another if it is gone.
    let mut target_state = None;
    if let Some((target_id, bits)) = target {
        lookups += 1;
        target_state = follow(b, pin, B::key_from_bits(bits), target_id, cur);
        if target_state.is_none() {
            stale += 1;
            target = None;
        }
    }
    if target.is_none() {
        let (other_id, other) = live[rng.usize(..live.len())];
        if other_id != id {
            target = Some((other_id, B::key_bits(other)));
        }
    }

    // The parent: drift towards it while it lives; once gone, go it alone.
    let mut parent_state = None;
    let mut follows_parent = me.follows_parent;
    if let (true, Some((parent_id, parent))) = (follows_parent, me.parent) {
        lookups += 1;
        parent_state = follow(b, pin, parent, parent_id, cur);
        if parent_state.is_none() {
            stale += 1;
            follows_parent = false;
        }
    }

    let s = me.state;
    let mut vx = s.vx + rng.i32(-2..=2);
    let mut vy = s.vy + rng.i32(-2..=2);
    let mut hp = (s.hp + 1).min(MAX_HP);
    if let Some(t) = target_state {
        vx += sign_step(s.x, t.x, 3);
        vy += sign_step(s.y, t.y, 3);
        if (t.x - s.x).abs() + (t.y - s.y).abs() < FIGHT_RANGE {
            hp -= rng.i32(4..12) + t.hp / 25;
        }
    }
    if let Some(p) = parent_state {
        vx += sign_step(s.x, p.x, 1);
        vy += sign_step(s.y, p.y, 1);
    }
    let next_state = State {
        x: (s.x + vx).rem_euclid(WORLD),
        y: (s.y + vy).rem_euclid(WORLD),
        vx: vx.clamp(-MAX_SPEED, MAX_SPEED),
        vy: vy.clamp(-MAX_SPEED, MAX_SPEED),
        hp,
    };

    let age = frame - me.born;
    let despawn = hp <= 0 || age >= me.lifetime;
    // Births get rarer as the population nears the soft cap.
    let room = SOFT_CAP.saturating_sub(live.len()) as u64;
    let wants_child = hp > MAX_HP / 2 && rng.u64(..1000 * SOFT_CAP as u64) < 80 * room;
    let child = wants_child.then(|| Child {
        seed: rng.u64(..),
        target,
        parent_state: next_state,
    });

    // Write back: the next state buffer, target, parent flag and generator.
    lookups += 1;
    b.read(pin, key, |e| {
        e.body[1 - cur].store(next_state);
        e.target_bits.store(target.map_or(NONE, |t| t.1), Relaxed);
        e.target_id.store(target.map_or(0, |t| t.0), Relaxed);
        e.follows_parent.store(follows_parent, Relaxed);
        e.rng.store(rng.get_seed(), Relaxed);
    })
    .expect("the entity is still live");

    Outcome {
        despawn,
        child,
        lookups,
        stale,
    }
}

/// Counts of one run; equal across backends for the same seed and frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Totals {
    entities: usize,
    peak_entities: usize,
    spawned: u64,
    despawned: u64,
    lookups: u64,
    stale: u64,
}

impl Totals {
    fn pool_ops(&self) -> u64 {
        self.lookups + self.spawned + self.despawned
    }
}

/// One simulation on one backend.
struct Simulation<B: Backend> {
    backend: B,
    /// `(entity id, key)` of every live entity, sorted by id.
    live: Vec<(u64, B::Key)>,
    next_id: u64,
    frame: u32,
    totals: Totals,
    /// Time in the parallel phases (think, despawn + spawn).
    pool_time: Duration,
    /// The same, frame by frame.
    phase_times: Vec<Duration>,
    /// Whole frames, one-thread bookkeeping included.
    frame_time: Duration,
}

impl<B: Backend> Simulation<B> {
    /// Frame 0's population, spawned in parallel like any other.
    fn new(workers: &rayon::ThreadPool, seed: u64) -> Self {
        let backend = B::create();
        // One generator per entity, each seeded from this one in id order.
        let mut seeder = Rng::with_seed(seed);
        let initial: Vec<Spawn<B::Key>> = (0..INITIAL_ENTITIES)
            .map(|id| {
                let mut rng = seeder.fork();
                Spawn {
                    id,
                    born: 0,
                    lifetime: rng.u64(MIN_LIFETIME..MIN_LIFETIME + LIFETIME_SPREAD) as u32,
                    parent: None,
                    target: None,
                    state: State {
                        x: rng.i32(0..WORLD),
                        y: rng.i32(0..WORLD),
                        vx: 0,
                        vy: 0,
                        hp: MAX_HP,
                    },
                    rng: rng.get_seed(),
                }
            })
            .collect();
        let live: Vec<(u64, B::Key)> = workers.install(|| {
            initial
                .par_iter()
                .map(|spec| (spec.id, backend.insert(Entity::new(*spec))))
                .collect()
        });
        let totals = Totals {
            entities: live.len(),
            peak_entities: live.len(),
            spawned: INITIAL_ENTITIES,
            ..Totals::default()
        };
        Simulation {
            backend,
            live,
            next_id: INITIAL_ENTITIES,
            frame: 0,
            totals,
            pool_time: Duration::ZERO,
            phase_times: Vec::new(),
            frame_time: Duration::ZERO,
        }
    }

    /// Runs one frame: think, bookkeeping, despawn + spawn.
    fn step(&mut self, workers: &rayon::ThreadPool) {
        let started = Instant::now();
        let b = &self.backend;
        let frame = self.frame;
        let live = &self.live;

        // Phase 1: think, in parallel; one pin per rayon task.
        let outcomes: Vec<Outcome> = workers.install(|| {
            live.par_iter()
                .map_init(
                    || b.pin(),
                    |pin, &entity| think(b, pin, frame, live, entity),
                )
                .collect()
        });
        let mut pool_time = started.elapsed();

        // Phase 2: bookkeeping on one thread, in id order.
        let mut dying = Vec::new();
        let mut survivors = Vec::with_capacity(live.len());
        let mut births = Vec::new();
        for (&(id, key), outcome) in live.iter().zip(&outcomes) {
            self.totals.lookups += outcome.lookups;
            self.totals.stale += outcome.stale;
            if outcome.despawn {
                dying.push(key);
            } else {
                survivors.push((id, key));
            }
            if let Some(Child {
                seed,
                target,
                parent_state,
            }) = outcome.child
            {
                let mut rng = Rng::with_seed(seed);
                births.push(Spawn {
                    id: self.next_id,
                    born: frame + 1,
                    lifetime: rng.u64(MIN_LIFETIME..MIN_LIFETIME + LIFETIME_SPREAD) as u32,
                    parent: Some((id, key)),
                    target,
                    state: State {
                        x: (parent_state.x + rng.i32(-16..=16)).rem_euclid(WORLD),
                        y: (parent_state.y + rng.i32(-16..=16)).rem_euclid(WORLD),
                        vx: parent_state.vx,
                        vy: parent_state.vy,
                        hp: MAX_HP,
                    },
                    rng: rng.get_seed(),
                });
                self.next_id += 1;
            }
        }

        // Phase 3: despawn and spawn at once. A child may outlive its parent
        // from its first frame on.
        let t = Instant::now();
        let (removed, born) = workers.install(|| {
            rayon::join(
                || dying.par_iter().filter(|&&key| b.remove(key)).count(),
                || {
                    births
                        .par_iter()
                        .map(|spec| (spec.id, b.insert(Entity::new(*spec))))
                        .collect::<Vec<_>>()
                },
            )
        });
        pool_time += t.elapsed();
        assert_eq!(
            removed,
            dying.len(),
            "{}: a live entity could not be removed",
            B::NAME
        );
        survivors.extend(born);
        self.live = survivors;
        self.frame += 1;
        let totals = &mut self.totals;
        totals.despawned += removed as u64;
        totals.spawned += births.len() as u64;
        totals.entities = self.live.len();
        totals.peak_entities = totals.peak_entities.max(self.live.len());
        assert!(
            !self.live.is_empty(),
            "the population died out at frame {frame}"
        );
        self.pool_time += pool_time;
        self.phase_times.push(pool_time);
        self.frame_time += started.elapsed();
    }

    /// Hashes the final state, read through the pool in id order, and
    /// records what the pool's `len()` says.
    fn finish(self) -> Run {
        let Simulation {
            backend: b,
            live,
            frame,
            totals,
            pool_time,
            phase_times,
            frame_time,
            ..
        } = self;
        assert!(
            live.windows(2).all(|w| w[0].0 < w[1].0),
            "live list out of id order"
        );
        let cur = frame as usize % 2;
        let pin = b.pin();
        // std's `DefaultHasher::new()` hashes alike within one process, which is
        // all the comparison of the three runs needs.
        let mut checksum = DefaultHasher::new();
        checksum.write_usize(live.len());
        for &(id, key) in &live {
            let words = b
                .read(&pin, key, |e| {
                    let s = e.body[cur].load();
                    [
                        e.id,
                        e.target_id.load(Relaxed),
                        u64::from(e.follows_parent.load(Relaxed)),
                        e.rng.load(Relaxed),
                        (s.x as u64) << 32 | s.y as u32 as u64,
                        (s.vx as u64) << 32 | s.vy as u32 as u64,
                        s.hp as u64,
                    ]
                })
                .expect("a live entity");
            assert_eq!(words[0], id);
            words.iter().for_each(|&w| checksum.write_u64(w));
        }
        drop(pin);
        Run {
            name: B::NAME,
            label: B::LABEL,
            totals,
            checksum: checksum.finish(),
            len: b.len(),
            pool_time,
            phase_times,
            frame_time,
            capacity: b.capacity(),
        }
    }
}

/// The outcome of one simulation.
struct Run {
    name: &'static str,
    label: &'static str,
    totals: Totals,
    /// Hash of every live entity's final state, in id order.
    checksum: u64,
    /// What the backend's `len()` said at the end (no operation in flight).
    len: usize,
    pool_time: Duration,
    phase_times: Vec<Duration>,
    frame_time: Duration,
    capacity: usize,
}

// ---------------------------------------------------------------------------
// Command line and report.

struct Args {
    threads: usize,
    frames: u32,
    seed: u64,
    progress: bool,
}

const USAGE: &str = "\
usage: lockstep [--threads N] [--frames N | --long] [--seed N] [--progress] [--help]

  --threads N   rayon worker threads (default: the machine's cores)
  --frames N    frames to simulate (default 200)
  --long        simulate 5000 frames, with a progress line per second
  --seed N      seed of every entity's random state, decimal or 0x-hex
                (default 0x5eed2024)
  --progress    print a progress line per second even on short runs
  -h, --help    print this message";

fn parse_args() -> Args {
    read_args().unwrap_or_else(|error| {
        eprintln!("lockstep: {error}\n\n{USAGE}");
        process::exit(2)
    })
}

fn read_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = Args {
        threads: cores,
        frames: DEFAULT_FRAMES,
        seed: DEFAULT_SEED,
        progress: false,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("threads") => args.threads = parser.value()?.parse()?,
            Long("frames") => args.frames = parser.value()?.parse()?,
            Long("long") => args.frames = LONG_FRAMES,
            Long("seed") => args.seed = parser.value()?.parse_with(parse_seed)?,
            Long("progress") => args.progress = true,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                process::exit(0)
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.threads == 0 || args.frames == 0 {
        return Err("--threads and --frames must be at least 1".into());
    }
    args.progress |= args.frames > DEFAULT_FRAMES;
    Ok(args)
}

/// A seed in decimal or, with a `0x` prefix, in hexadecimal.
fn parse_seed(text: &str) -> Result<u64, std::num::ParseIntError> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    }
}

/// How handle-pool compares, from `ratio` = its speed over the other's:
/// `2.45x faster`, `1.30x slower` (the inverse ratio), or `1.00x (as fast)`
/// when the ratio rounds to 1 at `decimals`.
fn faster_or_slower(ratio: f64, decimals: usize) -> String {
    let same = format!("{:.*}", decimals, 1.0);
    if format!("{ratio:.decimals$}") == same || format!("{:.decimals$}", 1.0 / ratio) == same {
        format!("{same}x (as fast)")
    } else if ratio > 1.0 {
        format!("{ratio:.decimals$}x faster")
    } else {
        format!("{:.decimals$}x slower", 1.0 / ratio)
    }
}

/// The median over frames of `slow[f] / fast[f]`.
fn median_ratio(slow: &[Duration], fast: &[Duration]) -> f64 {
    let mut ratios: Vec<f64> = slow
        .iter()
        .zip(fast)
        .map(|(s, f)| s.as_secs_f64() / f.as_secs_f64().max(1e-9))
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ratios.len() / 2]
}

fn rate(ops: u64, time: Duration) -> f64 {
    ops as f64 / time.as_secs_f64().max(1e-9)
}

fn main() {
    let args = parse_args();
    let workers = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .thread_name(|i| format!("job-worker-{i}"))
        .build()
        .expect("rayon thread pool");
    println!(
        "lockstep: {} rayon workers ({} cores), {} frames, seed {:#x}",
        args.threads,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        args.frames,
        args.seed
    );

    // The three simulations advance in lockstep, one frame each in turn
    // (rotating who goes first), so a change in the machine's load hits
    // all three alike.
    let mut pool = Simulation::<HandlePool<Entity<Handle>>>::new(&workers, args.seed);
    let mut parking = Simulation::<ParkingLotSlotMap>::new(&workers, args.seed);
    let mut std_mutex = Simulation::<StdSlotMap>::new(&workers, args.seed);
    let started = Instant::now();
    let mut last_report = started;
    for frame in 0..args.frames {
        for turn in 0..3 {
            match (frame + turn) % 3 {
                0 => pool.step(&workers),
                1 => parking.step(&workers),
                _ => std_mutex.step(&workers),
            }
        }
        // Equal work, frame by frame.
        assert_eq!(
            parking.totals, pool.totals,
            "parking_lot run diverged at frame {frame}"
        );
        assert_eq!(
            std_mutex.totals, pool.totals,
            "std run diverged at frame {frame}"
        );
        if args.progress && last_report.elapsed() >= Duration::from_secs(1) {
            let ops = pool.totals.pool_ops();
            eprintln!(
                "frame {:>6}/{}  {:>6} entities  {:>5.0} s  M ops/s so far: handle_pool {:.1}, parking_lot {:.1}, std {:.1}",
                frame + 1,
                args.frames,
                pool.totals.entities,
                started.elapsed().as_secs_f64(),
                rate(ops, pool.pool_time) / 1e6,
                rate(ops, parking.pool_time) / 1e6,
                rate(ops, std_mutex.pool_time) / 1e6,
            );
            last_report = Instant::now();
        }
    }

    let runs = [pool.finish(), parking.finish(), std_mutex.finish()];
    let first = &runs[0];
    for run in &runs[1..] {
        assert_eq!(
            (run.totals, run.checksum),
            (first.totals, first.checksum),
            "{} ended in another state than {}",
            run.name,
            first.name
        );
    }

    let t = first.totals;
    println!(
        "all three ended in the same state: {} entities (peak {}), checksum {:016x}",
        t.entities, t.peak_entities, first.checksum
    );
    println!(
        "each run: {} spawns, {} despawns, {} lookups = {} pool ops; {} stale lookups caught (None)",
        t.spawned,
        t.despawned,
        t.lookups,
        t.pool_ops(),
        t.stale,
    );
    println!();
    println!(
        "{:<28} {:>8} {:>9} {:>15} {:>17} {:>9} {:>9}",
        "backend",
        "phase s",
        "M ops/s",
        "handle-pool is",
        "median per frame",
        "frame s",
        "capacity"
    );
    let base = rate(t.pool_ops(), first.pool_time);
    // handle-pool's speed over each backend's: overall, and the median per frame.
    let ratios: Vec<(f64, f64)> = runs
        .iter()
        .map(|run| {
            (
                base / rate(run.totals.pool_ops(), run.pool_time),
                median_ratio(&run.phase_times, &first.phase_times),
            )
        })
        .collect();
    for (i, (run, &(overall, median))) in runs.iter().zip(&ratios).enumerate() {
        let (overall, median) = if i == 0 {
            ("1.00x".to_string(), "1.00x".to_string())
        } else {
            (faster_or_slower(overall, 2), faster_or_slower(median, 2))
        };
        println!(
            "{:<28} {:>8.3} {:>9.1} {:>15} {:>17} {:>9.3} {:>9}",
            run.name,
            run.pool_time.as_secs_f64(),
            rate(run.totals.pool_ops(), run.pool_time) / 1e6,
            overall,
            median,
            run.frame_time.as_secs_f64(),
            run.capacity
        );
    }
    println!();
    let against: Vec<String> = runs[1..]
        .iter()
        .zip(&ratios[1..])
        .map(|(run, &(overall, _))| {
            let comparison = faster_or_slower(overall, 1);
            match comparison.strip_suffix(" (as fast)") {
                Some(ratio) => format!("as fast as {} ({ratio})", run.label),
                None => format!("{comparison} than {}", run.label),
            }
        })
        .collect();
    // Bare ratios only while every one reads "faster"; words otherwise.
    let all_faster = ratios[1..].iter().all(|&(_, median)| median >= 1.0);
    let medians: Vec<String> = ratios[1..]
        .iter()
        .map(|&(_, median)| {
            if all_faster {
                format!("{median:.1}x")
            } else {
                faster_or_slower(median, 1)
            }
        })
        .collect();
    println!(
        "{} is {} (median per frame {})",
        first.label,
        against.join(" and "),
        medians.join(" / ")
    );
    println!();
    println!("phase s: time in the parallel phases (think; despawn + spawn); M ops/s: pool ops per second of it");
    println!("handle-pool is: handle_pool's pool ops per second over that row's, read as \"handle-pool is 2.00x faster than this backend\"");
    println!("  (it took half the time for the same work); \"slower\" rows give the inverse, that row's speed over handle_pool's");
    println!("median per frame: the same comparison of the phase times, frame by frame; the median over the frames");
    println!("  (the three do equal work every frame, a few ms apart, so a burst of load on the machine hits all alike)");
    println!("frame s: whole frames, one-thread bookkeeping included");
    println!("capacity: slots allocated at the end (handle_pool reuses a slot only after an epoch grace period)");

    // Checked last, so the table is printed even if this fails.
    for run in &runs {
        assert_eq!(
            run.len, t.entities,
            "{}: len() disagrees with the live entity count while no operation is in flight",
            run.name
        );
    }
}
