//! Where indices live: four buckets per doubling level, offsets inside them.

use super::*;
use crate::handle::MAX_INDEX;
#[cfg(all(unix, target_pointer_width = "64"))]
use crate::region::HUGE_PAGE;

/// Checks `locate` on `indices`, consecutive and ascending.
fn check_consecutive(storage: &Storage<u32>, indices: impl Iterator<Item = u32>) {
    let mut previous: Option<Location> = None;
    for index in indices {
        let at = storage.locate(index);
        assert!(at.bucket < KEPT, "index {index}: bucket {}", at.bucket);
        assert!(
            at.offset < Storage::<u32>::bucket_len(at.bucket),
            "index {index}: offset {} beyond bucket {} of {}",
            at.offset,
            at.bucket,
            Storage::<u32>::bucket_len(at.bucket)
        );
        if let Some(before) = previous {
            if at.bucket == before.bucket {
                assert_eq!(at.offset, before.offset + 1, "index {index}");
            } else {
                // A new bucket: a later quarter of the same level, or the
                // first quarter of the next.
                let same_level = at.bucket / 4 == before.bucket / 4;
                assert!(
                    if same_level {
                        at.bucket > before.bucket
                    } else {
                        at.bucket / 4 == before.bucket / 4 + 1 && at.bucket % 4 == 0
                    },
                    "index {index}: bucket {} after {}",
                    at.bucket,
                    before.bucket
                );
                assert_eq!(
                    before.offset + 1,
                    Storage::<u32>::bucket_len(before.bucket),
                    "index {index}"
                );
                assert_eq!(at.offset, 0, "index {index}");
            }
        }
        previous = Some(at);
    }
}

#[test]
fn every_index_has_one_place_and_buckets_follow_each_other() {
    for first_shift in [0, 1, 6] {
        let storage = Storage::<u32>::new(first_shift, 0, u32::MAX);
        assert_eq!(storage.locate(0).offset, 0);
        check_consecutive(&storage, 0..10_000);
        check_consecutive(&storage, u32::MAX - 10_000..u32::MAX);
    }
}

#[test]
fn the_last_indices_fit_the_last_bucket() {
    for first_shift in [0, 6] {
        let storage = Storage::<u32>::new(first_shift, 0, u32::MAX);
        // `MAX_INDEX` (u32::MAX - 1) lands inside a bucket in range, and
        // so does `u32::MAX` (the end-of-list mark, never a slot).
        for index in [u32::MAX - 1, u32::MAX] {
            let at = storage.locate(index);
            assert!(at.bucket < KEPT && at.offset < Storage::<u32>::bucket_len(at.bucket));
        }
    }
    // With a first level of 4 (the smallest): the last quarter of level 29
    // ends at index 2^32 - 5, and level 30 starts at 2^32 - 4.
    let storage = Storage::<u32>::new(0, 0, u32::MAX);
    let end = storage.locate(u32::MAX - 4);
    // Level `l` has `log2(shifted) = first_shift + l` (2 + l here), and
    // its buckets are numbered `4 * (log2 - 1) + quarter`.
    assert_eq!(end.bucket, 4 * (2 + 29 - 1) + 3);
    assert_eq!(end.offset, Storage::<u32>::bucket_len(end.bucket) - 1);
    let start = storage.locate(u32::MAX - 3);
    assert_eq!((start.bucket, start.offset), (4 * (2 + 30 - 1), 0));
}

#[test]
fn the_bucket_where_the_index_space_ends_holds_only_its_indices() {
    // (first shift, slots of the last bucket holding an index): its
    // shifted indices start at 2^32, where the last `first` indices live
    // (the first level holds at least 4).
    for (first_shift, last) in [(0u32, 4usize), (2, 4), (6, 64)] {
        let storage = Storage::<u64>::new(first_shift, 0, u32::MAX);
        storage.ensure(MAX_INDEX, MAX_INDEX + 1);
        // The whole bucket would be 2^30 slots (16 GiB here).
        assert_eq!(storage.capacity(), last, "first shift {first_shift}");
        // Every index a handle can carry, `u32::MAX` included, is inside
        // the allocation: write the slots of the last indices and read
        // them back (ASan would see a slot past the end).
        for index in u32::MAX - (last as u32 - 1)..=u32::MAX {
            let slot = storage.find(index).expect("in the allocated bucket");
            slot.word.store(index as u64, Ordering::Relaxed);
        }
        for index in u32::MAX - (last as u32 - 1)..=u32::MAX {
            assert_eq!(
                storage.slot(index).word.load(Ordering::Relaxed),
                index as u64
            );
        }
        assert!(
            storage.find(u32::MAX - last as u32).is_none(),
            "the bucket before is not allocated"
        );
    }
}

