//! A job system sharing one pool of game entities.
//!
//! Every frame, rayon tasks look each entity up by its handle and follow the
//! handles it keeps to its target and its parent. Those may have been
//! despawned since: the lookup then comes back `None` and is counted. In the
//! same parallel pass, expired entities are despawned (`remove`) and new
//! ones spawned (`insert`), all through a shared `&HandlePool`. Then one pass
//! through `&mut` moves every entity and collects the next frame's handles.
//!
//! Each entity's health is a component kept beside the pool, in a
//! `SecondaryMap` keyed by the entities' handles: the worker that spawns an
//! entity inserts its health, the worker that despawns it removes it, and
//! every worker whose entity chases a live target wears the target's health
//! down, all through `&SecondaryMap` (the health is an `AtomicU32`, so a
//! component many workers hit is changed in place). A despawned entity's
//! health is never found through a handle of the entity reusing its slot.
//!
//! The same world is played twice, on one rayon worker and then on all of
//! them (`--workers N`), and the demo prints both times and the speed-up.
//! The world grows with the workers (up to 40,000 entities each, or
//! `--entities N`) so that each has a frame's worth of work, and each rayon
//! job counts what it did in a `Counts` of its own, summed once a frame: a
//! counter shared by every worker would bounce between their caches.
//!
//! ```sh
//! cargo run --release -p handle-pool-demo                    # 100 frames, a few seconds
//! cargo run --release -p handle-pool-demo -- --frames 50 --workers 4 --entities 100000
//! ```
//!
//! The seed fixes every entity's choices, so the entity counts repeat from
//! run to run; which slot a spawn lands in depends on thread timing, so the
//! targets picked, and with them the lookup counts, vary slightly.

use std::ops::Add;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use handle_pool::{Handle, HandlePool, SecondaryMap};
use rayon::prelude::*;

/// Live entities at most, per worker (`--entities` sets the total).
const ENTITIES_PER_WORKER: usize = 40_000;
/// Side of the square, wrapping world.
const WORLD: i32 = 4096;
const SEED: u64 = 0x5eed_2026;
const DEFAULT_FRAMES: u32 = 100;
/// The health an entity is spawned with; each frame its chasers take one.
const HEALTH: u32 = 50;

struct Entity {
    x: i32,
    y: i32,
    vx: i32,
    vy: i32,
    /// The entity this one chases, if any.
    target: Option<Handle>,
    /// The entity that spawned this one (none for the first generation).
    parent: Option<Handle>,
    /// Frames left; despawned when it reaches zero.
    lifetime: u32,
    /// This entity's own random stream.
    seed: u64,
}

/// xorshift64: enough randomness for a demo, and no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn spawn(&mut self, parent: Option<Handle>, target: Option<Handle>, x: i32, y: i32) -> Entity {
        let speed = |rng: &mut Rng| rng.below(33) as i32 - 16;
        Entity {
            x,
            y,
            vx: speed(self),
            vy: speed(self),
            target,
            parent,
            lifetime: 20 + self.below(100) as u32,
            seed: self.next(),
        }
    }
}

/// What the tasks did: each rayon job adds up its own, `reduce` sums them.
#[derive(Clone, Copy, Default)]
struct Counts {
    lookups: u64,
    stale: u64,
    spawned: u64,
    despawned: u64,
    /// Health taken from live targets.
    hits: u64,
}

impl Add for Counts {
    type Output = Counts;
    fn add(self, o: Counts) -> Counts {
        Counts {
            lookups: self.lookups + o.lookups,
            stale: self.stale + o.stale,
            spawned: self.spawned + o.spawned,
            despawned: self.despawned + o.despawned,
            hits: self.hits + o.hits,
        }
    }
}

fn main() {
    let (frames, workers, entities) = parse_args();
    println!("job_system: {frames} frames, up to {entities} entities, on 1 worker then {workers}");
    let one = play_on(1, frames, entities);
    let many = play_on(workers, frames, entities);
    println!("speed-up over 1 worker: {:.2}x on {workers}", one / many);
}

/// Plays the world on a rayon thread pool of its own with `workers`
/// threads, prints what they did, and returns the wall time.
fn play_on(workers: usize, frames: u32, entities: usize) -> f64 {
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("start rayon's thread pool")
        .install(|| play(workers, frames, entities))
}

