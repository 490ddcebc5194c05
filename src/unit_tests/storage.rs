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
        assert!(at.bucket < BUCKETS, "index {index}: bucket {}", at.bucket);
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
            assert!(at.bucket < BUCKETS && at.offset < Storage::<u32>::bucket_len(at.bucket));
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
fn the_flat_region_ends_where_a_bucket_level_starts() {
    // first = 4: levels start at shifted 4, 8, 16, …
    assert_eq!(Storage::<u32>::flat_len(4, 0, u32::MAX), 0);
    assert_eq!(Storage::<u32>::flat_len(4, 12, u32::MAX), 12);
    assert_eq!(Storage::<u32>::flat_len(4, 13, u32::MAX), 12);
    assert_eq!(Storage::<u32>::flat_len(4, 27, u32::MAX), 12);
    assert_eq!(Storage::<u32>::flat_len(4, 28, u32::MAX), 28);
    // If every slot the pool may hand out fits, all of them, aligned or not.
    assert_eq!(Storage::<u32>::flat_len(64, 1000, 100), 100);
    // At most FLAT_BYTES of slots.
    let by_bytes = FLAT_BYTES / core::mem::size_of::<Slot<u32>>();
    let flat = Storage::<u32>::flat_len(64, u32::MAX, u32::MAX);
    assert!(flat <= by_bytes && (flat as u64 + 64).is_power_of_two());
    assert!(2 * (flat + 64) > by_bytes + 64);
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn slots_below_the_flat_region_end_are_flat_and_the_rest_in_buckets() {
    // first 4, flat region of 12 slots (up to shifted 16), then buckets.
    let storage = Storage::<u32>::new(2, 12, u32::MAX);
    assert_eq!(storage.flat_reserved, 12);
    assert_eq!(storage.capacity(), 0);
    assert!(storage.find(0).is_none(), "nothing is committed yet");
    storage.ensure(0, 3);
    // Exactly the slots asked for, though a whole page is mapped.
    assert_eq!(storage.capacity(), 3);
    assert!(storage.find(3).is_none(), "mapped but not committed");
    storage.ensure(3, 12);
    assert_eq!(storage.capacity(), 12);
    let flat = storage.flat.load(Ordering::Relaxed);
    for index in 0..12u32 {
        let slot = storage.find(index).expect("committed");
        assert!(core::ptr::eq(slot, flat.wrapping_add(index as usize)));
        assert_eq!(
            slot.word.load(Ordering::Relaxed),
            0,
            "fresh slots are FREE(0, 0)"
        );
    }
    assert!(storage.find(12).is_none(), "bucket not allocated yet");
    // Across the boundary: the rest of the range goes to buckets (level
    // 16..32 of shifted indices, four buckets of four).
    storage.ensure(10, 28);
    assert_eq!(storage.capacity(), 12 + 16);
    let slot = storage.find(12).expect("allocated");
    assert!(!core::ptr::eq(slot, flat.wrapping_add(12)));
    // Writes land where later lookups read.
    for index in 0..28u32 {
        storage
            .slot(index)
            .word
            .store(index as u64 + 1, Ordering::Relaxed);
    }
    let seen: Vec<(u32, u64)> = storage
        .slots(28)
        .map(|(index, slot)| (index, slot.word.load(Ordering::Relaxed)))
        .collect();
    assert_eq!(seen, (0..28).map(|i| (i, i as u64 + 1)).collect::<Vec<_>>());
}

#[cfg(all(unix, target_pointer_width = "64"))]
#[test]
fn the_flat_region_maps_an_eighth_ahead_and_commits_what_is_asked() {
    let storage = Storage::<u64>::new(6, u32::MAX, u32::MAX);
    // A region of huge pages' size starts on a huge-page boundary.
    assert_eq!(storage.flat.load(Ordering::Relaxed) as usize % HUGE_PAGE, 0);
    let size = core::mem::size_of::<Slot<u64>>();
    let mut maps = 0;
    let mut last = 0;
    for end in (16..=1_000_000u32).step_by(16) {
        storage.ensure(end - 16, end);
        assert_eq!(storage.capacity(), end as usize);
        let mapped = storage.flat_mapped.load(Ordering::Relaxed);
        if mapped != last {
            maps += 1;
            last = mapped;
        }
        let used = end as usize * size;
        assert!(mapped >= used);
        // An eighth ahead, in whole pages, and from 2 MiB on in whole huge
        // pages, so that every extent a huge page may serve is mapped whole
        // before the pool first writes to it.
        let page = storage.region.as_ref().unwrap().page();
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
    assert!(small.flat_mapped.load(Ordering::Relaxed) <= small.region.as_ref().unwrap().len());
}
