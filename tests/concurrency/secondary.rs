//! `SecondaryMap` shared by workers while its primary pool churns: every
//! worker spawns entities, attaches a component to each, reads components
//! of entities other workers published (live, despawned, or whose slot was
//! reused since), replaces and removes components, and despawns. Every
//! value read belongs to the entity asked for, every value is dropped
//! exactly once, and a map racing on one entry keeps the newer generation.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use handle_pool::{pin, Config, Handle, HandlePool, SecondaryMap};

use crate::common::{self, Alive, Counted, Rng};
use crate::serial;

/// A component: the handle bits of the entity it was attached to, an
/// attachment count, and a boxed check word that makes a read of a freed
/// or reused value likely to show.
#[derive(Debug)]
struct Component {
    owner: u64,
    n: u64,
    check: Box<u64>,
    _alive: Counted,
}

const MAGIC: u64 = 0x9e37_79b9_7f4a_7c15;

impl Component {
    fn new(owner: Handle, n: u64, alive: &Alive) -> Self {
        Component {
            owner: owner.to_bits(),
            n,
            check: Box::new(owner.to_bits() ^ n ^ MAGIC),
            _alive: alive.value(),
        }
    }

    /// Panics unless this is a component of `entity`, intact.
    fn assert_of(&self, entity: Handle) {
        assert_eq!(
            self.owner,
            entity.to_bits(),
            "a component of {:?} read for {entity:?}",
            Handle::from_bits(self.owner)
        );
        assert_eq!(
            *self.check,
            self.owner ^ self.n ^ MAGIC,
            "a torn or freed component"
        );
    }
}

/// Handles the workers publish for each other to read (bits; 0 is none).
struct Board(Vec<AtomicU64>);

impl Board {
    fn new(len: usize) -> Self {
        Board((0..len).map(|_| AtomicU64::new(0)).collect())
    }

    fn post(&self, rng: &mut Rng, h: Handle) {
        self.0[rng.below(self.0.len())].store(h.to_bits(), Ordering::Relaxed);
    }

    fn pick(&self, rng: &mut Rng) -> Option<Handle> {
        Handle::from_bits(self.0[rng.below(self.0.len())].load(Ordering::Relaxed))
    }
}

/// Small batches, so that removed components are reclaimed (and their
/// value slots reused) many times in a run.
fn small_batches() -> Config {
    Config {
        batch: 4,
        ..Config::default()
    }
}

fn churn(threads: usize, run_for: Duration) {
    let _serial = serial();
    let alive = Alive::new();
    let entities: HandlePool<()> = HandlePool::with_config(small_batches());
    let components: SecondaryMap<Component> = SecondaryMap::with_config(small_batches());
    let board = Board::new(256);
    let reads_found = AtomicUsize::new(0);
    let deadline = Instant::now() + run_for;
    common::scope(|s| {
        for t in 0..threads {
            let (entities, components, board, alive, reads_found) =
                (&entities, &components, &board, &alive, &reads_found);
            s.spawn(move || {
                let mut rng = Rng::new(0x5ec0 + t as u64);
                let mut mine: Vec<Handle> = Vec::new();
                let mut n = 0;
                while Instant::now() < deadline {
                    for _ in 0..64 {
                        n += 1;
                        match rng.below(10) {
                            // Spawn, with a component.
                            0..=2 => {
                                let e = entities.insert(());
                                assert!(components.insert(e, Component::new(e, n, alive)));
                                mine.push(e);
                                board.post(&mut rng, e);
                            }
                            // Despawn: the component goes with it, or is left
                            // behind for the slot's next entity to replace.
                            3 if !mine.is_empty() => {
                                // The component first: once the entity is
                                // removed, another worker may reuse its slot and
                                // replace the component.
                                let e = mine.swap_remove(rng.below(mine.len()));
                                if rng.below(2) == 0 {
                                    assert!(components.remove(e), "own component missing");
                                }
                                entities.remove(e);
                            }
                            // Replace an own entity's component.
                            4 if !mine.is_empty() => {
                                let e = mine[rng.below(mine.len())];
                                assert!(components.insert(e, Component::new(e, n, alive)));
                            }
                            // Read what others published, under a guard and in
                            // one call.
                            _ => {
                                if let Some(e) = board.pick(&mut rng) {
                                    let guard = pin();
                                    if let Some(c) = components.get(e, &guard) {
                                        c.assert_of(e);
                                        reads_found.fetch_add(1, Ordering::Relaxed);
                                    }
                                    drop(guard);
                                    components.with(e, |c| c.assert_of(e));
                                }
                            }
                        }
                    }
                    for &e in &mine {
                        let guard = pin();
                        let c = components.get(e, &guard).expect("own live component");
                        c.assert_of(e);
                    }
                }
                for e in mine {
                    assert!(components.remove(e));
                    entities.remove(e);
                }
            });
        }
    });
    assert!(
        reads_found.load(Ordering::Relaxed) > 0,
        "the readers found components"
    );
    let mut components = components;
    // Only components of despawned entities whose slots were never reused
    // are left; each is its own entity's.
    for (e, c) in components.iter(&pin()) {
        c.assert_of(e);
        assert!(!entities.contains(e));
    }
    components.clear();
    assert!(components.is_empty());
    assert_eq!(alive.count(), 0, "every component dropped exactly once");
}