fn play(workers: usize, frames: u32, entities: usize) -> f64 {
    let mut pool: HandlePool<Entity> = HandlePool::new();
    // A component per entity, beside the pool: its health.
    let health: SecondaryMap<AtomicU32> = SecondaryMap::with_capacity(entities);
    let mut rng = Rng::new(SEED);
    let mut handles: Vec<Handle> = (0..entities / 2)
        .map(|_| {
            let (x, y) = (
                rng.below(WORLD as u64) as i32,
                rng.below(WORLD as u64) as i32,
            );
            let handle = pool.insert(rng.spawn(None, None, x, y));
            health.insert(handle, AtomicU32::new(HEALTH));
            handle
        })
        .collect();
    for (_, entity) in pool.iter_mut() {
        entity.target = Some(handles[rng.below(handles.len() as u64) as usize]);
    }
    let mut next_handles = Vec::new();

    let on = format!("{workers} worker{}", if workers == 1 { "" } else { "s" });
    let mut total = Counts::default();
    let start = Instant::now();
    for frame in 0..frames {
        let live = handles.len();
        // Shared phase: lookups, despawns and spawns race on `&pool`. A
        // reader per rayon job: its own guard, and the pool's storage read
        // once for the job's lookups.
        let counts = handles
            .par_iter()
            .map_init(
                || pool.reader(),
                |reader, &handle| {
                    let entity = reader.get(handle).expect("live at the frame start");
                    let mut done = Counts {
                        lookups: 1,
                        ..Counts::default()
                    };
                    // A handle whose entity was despawned, in this frame or long ago,
                    // resolves to `None`, never to whatever reuses its slot.
                    let mut follow = |link: Option<Handle>| {
                        let found = reader.get(link?);
                        done.lookups += 1;
                        done.stale += u64::from(found.is_none());
                        found
                    };
                    let target = follow(entity.target);
                    let parent = follow(entity.parent);
                    // Wear the target down, if it lives, under the reader's
                    // guard; other workers may hit it at the same time.
                    if target.is_some() {
                        let hp = entity.target.and_then(|t| health.get(t, reader.guard()));
                        let hit = hp.is_some_and(|hp| {
                            hp.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                                h.checked_sub(1)
                            })
                            .is_ok()
                        });
                        done.hits += u64::from(hit);
                    }

                    let mut rng = Rng::new(entity.seed ^ u64::from(frame));
                    if entity.lifetime == 0 {
                        pool.remove(handle);
                        health.remove(handle);
                        done.despawned += 1;
                    } else if live < entities && rng.below(48) == 0 {
                        // The child chases its parent's target while that lives,
                        // else its grandparent.
                        let chase = match (target, parent) {
                            (Some(_), _) => entity.target,
                            (None, Some(_)) => entity.parent,
                            (None, None) => None,
                        };
                        let child = pool.insert(rng.spawn(Some(handle), chase, entity.x, entity.y));
                        health.insert(child, AtomicU32::new(HEALTH));
                        done.spawned += 1;
                    }
                    done
                },
            )
            .reduce(Counts::default, Counts::add);
        total = total + counts;

        // Exclusive phase, in parallel over the pool's storage: move
        // everyone, retarget some, list the handles (sorted, so that the
        // next frame's picks do not depend on how rayon split the work).
        next_handles.clear();
        let previous = &handles;
        next_handles.par_extend(pool.par_iter_mut().map(|(handle, entity)| {
            entity.x = (entity.x + entity.vx).rem_euclid(WORLD);
            entity.y = (entity.y + entity.vy).rem_euclid(WORLD);
            entity.lifetime = entity.lifetime.saturating_sub(1);
            let mut rng = Rng::new(entity.seed ^ u64::from(frame).rotate_left(32));
            if rng.below(16) == 0 {
                entity.target = Some(previous[rng.below(live as u64) as usize]);
            }
            handle
        }));
        next_handles.par_sort_unstable();
        std::mem::swap(&mut handles, &mut next_handles);
    }
    let wall = start.elapsed().as_secs_f64();
    let ops = total.lookups + total.spawned + total.despawned;
    // Every live entity has its health, and no despawned one.
    assert_eq!(health.len(), pool.len(), "one health per live entity");
    println!(
        "{on:>11}: {} pool operations ({} lookups, {} spawned, {} despawned), \
         {} stale lookups caught, {} live, {} hits on {} healths; {wall:.2} s, {:.1} M ops/s",
        ops,
        total.lookups,
        total.spawned,
        total.despawned,
        total.stale,
        handles.len(),
        total.hits,
        health.len(),
        ops as f64 / wall / 1e6
    );
    wall
}

/// `--frames N`, `--workers N` (or its old name `--threads N`) and
/// `--entities N` (default 40,000 per worker); anything else prints the usage.
fn parse_args() -> (u32, usize, usize) {
    let mut frames = DEFAULT_FRAMES;
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut entities = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        match (flag.as_str(), value.filter(|&n| n > 0)) {
            ("--frames", Some(n)) => frames = n.try_into().unwrap_or(u32::MAX),
            ("--workers" | "--threads", Some(n)) => workers = n,
            ("--entities", Some(n)) => entities = Some(n.max(2)),
            _ => {
                eprintln!("usage: job_system [--frames N] [--workers N] [--entities N]");
                std::process::exit(2);
            }
        }
    }
    (
        frames,
        workers,
        entities.unwrap_or(ENTITIES_PER_WORKER * workers),
    )
}