#[test]
fn allocated_slots_stay_within_a_quarter_of_those_in_use() {
    for first_shift in [0, 2, 6] {
        let storage = Storage::<u32>::new(first_shift, 0, u32::MAX);
        let first = 1usize << first_shift;
        let mut allocated = 0;
        let mut last_bucket = None;
        for index in (0..2_000_000u32).step_by(7).chain([u32::MAX - 1]) {
            let at = storage.locate(index);
            if last_bucket != Some(at.bucket) {
                // Growing to `index` allocates up to the end of its bucket.
                allocated = index as usize - at.offset + Storage::<u32>::bucket_len(at.bucket);
                last_bucket = Some(at.bucket);
            }
            let used = index as usize + 1;
            assert!(
                allocated <= used + used / 4 + first,
                "first_shift {first_shift}: {allocated} slots allocated for {used} in use"
            );
        }
    }
}

#[test]
fn every_bucket_keeps_its_own_address_where_no_lookup_reads() {
    // LeakSanitizer finds a bucket of a pool never dropped only through a
    // pointer into it: the biased entry points before the bucket.
    let storage = Storage::<u64>::new(2, 0, u32::MAX);
    storage.ensure(0, 1000);
    storage.ensure(MAX_INDEX, MAX_INDEX + 1);
    let mut kept = 0;
    for (bucket, first) in storage.allocated() {
        let own = storage.buckets[KEPT + bucket].load(Ordering::Relaxed);
        assert_eq!(own, first, "bucket {bucket}");
        assert!(!core::ptr::eq(
            storage.buckets[bucket].load(Ordering::Relaxed),
            first
        ));
        kept += 1;
    }
    assert!(kept > 10);
    // Nothing else lives in the upper half.
    let others = (KEPT..BUCKETS)
        .filter(|&entry| storage.buckets[entry].load(Ordering::Relaxed) != unallocated())
        .count();
    assert_eq!(others, kept);
}