#[test]
fn components_read_under_churn_belong_to_their_entity_2_threads() {
    churn(2, Duration::from_millis(300));
}

#[test]
fn components_read_under_churn_belong_to_their_entity_4_threads() {
    churn(4, Duration::from_millis(300));
}

#[test]
#[ignore]
fn components_read_under_churn_belong_to_their_entity_long() {
    churn(8, Duration::from_secs(10));
}

/// Threads insert generations 1..=N for the same slot index in shuffled
/// orders at once; the newest stays, every other value is refused or
/// replaced, and each is dropped exactly once.
///
/// The threads start together on an atomic count and are joined: std's
/// `Barrier` and `thread::scope` synchronise inside uninstrumented std,
/// which ThreadSanitizer cannot see (see `common::scope`).
#[test]
fn racing_inserts_for_one_entry_keep_the_newest_generation() {
    let _serial = serial();
    const THREADS: u32 = 4;
    const PER_THREAD: u32 = 64;
    for round in 0..50u64 {
        let alive = Arc::new(Alive::new());
        let map: Arc<SecondaryMap<(u32, Counted)>> =
            Arc::new(SecondaryMap::with_config(small_batches()));
        let ready = Arc::new(AtomicUsize::new(0));
        let stored = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (map, ready, alive, stored) = (
                    Arc::clone(&map),
                    Arc::clone(&ready),
                    Arc::clone(&alive),
                    Arc::clone(&stored),
                );
                thread::spawn(move || {
                    let mut rng = Rng::new(round * 31 + u64::from(t));
                    let mut generations: Vec<u32> =
                        (0..PER_THREAD).map(|i| 1 + t + THREADS * i).collect();
                    for i in (1..generations.len()).rev() {
                        generations.swap(i, rng.below(i + 1));
                    }
                    ready.fetch_add(1, Ordering::AcqRel);
                    while ready.load(Ordering::Acquire) < THREADS as usize {
                        std::hint::spin_loop();
                    }
                    for g in generations {
                        let h = Handle::from_bits((u64::from(g) << 32) | 17).unwrap();
                        if map.insert(h, (g, alive.value())) {
                            stored.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let newest = THREADS * PER_THREAD;
        let h = Handle::from_bits((u64::from(newest) << 32) | 17).unwrap();
        assert_eq!(map.with(h, |(g, _)| *g), Some(newest), "round {round}");
        assert_eq!(map.len(), 1);
        assert!(stored.load(Ordering::Relaxed) >= 1);
        drop(map);
        assert_eq!(alive.count(), 0, "round {round}: every value dropped once");
    }
}

/// A reader holding a reference across a replacement and a remove of its
/// entry keeps reading the value it found, intact, while writers churn the
/// same entries and their value slots are reclaimed and reused.
#[test]
fn a_reference_outlives_the_replacement_of_its_entry() {
    let _serial = serial();
    let alive = Alive::new();
    let map: SecondaryMap<Component> = SecondaryMap::with_config(small_batches());
    let h = |g: u64| Handle::from_bits((g << 32) | 3).unwrap();
    map.insert(h(1), Component::new(h(1), 0, &alive));
    let generation = AtomicU64::new(1);
    let deadline = Instant::now() + Duration::from_millis(300);
    common::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while Instant::now() < deadline {
                n += 1;
                let g = generation.load(Ordering::Relaxed);
                let next = if n % 3 == 0 { g + 1 } else { g };
                map.insert(h(next), Component::new(h(next), n, &alive));
                generation.store(next, Ordering::Relaxed);
                if n % 5 == 0 {
                    map.remove(h(next));
                }
                map.flush();
            }
        });
        s.spawn(|| {
            while Instant::now() < deadline {
                let g = generation.load(Ordering::Relaxed);
                let guard = pin();
                if let Some(c) = map.get(h(g), &guard) {
                    for _ in 0..100 {
                        c.assert_of(h(g));
                        std::hint::spin_loop();
                    }
                }
            }
        });
    });
    drop(map);
    assert_eq!(alive.count(), 0);
}
