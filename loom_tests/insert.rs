//! Inserts racing each other: for a free slot, across stripes, for a bucket.

use handle_pool::Config;

use super::harness::{expect_panic, setup, step, teardown, ExpectedPanic, Model, Reached};

/// One reusable slot, two inserts: one gets it (popping it, or reclaiming
/// its released batch first), the other takes a fresh slot; neither gets
/// the slot twice or loses it.
#[test]
fn inserts_racing_for_one_free_slot_take_distinct_slots() {
    Model {
        config: Config::tiny(8, 1),
        values: 3,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.remove(pool, 0);
            // Frees slot 0 and puts it on the free list at once.
            pool.reclaim();
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 1);
            }),
            step(|pool, r| {
                r.insert(pool, 2);
            }),
        ],
        teardown: teardown(|pool, r| {
            let (b, c) = (r.handle(1), r.handle(2));
            let mut indices = [b.index(), c.index()];
            indices.sort_unstable();
            assert_eq!(indices, [0, 1], "one reuses slot 0, the other is fresh");
            let reuser = if b.index() == 0 { b } else { c };
            assert_eq!(reuser.generation(), 2);
            r.observe_all(pool);
        }),
    }
    .check("inserts_racing_for_one_free_slot_take_distinct_slots");
}

/// Two stripes: the removed slot's batch is released on stripe 0, which is
/// quiet. The spawned thread's home is stripe 1, so it reclaims it from
/// stripe 0 while the main thread reclaims it at home (after which stripe 0
/// is busy, and the spawned thread grows instead); the slot is used once,
/// never stranded nor shared.
#[test]
fn insert_reclaims_a_batch_released_on_another_stripe() {
    let stolen = Reached::default();
    let at_home = Reached::default();
    let (s, h) = (stolen.clone(), at_home.clone());
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 1)
        },
        values: 3,
        setup: setup(|pool, r| {
            // The main thread's stripe is 0 (it is the first to ask).
            r.insert(pool, 0);
            r.remove(pool, 0);
            // Stripe 0 is quiet until its next insert, so the other
            // stripe may take its slots.
            pool.raw().quiet_stripes();
        }),
        threads: vec![
            // Spawned: stripe 1, empty.
            step(|pool, r| {
                r.insert(pool, 1);
            }),
            // Main: stripe 0, where the batch was released.
            step(|pool, r| {
                r.insert(pool, 2);
            }),
        ],
        teardown: teardown(move |pool, r| {
            let (thief, home) = (r.handle(1), r.handle(2));
            let mut indices = [thief.index(), home.index()];
            indices.sort_unstable();
            assert_eq!(
                indices,
                [0, 1],
                "the released slot is used once, not stranded"
            );
            if thief.index() == 0 {
                s.mark();
            } else {
                h.mark();
            }
            assert_eq!(
                r.log().drops(0),
                1,
                "reusing the slot dropped its old value"
            );
            r.observe_all(pool);
        }),
    }
    .check("insert_reclaims_a_batch_released_on_another_stripe");
    stolen.assert("the thread on the other stripe got the released slot");
    at_home.assert("the thread on the slot's stripe got it");
}

/// Slot 0 fills bucket 0; two inserts then race to allocate bucket 1 (slots
/// 1 and 2): one allocation wins, both values land in it.
#[test]
fn inserts_racing_for_a_new_bucket_share_one_allocation() {
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 1)
        },
        values: 3,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            assert_eq!(pool.capacity(), 1);
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 1);
                r.get(pool, 1);
            }),
            step(|pool, r| {
                r.insert(pool, 2);
                r.get(pool, 2);
            }),
        ],
        teardown: teardown(|pool, r| {
            let mut indices = [r.handle(1).index(), r.handle(2).index()];
            indices.sort_unstable();
            assert_eq!(indices, [1, 2]);
            assert_eq!(pool.capacity(), 3, "buckets of 1 and 2 slots, nothing more");
            r.observe_all(pool);
        }),
    }
    .check("inserts_racing_for_a_new_bucket_share_one_allocation");
}

/// A flat region of four slots (indices 0 to 3), three of them used; the
/// rest of the pool in buckets. Two inserts race for the last flat slot and
/// the first bucket slot, the main thread reading back what it inserted:
/// one commits slot 3 in the flat region (publishing its count), the other
/// allocates the bucket of slot 4; each value lands once, and every handle
/// resolves, on either side of the region's end.
#[test]
fn inserts_racing_across_the_flat_regions_end() {
    Model {
        config: Config {
            flat_slots: 4,
            ..Config::tiny(8, 1)
        },
        values: 5,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 3);
            }),
            step(|pool, r| {
                r.insert(pool, 4);
                r.get(pool, 4);
            }),
        ],
        teardown: teardown(|pool, r| {
            let mut indices = [r.handle(3).index(), r.handle(4).index()];
            indices.sort_unstable();
            assert_eq!(indices, [3, 4], "one flat slot, one bucket slot");
            r.observe_all(pool);
        }),
    }
    .check("inserts_racing_across_the_flat_regions_end");
}