#[test]
fn the_flat_region_ends_where_a_bucket_level_starts() {
    // It starts past the first chunk, at `FLAT_START` (64), and ends where a
    // level starts: `64 + reserved + first` a power of two.
    let all = usize::MAX;
    assert_eq!(FLAT_START, 64);
    // first = 64: levels start at shifted 64, 128, 256, 512, …
    assert_eq!(Storage::<u32>::flat_len(64, 0, u32::MAX, all), 0);
    assert_eq!(Storage::<u32>::flat_len(64, 127, u32::MAX, all), 0);
    assert_eq!(Storage::<u32>::flat_len(64, 128, u32::MAX, all), 128);
    assert_eq!(Storage::<u32>::flat_len(64, 383, u32::MAX, all), 128);
    assert_eq!(Storage::<u32>::flat_len(64, 384, u32::MAX, all), 384);
    // first = 16: the first chunk ends at shifted 80, a bucket's start.
    assert_eq!(Storage::<u32>::flat_len(16, 48, u32::MAX, all), 48);
    // first = 4: it ends at shifted 68, inside a bucket of 64..80: no
    // region, so that no bucket holds slots on both sides of its start.
    assert_eq!(Storage::<u32>::flat_len(4, u32::MAX, u32::MAX, all), 0);
    // A pool that never gets past its first chunk needs none.
    assert_eq!(Storage::<u32>::flat_len(64, 1000, 64, all), 0);
    // If every slot the pool may hand out fits, all of them past the first
    // chunk, aligned or not.
    assert_eq!(Storage::<u32>::flat_len(64, 1000, 100, all), 36);
    // At most `bytes` of slots: FLAT_BYTES, or what the budget allows.
    let size = core::mem::size_of::<Slot<u32>>();
    let by_bytes = FLAT_BYTES / size;
    let flat = Storage::<u32>::flat_len(64, u32::MAX, u32::MAX, FLAT_BYTES);
    assert!(flat <= by_bytes && (flat as u64 + 128).is_power_of_two());
    assert!(2 * (flat + 128) > by_bytes + 128);
    assert_eq!(Storage::<u32>::flat_len(64, u32::MAX, u32::MAX, 0), 0);
    assert_eq!(
        Storage::<u32>::flat_len(64, u32::MAX, u32::MAX, 384 * size),
        384
    );
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn a_pool_reserves_nothing_until_it_outgrows_its_first_chunk() {
    let storage = Storage::<u64>::new(6, u32::MAX, u32::MAX);
    let decided = || !storage.decision.load(Ordering::Relaxed).is_null();
    storage.ensure(0, 16);
    storage.ensure(16, FLAT_START);
    assert!(!decided(), "the first chunk reserved a region");
    assert_eq!(storage.capacity(), FLAT_START as usize);
    assert_eq!(storage.flat_committed.load(Ordering::Relaxed), 0);
    // The first slot past it reserves the region, and commits from there.
    storage.ensure(FLAT_START, FLAT_START + 16);
    assert!(decided());
    let region = storage.flat_region();
    assert!(region.region.is_some() && region.reserved > 0);
    assert_eq!(storage.capacity(), FLAT_START as usize + 16);
    let flat = storage.flat.load(Ordering::Relaxed);
    assert!(core::ptr::eq(flat, region.slots));
    for index in 0..FLAT_START + 16 {
        let slot = storage.find(index).expect("allocated");
        let in_region = core::ptr::eq(slot, flat.wrapping_add(Storage::<u64>::flat_offset(index)));
        assert_eq!(in_region, index >= FLAT_START, "index {index}");
    }
}

#[test]
fn a_pool_without_a_flat_region_keeps_every_slot_in_buckets() {
    // No flat slots asked for; a first level whose chunk ends inside a
    // bucket: decided once, no region, and every slot in a bucket.
    for (first_shift, flat_slots) in [(6, 0), (0, u32::MAX)] {
        let storage = Storage::<u32>::new(first_shift, flat_slots, u32::MAX);
        storage.ensure(0, 1000);
        assert_eq!(storage.flat_region().reserved, 0);
        assert_eq!(storage.flat_committed.load(Ordering::Relaxed), 0);
        for index in 0..1000 {
            storage
                .slot(index)
                .word
                .store(index as u64, Ordering::Relaxed);
        }
        let seen: Vec<u64> = storage
            .slots(1000)
            .map(|(_, slot)| slot.word.load(Ordering::Relaxed))
            .collect();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    }
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn slots_of_the_flat_region_are_flat_and_the_rest_in_buckets() {
    // first 64: the first chunk (0..64) in level 0's buckets, a flat region
    // of 128 slots (64..192, up to shifted 256), then buckets.
    let storage = Storage::<u32>::new(6, 128, u32::MAX);
    assert_eq!(storage.capacity(), 0);
    assert!(storage.find(0).is_none(), "nothing is allocated yet");
    storage.ensure(0, 3);
    // The first chunk's bucket: 16 slots.
    assert_eq!(storage.capacity(), 16);
    storage.ensure(64, 67);
    assert_eq!(storage.flat_region().reserved, 128);
    // Exactly the slots asked for, though a whole page is mapped.
    assert_eq!(storage.capacity(), 16 + 3);
    assert!(storage.find(67).is_none(), "mapped but not committed");
    // Across the region's start: the first chunk's buckets, then the region.
    storage.ensure(50, 192);
    assert_eq!(storage.capacity(), 16 + 16 + 128);
    let flat = storage.flat.load(Ordering::Relaxed);
    for index in 64..192u32 {
        let slot = storage.find(index).expect("committed");
        assert!(core::ptr::eq(slot, flat.wrapping_add(index as usize - 64)));
        assert_eq!(
            slot.word.load(Ordering::Relaxed),
            0,
            "fresh slots are FREE(0, 0)"
        );
    }
    assert!(storage.find(192).is_none(), "bucket not allocated yet");
    // Across the region's end: the rest of the range goes to buckets
    // (level 256..512 of shifted indices, four buckets of 64).
    storage.ensure(190, 200);
    assert_eq!(storage.capacity(), 16 + 16 + 128 + 64);
    let slot = storage.find(192).expect("allocated");
    assert!(!core::ptr::eq(slot, flat.wrapping_add(128)));
    // Writes land where later lookups read, in index order.
    storage.ensure(0, 64);
    for index in 0..200u32 {
        storage
            .slot(index)
            .word
            .store(index as u64 + 1, Ordering::Relaxed);
    }
    let seen: Vec<(u32, u64)> = storage
        .slots(200)
        .map(|(index, slot)| (index, slot.word.load(Ordering::Relaxed)))
        .collect();
    assert_eq!(
        seen,
        (0..200).map(|i| (i, i as u64 + 1)).collect::<Vec<_>>()
    );
    // A view finds the same slots, and an index below the region (which
    // wraps past its count) through the buckets.
    let view = storage.view();
    for index in [0, 63, 64, 191, 192, 199] {
        let through_view = view.find_or(index, |slot| slot as *const Slot<u32>, ptr::null());
        assert!(
            core::ptr::eq(through_view, storage.slot(index)),
            "index {index}"
        );
    }
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn racing_first_slots_past_the_chunk_install_one_region() {
    // Eight threads each ask for their own slots past the first chunk at
    // once: one region is installed, the others' are unmapped, and every
    // slot is where a lookup finds it. (Threads joined with `join`, which
    // ThreadSanitizer sees, rather than a scope, whose join it does not.)
    for _ in 0..20 {
        let storage = std::sync::Arc::new(Storage::<u64>::new(6, u32::MAX, u32::MAX));
        let threads: Vec<_> = (0..8u32)
            .map(|thread| {
                let storage = std::sync::Arc::clone(&storage);
                std::thread::spawn(move || {
                    let start = FLAT_START + 16 * thread;
                    storage.ensure(start, start + 16);
                    for index in start..start + 16 {
                        storage
                            .slot(index)
                            .word
                            .store(u64::from(index), Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let flat = storage.flat.load(Ordering::Relaxed);
        assert!(core::ptr::eq(flat, storage.flat_region().slots));
        for index in FLAT_START..FLAT_START + 128 {
            let slot = storage.slot(index);
            assert!(core::ptr::eq(
                slot,
                flat.wrapping_add(Storage::<u64>::flat_offset(index))
            ));
            assert_eq!(slot.word.load(Ordering::Relaxed), u64::from(index));
        }
    }
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn the_flat_region_maps_an_eighth_ahead_and_commits_what_is_asked() {
    let storage = Storage::<u64>::new(6, u32::MAX, u32::MAX);
    storage.ensure(0, FLAT_START + 16);
    // A region of huge pages' size starts on a huge-page boundary.
    assert_eq!(storage.flat.load(Ordering::Relaxed) as usize % HUGE_PAGE, 0);
    let region = storage.flat_region();
    let mapping = region.region.as_ref().unwrap();
    let size = core::mem::size_of::<Slot<u64>>();
    let mut maps = 0;
    let mut last = 0;
    for end in (16..=1_000_000u32).step_by(16) {
        storage.ensure(FLAT_START + end - 16, FLAT_START + end);
        assert_eq!(storage.capacity(), (FLAT_START + end) as usize);
        let mapped = region.mapped.load(Ordering::Relaxed);
        if mapped != last {
            maps += 1;
            last = mapped;
        }
        let used = end as usize * size;
        assert!(mapped >= used);
        // An eighth ahead, in whole pages, and from 2 MiB on in whole huge
        // pages, so that every extent a huge page may serve is mapped whole
        // before the pool first writes to it.
        let page = mapping.page();
        let ahead = used + used / 8 + page;
        let grain = if ahead >= HUGE_PAGE { HUGE_PAGE } else { page };
        assert!(
            mapped <= ahead.next_multiple_of(grain),
            "{mapped} bytes mapped for {used}"
        );
        if mapped >= HUGE_PAGE {
            assert_eq!(
                mapped % HUGE_PAGE,
                0,
                "{mapped} bytes mapped: not whole huge pages"
            );
        }
    }
    assert!(maps < 120, "{maps} system calls to grow to a million slots");
    // A region that holds every slot the pool may hand out stops at its end.
    let small = Storage::<u64>::new(6, 1000, 1000);
    small.ensure(0, 1000);
    assert_eq!(small.capacity(), 1000);
    let region = small.flat_region();
    assert_eq!(region.reserved, 1000 - FLAT_START as usize);
    assert!(region.mapped.load(Ordering::Relaxed) <= region.region.as_ref().unwrap().len());
}
