use super::thread_id;
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