/// The rollback path: `insert_with` pops slot `A` (free list `A → B`), its
/// closure inserts another value (popping `B`) and panics, so `A` goes back
/// on the list alone, with its generation burnt. Meanwhile a third insert
/// had read head `A` and link `B` and stalled: its CAS must fail (the tag
/// moved) or it would install `B`, which is occupied. The handle shown to
/// the closure never resolves, even once `A` is reused.
#[test]
fn insert_with_panic_gives_its_slot_back_aba_safe() {
    let reused = Reached::default();
    let seen = reused.clone();
    let shown = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (shown_t, shown_d) = (shown.clone(), shown);
    Model {
        config: Config::tiny(8, 2),
        values: 5,
        setup: setup(|pool, r| {
            r.insert(pool, 0);
            r.insert(pool, 1);
            r.remove(pool, 0);
            r.remove(pool, 1);
            // Frees slots 0 and 1 at once: free list 1 → 0.
            pool.reclaim();
        }),
        threads: vec![
            step(|pool, r| {
                r.insert(pool, 2);
            }),
            step(move |pool, r| {
                let mut handle = None;
                let panicked = expect_panic(|| {
                    pool.insert_with(|h| {
                        handle = Some(h);
                        r.insert(pool, 3);
                        std::panic::panic_any(ExpectedPanic)
                    });
                });
                assert!(panicked, "the closure's panic reaches the caller");
                *shown_t.lock().expect("shown handle") = handle;
            }),
        ],
        teardown: teardown(move |pool, r| {
            let shown = shown_d
                .lock()
                .expect("shown handle")
                .expect("the closure ran");
            if r.handle(2).index() == shown.index() {
                assert!(r.handle(2).generation() > shown.generation());
                seen.mark();
            }
            assert!(!pool.contains(shown), "the burnt handle stays stale");
            r.insert(pool, 4);
            assert!(!pool.contains(shown), "the burnt handle stays stale");
            r.observe_all(pool);
        }),
    }
    .check("insert_with_panic_gives_its_slot_back_aba_safe");
    reused.assert("the slot given back was reused");
}

/// `insert_many` pops a whole chain of free slots with one CAS, walking the
/// links below the head first. Meanwhile another thread's `insert_with`
/// pops the head `A`, its closure inserts (popping `B`, the next) and
/// panics, which puts `A` back on top alone: the head is `A` again, and
/// the chain walked through `B` is stale. The chain pop must fail and
/// retry; every slot goes to exactly one value.
#[test]
fn insert_many_racing_inserts_pops_disjoint_slots() {
    Model {
        config: Config::tiny(8, 4),
        values: 8,
        setup: setup(|pool, r| {
            for id in 0..3 {
                r.insert(pool, id);
            }
            for id in 0..3 {
                r.remove(pool, id);
            }
            // Frees slots 0, 1 and 2 at once: free list 2 → 1 → 0.
            pool.reclaim();
        }),
        threads: vec![
            step(|pool, r| {
                r.insert_many(pool, &[3, 4]);
            }),
            step(|pool, r| {
                let panicked = expect_panic(|| {
                    pool.insert_with(|_| {
                        r.insert(pool, 5);
                        std::panic::panic_any(ExpectedPanic)
                    });
                });
                assert!(panicked);
                r.insert(pool, 6);
            }),
        ],
        teardown: teardown(|pool, r| {
            let mut indices: Vec<u32> = (3..7).map(|id| r.handle(id).index()).collect();
            indices.sort_unstable();
            indices.dedup();
            assert_eq!(indices.len(), 4, "four values in four distinct slots");
            assert!(
                indices[..3] == [0, 1, 2],
                "the three free slots are used first"
            );
            r.insert(pool, 7);
            r.observe_all(pool);
        }),
    }
    .check("insert_many_racing_inserts_pops_disjoint_slots");
}

