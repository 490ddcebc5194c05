//! Where indices live: buckets of doubling size, offsets inside them.

use super::*;

/// Checks `locate` on `indices`, consecutive and ascending.
fn check_consecutive<T>(storage: &Storage<T>, indices: impl Iterator<Item = u32>) {
    let mut previous: Option<Location> = None;
    for index in indices {
        let at = storage.locate(index);
        assert!(at.bucket < BUCKETS, "index {index}: bucket {}", at.bucket);
        assert!(
            at.offset < storage.bucket_len(at.bucket),
            "index {index}: offset {} beyond bucket {} of {}",
            at.offset,
            at.bucket,
            storage.bucket_len(at.bucket)
        );
        if let Some(before) = previous {
            if at.bucket == before.bucket {
                assert_eq!(at.offset, before.offset + 1, "index {index}");
            } else {
                assert_eq!(at.bucket, before.bucket + 1, "index {index}");
                assert_eq!(
                    before.offset + 1,
                    storage.bucket_len(before.bucket),
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
        let at = storage.locate(0);
        assert_eq!((at.bucket, at.offset), (0, 0));
        check_consecutive(&storage, 0..10_000);
        check_consecutive(&storage, u32::MAX - 10_000..u32::MAX);
    }
}

#[test]
fn the_last_indices_fit_the_last_bucket() {
    let storage = Storage::<u32>::new(0);
    let last = storage.locate(u32::MAX - 1);
    // `MAX_INDEX` (u32::MAX - 1) is the last slot of bucket 31.
    assert_eq!(last.bucket, 31);
    assert_eq!(last.offset, storage.bucket_len(31) - 1);
    let start = storage.locate((1u32 << 31) - 1);
    assert_eq!((start.bucket, start.offset), (31, 0));
}
