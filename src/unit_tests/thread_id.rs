use super::{thread_id, Numbers};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

#[test]
fn live_threads_have_distinct_numbers_and_exited_ones_are_reused() {
    // Eight threads alive at once: eight distinct numbers.
    let barrier = Arc::new(Barrier::new(8));
    let mut ids: Vec<usize> = (0..8)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let id = thread_id().expect("a live thread has a number");
                barrier.wait();
                id
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 8, "two live threads shared a number");
    // Exited threads give their numbers back: a hundred threads one
    // after another stay within the few numbers in use (other tests'
    // threads may hold some meanwhile, a bounded few).
    let largest = (0..100)
        .map(|_| std::thread::spawn(|| thread_id().unwrap()).join().unwrap())
        .max()
        .unwrap();
    assert!(
        largest < 64,
        "numbers grew to {largest}: exited threads' numbers were not reused"
    );
}

#[test]
fn numbers_are_claimed_smallest_first_and_reused_when_given_back() {
    let numbers = Numbers::new();
    let first: Vec<usize> = (0..5).map(|_| numbers.claim()).collect();
    assert_eq!(first, [0, 1, 2, 3, 4]);
    numbers.give_back(3);
    numbers.give_back(1);
    assert_eq!(numbers.claim(), 1, "the smallest free number first");
    assert_eq!(numbers.claim(), 3);
    assert_eq!(numbers.claim(), 5, "then the next never used");
}

#[test]
fn numbers_past_a_segment_live_in_the_next_and_stay_dense() {
    // Three segments' worth: the bitmap grows by linking segments, and
    // numbers given back in any of them are taken again first.
    let numbers = Numbers::new();
    let count = 2 * Numbers::PER_SEGMENT + 70;
    let claimed: Vec<usize> = (0..count).map(|_| numbers.claim()).collect();
    assert!(claimed.iter().copied().eq(0..count), "dense, in order");
    let given_back = [5, Numbers::PER_SEGMENT + 64, 2 * Numbers::PER_SEGMENT + 69];
    for &number in given_back.iter().rev() {
        numbers.give_back(number);
    }
    let again: Vec<usize> = (0..3).map(|_| numbers.claim()).collect();
    assert_eq!(again, given_back, "smallest first, across segments");
    assert_eq!(numbers.claim(), count);
}

#[test]
fn racing_claims_never_hand_one_number_to_two_holders() {
    // Eight threads claim, hold and give back numbers as fast as they can;
    // each marks its number held while it has it, and finds it unheld.
    const THREADS: usize = 8;
    let numbers = Numbers::new();
    let held: Vec<AtomicBool> = (0..THREADS).map(|_| AtomicBool::new(false)).collect();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..20_000 {
                    let number = numbers.claim();
                    // At most THREADS numbers are held at once: dense.
                    assert!(number < THREADS, "number {number} with {THREADS} holders");
                    assert!(
                        !held[number].swap(true, Ordering::Relaxed),
                        "number {number} held twice"
                    );
                    held[number].store(false, Ordering::Relaxed);
                    numbers.give_back(number);
                }
            });
        }
    });
    assert_eq!(numbers.claim(), 0, "every number was given back");
}

#[test]
#[should_panic(expected = "given back twice")]
#[cfg(debug_assertions)]
fn a_number_given_back_twice_panics_in_debug_builds() {
    let numbers = Numbers::new();
    let number = numbers.claim();
    numbers.give_back(number);
    numbers.give_back(number);
}
