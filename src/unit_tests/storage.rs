//! Where indices live: four buckets per doubling level, offsets inside them.

use super::*;

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
        let storage = Storage::<u32>::new(first_shift);
        assert_eq!(storage.locate(0).offset, 0);
        check_consecutive(&storage, 0..10_000);
        check_consecutive(&storage, u32::MAX - 10_000..u32::MAX);
    }
}

#[test]
fn the_last_indices_fit_the_last_bucket() {
    for first_shift in [0, 6] {
        let storage = Storage::<u32>::new(first_shift);
        // `MAX_INDEX` (u32::MAX - 1) lands inside a bucket in range, and
        // so does `u32::MAX` (the end-of-list mark, never a slot).
        for index in [u32::MAX - 1, u32::MAX] {
            let at = storage.locate(index);
            assert!(at.bucket < BUCKETS && at.offset < Storage::<u32>::bucket_len(at.bucket));
        }
    }
    // With a first level of 4 (the smallest): the last quarter of level 29
    // ends at index 2^32 - 5, and level 30 starts at 2^32 - 4.
    let storage = Storage::<u32>::new(0);
    let end = storage.locate(u32::MAX - 4);
    // Level `l` has `log2(shifted) = first_shift + l` (2 + l here), and
    // its buckets are numbered `4 * (log2 - 1) + quarter`.
    assert_eq!(end.bucket, 4 * (2 + 29 - 1) + 3);
    assert_eq!(end.offset, Storage::<u32>::bucket_len(end.bucket) - 1);
    let start = storage.locate(u32::MAX - 3);
    assert_eq!((start.bucket, start.offset), (4 * (2 + 30 - 1), 0));
}

#[test]
fn allocated_slots_stay_within_a_quarter_of_those_in_use() {
    for first_shift in [0, 2, 6] {
        let storage = Storage::<u32>::new(first_shift);
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