/// Two stripes, batches of one, one fresh slot at a time. Slot 0's batch is
/// ready on stripe 0, which is quiet. Thread A (stripe 0) removes a value, sealing a
/// second batch there, and inserts, reclaiming its own ready list; thread B
/// (stripe 1, empty) inserts at the same time, so it pops stripe 0's free
/// list or reclaims stripe 0's ready list from its slow path. The two get
/// distinct slots, and no slot is lost: once everything is flushed (and
/// both stripes are quiet), every slot handed out is live or reusable
/// without growing.
#[test]
fn insert_steals_another_stripes_ready_batch_against_its_owner() {
    let stolen = Reached::default();
    let at_home = Reached::default();
    let (s, h) = (stolen.clone(), at_home.clone());
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 1)
        },
        values: 6,
        setup: setup(|pool, r| {
            // The main thread's stripe is 0 (it is the first to ask).
            r.insert(pool, 0);
            r.insert(pool, 1);
            r.remove(pool, 0);
            // Stripe 0 quiet until its next insert (see above).
            pool.raw().quiet_stripes();
        }),
        threads: vec![
            // Spawned: stripe 1, empty.
            step(|pool, r| {
                r.insert(pool, 3);
            }),
            // Main: stripe 0, owner of the ready batch.
            step(|pool, r| {
                assert!(r.remove(pool, 1));
                r.insert(pool, 2);
            }),
        ],
        teardown: teardown(move |pool, r| {
            let (home, thief) = (r.handle(2), r.handle(3));
            assert_ne!(home.index(), thief.index(), "distinct slots");
            if thief.index() == 0 {
                s.mark();
            } else if home.index() == 0 {
                h.mark();
            }
            r.flush(pool);
            assert_eq!((r.log().drops(0), r.log().drops(1)), (1, 1));
            // Every slot handed out is live or free: filling them all
            // takes no fresh slot. A free slot may be on either stripe
            // (the thief reclaims every batch it finds clear, and may leave
            // one on its own list); with both quiet, this thread takes one
            // from the other before it grows.
            pool.raw().quiet_stripes();
            let used = pool.slots_used();
            let live = r.len(pool);
            assert!(used <= 4 && live == 2, "used {used}, live {live}");
            for id in 4..4 + (used - live) as u32 {
                r.insert(pool, id);
            }
            assert_eq!(pool.slots_used(), used, "a removed slot was lost");
            r.observe_all(pool);
        }),
    }
    .check("insert_steals_another_stripes_ready_batch_against_its_owner");
    stolen.assert("the thread on the other stripe got the ready slot");
    at_home.assert("the owner got its own ready slot");
}

/// Two stripes, batches of two. Slots 0 and 1 are free on stripe 0, which
/// is quiet. The spawned thread (stripe 1, empty) inserts, moving a run off
/// stripe 0's free list to its own and popping it, while the main thread
/// (stripe 0) inserts, popping the same list. The two get distinct slots;
/// a slot the move took is not also popped by the owner, nor lost: once
/// everything is flushed (and both stripes are quiet), every slot handed
/// out is live or reusable without growing, and the length counts each
/// insert once.
#[test]
fn insert_moves_a_quiet_stripes_free_slots_against_its_owner() {
    let moved = Reached::default();
    let m = moved.clone();
    Model {
        config: Config {
            stripes: 2,
            ..Config::tiny(8, 2)
        },
        values: 6,
        setup: setup(|pool, r| {
            // The main thread's stripe is 0 (it is the first to ask).
            for id in 0..3 {
                r.insert(pool, id);
            }
            r.remove(pool, 0);
            r.remove(pool, 1);
            // Slots 0 and 1 onto stripe 0's free list.
            r.flush(pool);
            pool.raw().quiet_stripes();
        }),
        threads: vec![
            // Spawned: stripe 1, empty.
            step(|pool, r| {
                r.insert(pool, 3);
            }),
            // Main: stripe 0, owner of the free slots.
            step(|pool, r| {
                r.insert(pool, 4);
            }),
        ],
        teardown: teardown(move |pool, r| {
            let (mover, owner) = (r.handle(3), r.handle(4));
            assert_ne!(mover.index(), owner.index(), "distinct slots");
            if mover.index() < 2 {
                m.mark();
            }
            assert_eq!(r.len(pool), 3, "each insert counted once");
            r.flush(pool);
            // A free slot may be on either stripe; with both quiet, this
            // thread takes one from the other before it grows.
            pool.raw().quiet_stripes();
            let used = pool.slots_used();
            assert!(used <= 4, "used {used}");
            for id in 5..5 + (used - 3) as u32 {
                r.insert(pool, id);
            }
            assert_eq!(pool.slots_used(), used, "a free slot was lost");
            r.observe_all(pool);
        }),
    }
    .check("insert_moves_a_quiet_stripes_free_slots_against_its_owner");
    moved.assert("the thread on the other stripe got a moved slot");
}
