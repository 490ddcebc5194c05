//! The thread numbers' bitmap (`thread_id::Numbers`) on its own: the
//! process takes every thread's number from one, but the models' threads
//! take theirs from a counter (see `thread_id`), so these models exercise
//! the bitmap directly, each with a fresh one.
//!
//! What a number promises its thread: no other live thread holds it, and
//! the thread before it is done with it. A number owns a magazine in every
//! pool, written with plain stores; here a loom `UnsafeCell` per number
//! stands for it, so loom reports any write of a number's next holder that
//! is not ordered after its previous holder's.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use crate::thread_id::Numbers;

/// A fresh bitmap and one cell per number for the first `cells` numbers.
struct Registry {
    numbers: Numbers,
    /// What number `i`'s holder writes, as an owner writes its magazine.
    owned: Vec<UnsafeCell<usize>>,
}

impl Registry {
    fn new(cells: usize) -> Arc<Registry> {
        Arc::new(Registry {
            numbers: Numbers::new(),
            owned: (0..cells).map(|_| UnsafeCell::new(usize::MAX)).collect(),
        })
    }

    /// Claims a number and writes its cell, as a thread's first pool
    /// operation would; returns the number.
    fn take(&self, holder: usize) -> usize {
        let number = self.numbers.claim();
        // SAFETY: the cell is the number's, and only its holder touches it;
        // whether the holders are ordered is what loom checks.
        self.owned[number].with_mut(|cell| unsafe { *cell = holder });
        number
    }

    /// Writes the number's cell once more (the holder's last pool
    /// operation), then gives the number back.
    fn give_back(&self, number: usize, holder: usize) {
        // SAFETY: as in `take`.
        self.owned[number].with_mut(|cell| unsafe { *cell = holder });
        self.numbers.give_back(number);
    }
}

/// Two threads claim at once: two numbers, the two smallest.
#[test]
fn racing_claims_take_distinct_numbers_smallest_first() {
    loom::model(|| {
        let registry = Registry::new(2);
        let other = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || registry.take(1))
        };
        let mine = registry.take(0);
        let theirs = other.join().unwrap();
        let mut both = [mine, theirs];
        both.sort_unstable();
        assert_eq!(both, [0, 1]);
    });
}

/// One thread uses its number and gives it back while another claims: the
/// second thread gets the same number only after the first is done with
/// it (loom checks the two threads' writes of the number's cell), and
/// otherwise the next one.
#[test]
fn a_number_is_handed_on_only_after_its_last_use() {
    loom::model(|| {
        let registry = Registry::new(2);
        let leaving = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                let number = registry.take(1);
                registry.give_back(number, 1);
                number
            })
        };
        let mine = registry.take(2);
        let theirs = leaving.join().unwrap();
        assert!(mine <= 1 && theirs <= 1, "dense: {mine}, {theirs}");
        registry.give_back(mine, 2);
        assert_eq!(registry.numbers.claim(), 0, "both given back");
    });
}

/// A first segment full but for its last number: two threads claim at
/// once, and one takes that number while the other links a second segment
/// (or both race to link one, and the loser frees its own); numbers given
/// back in the second segment are handed on in order too.
#[test]
fn claims_past_a_full_segment_link_one_more_and_stay_distinct() {
    loom::model(|| {
        let last = Numbers::PER_SEGMENT - 1;
        let registry = Registry::new(Numbers::PER_SEGMENT + 2);
        for expected in 0..last {
            assert_eq!(registry.numbers.claim(), expected);
        }
        let other = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                let number = registry.take(1);
                registry.give_back(number, 1);
                number
            })
        };
        let mine = registry.take(2);
        let theirs = other.join().unwrap();
        assert!(mine == last || mine == last + 1, "{mine}");
        assert!(theirs == last || theirs == last + 1, "{theirs}");
        registry.give_back(mine, 2);
        assert_eq!(registry.numbers.claim(), last, "smallest first again");
    });
}
