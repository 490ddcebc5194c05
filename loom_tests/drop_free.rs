//! Values without drop glue: a batch past its grace period goes onto a free
//! list unwalked, its slots still `REMOVED`, and a pop reuses them as they
//! are (see `docs/reclaim.md`). The models here use a value of their own,
//! since `harness::Tracked` has a `Drop`.

use std::sync::Arc;

use loom::cell::UnsafeCell;

use handle_pool::{pin, Config, HandlePool};

use super::harness::{explore, Reached};

/// A value without drop glue whose payload loom watches: a read of it is
/// checked by value, so a slot overwritten under a reader's reference is
/// caught (the overwrite itself is the pool's plain write, which loom does
/// not see).
struct Plain(UnsafeCell<u64>);

const _: () = assert!(!core::mem::needs_drop::<Plain>());

// SAFETY: the payload is written once, when the value is made, and only
// read afterwards, through shared references.
unsafe impl Sync for Plain {}

impl Plain {
    fn new(payload: u64) -> Self {
        Plain(UnsafeCell::new(payload))
    }

    fn read(&self) -> u64 {
        // SAFETY: a shared read; the only write was at creation.
        self.0.with(|payload| unsafe { *payload })
    }
}

/// The main thread removes a value through its magazine (batches of one,
/// so the removal seals a batch whose last slot is known), flushes, and
/// inserts again, reusing the slot once the batch is past its grace period,
/// unwalked. Meanwhile a reader pinned before it looked the value up reads
/// it after a scheduling point: it must still read the value it found.
#[test]
fn a_reader_keeps_a_drop_free_value_whose_batch_is_reused_unwalked() {
    reader_keeps_drop_free_value(
        "a_reader_keeps_a_drop_free_value_whose_batch_is_reused_unwalked",
        0,
    );
}

/// As above with the slot in the flat region: the main thread's removal
/// takes `RawPool::remove`'s inline path.
#[test]
fn a_reader_keeps_a_drop_free_value_whose_batch_is_reused_unwalked_in_the_flat_region() {
    reader_keeps_drop_free_value(
        "a_reader_keeps_a_drop_free_value_whose_batch_is_reused_unwalked_in_the_flat_region",
        4,
    );
}

/// The model above, with `flat_slots` slots in the flat region.
fn reader_keeps_drop_free_value(name: &str, flat_slots: u32) {
    let reused = Reached::default();
    let read_it = Reached::default();
    let (reused_in, read_in) = (reused.clone(), read_it.clone());
    explore(name, move || {
        let config = Config {
            stripes: 2,
            magazines: true,
            flat_slots,
            ..Config::tiny(8, 1)
        };
        let pool = Arc::new(HandlePool::<Plain>::with_config(config));
        let first = pool.insert(Plain::new(1));
        let reader = {
            let pool = Arc::clone(&pool);
            loom::thread::spawn(move || {
                let guard = pin();
                let value = pool.get(first, &guard)?;
                loom::thread::yield_now();
                Some(value.read())
            })
        };
        assert!(pool.remove(first));
        pool.flush();
        let second = pool.insert(Plain::new(2));
        if second.index() == first.index() {
            reused_in.mark();
        }
        {
            let guard = pin();
            assert!(pool.get(first, &guard).is_none(), "a stale handle resolved");
            assert_eq!(pool.get(second, &guard).map(Plain::read), Some(2));
        }
        if let Some(read) = reader.join().unwrap() {
            assert_eq!(read, 1, "a value was overwritten under its reader");
            read_in.mark();
        }
    });
    reused.assert("the slot reused after the flush");
    read_it.assert("the reader found the value");
}
