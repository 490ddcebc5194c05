//! A job system sharing one pool of game entities.
//!
//! Every frame, rayon tasks look each entity up by its handle and follow the
//! handles it keeps to its target and its parent. Those may have been
//! despawned since: the lookup then comes back `None` and is counted. In the
//! same parallel pass, expired entities are despawned (`remove`) and new
//! ones spawned (`insert`), all through a shared `&HandlePool`. Then one pass
//! through `&mut` moves every entity and collects the next frame's handles.
//!
//! ```sh
//! cargo run --release -p handle-pool-demo                        # 1000 frames, a few seconds
//! cargo run --release -p handle-pool-demo -- --frames 50 --threads 4
//! ```
//!
//! The seed fixes every entity's choices, so the entity counts repeat from
//! run to run; which slot a spawn lands in depends on thread timing, so the
//! targets picked, and with them the lookup counts, vary slightly.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use handle_pool::{Handle, HandlePool, Reader};
use rayon::prelude::*;

const INITIAL_ENTITIES: usize = 20_000;
/// No spawns while this many entities or more are alive.
const SOFT_CAP: usize = 40_000;
/// Side of the square, wrapping world.
const WORLD: i32 = 4096;
const SEED: u64 = 0x5eed_2026;
const DEFAULT_FRAMES: u32 = 1000;
const REPORT_EVERY: u32 = 100;

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

fn main() {
    let (frames, threads) = parse_args();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("start rayon's thread pool");
    println!("job_system: {threads} rayon workers, {frames} frames");

    let mut pool: HandlePool<Entity> = HandlePool::new();
    let mut rng = Rng::new(SEED);
    let mut handles: Vec<Handle> = (0..INITIAL_ENTITIES)
        .map(|_| {
            let (x, y) = (
                rng.below(WORLD as u64) as i32,
                rng.below(WORLD as u64) as i32,
            );
            pool.insert(rng.spawn(None, None, x, y))
        })
        .collect();
    for (_, entity) in pool.iter_mut() {
        entity.target = Some(handles[rng.below(handles.len() as u64) as usize]);
    }
    let mut next_handles = Vec::new();

    let ops = AtomicU64::new(INITIAL_ENTITIES as u64);
    let stale = AtomicU64::new(0);
    let start = Instant::now();
    for frame in 0..frames {
        let live = handles.len();
        // Shared phase: lookups, despawns and spawns race on `&pool`.
        handles
            .par_iter()
            // A reader per rayon split: its own guard, and the pool's
            // storage read once for the split's lookups.
            .for_each_init(
                || pool.reader(),
                |reader, &handle| {
                    let reader: &Reader<Entity> = reader;
                    let entity = reader.get(handle).expect("live at the frame start");
                    let mut done = 1;
                    // A handle whose entity was despawned, in this frame or long ago,
                    // resolves to `None`, never to whatever reuses its slot.
                    let mut follow = |link: Option<Handle>| {
                        let found = reader.get(link?);
                        done += 1;
                        if found.is_none() {
                            stale.fetch_add(1, Relaxed);
                        }
                        found
                    };
                    let target = follow(entity.target);
                    let parent = follow(entity.parent);

                    let mut rng = Rng::new(entity.seed ^ u64::from(frame));
                    if entity.lifetime == 0 {
                        pool.remove(handle);
                        done += 1;
                    } else if live < SOFT_CAP && rng.below(48) == 0 {
                        // The child chases its parent's target while that lives,
                        // else its grandparent.
                        let chase = match (target, parent) {
                            (Some(_), _) => entity.target,
                            (None, Some(_)) => entity.parent,
                            (None, None) => None,
                        };
                        pool.insert(rng.spawn(Some(handle), chase, entity.x, entity.y));
                        done += 1;
                    }
                    ops.fetch_add(done, Relaxed);
                },
            );

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

        if (frame + 1) % REPORT_EVERY == 0 || frame + 1 == frames {
            println!(
                "frame {:>5}/{frames}: {:>6} live, {:>6.1} M ops, {:>5.2} s",
                frame + 1,
                handles.len(),
                ops.load(Relaxed) as f64 / 1e6,
                start.elapsed().as_secs_f64()
            );
        }
    }

    let wall = start.elapsed().as_secs_f64();
    let ops = ops.into_inner();
    println!();
    println!("frames:               {frames}");
    println!("pool operations:      {ops}");
    println!("stale lookups caught: {}", stale.into_inner());
    println!(
        "throughput:           {:.1} M ops/s",
        ops as f64 / wall / 1e6
    );
    println!("wall time:            {wall:.2} s");
}

/// `--frames N` and `--threads N`; anything else prints the usage.
fn parse_args() -> (u32, usize) {
    let mut frames = DEFAULT_FRAMES;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u32>().ok());
        match (flag.as_str(), value.filter(|&n| n > 0)) {
            ("--frames", Some(n)) => frames = n,
            ("--threads", Some(n)) => threads = n as usize,
            _ => {
                eprintln!("usage: job_system [--frames N] [--threads N]");
                std::process::exit(2);
            }
        }
    }
    (frames, threads)
}
