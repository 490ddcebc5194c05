//! Who holds reclamation back: the calling thread's own guard, one-call
//! read or drops of reclaimed values, and nothing else.

use super::*;

#[test]
fn a_thread_holds_reclamation_back_while_pinned_reading_or_dropping_reclaimed_values() {
    // Enough words that this test thread has one (numbers are dense).
    let reclaimer = Reclaimer::new(1024);
    let other = Reclaimer::new(1024);
    // Without a number, it may be running thread-local destructors.
    if crate::thread_id::known_thread_id() == usize::MAX {
        assert!(reclaimer.held_back_here(), "no number");
    }
    // Taken as every insert takes it, before its slow path.
    assert!(crate::thread_id::thread_id().is_some());
    assert!(!reclaimer.held_back_here(), "idle");
    {
        let _guard = crate::pin();
        assert!(reclaimer.held_back_here(), "pinned");
    }
    assert!(!reclaimer.held_back_here(), "unpinned again");
    assert!(
        reclaimer.read(|| reclaimer.held_back_here()),
        "inside a one-call read"
    );
    assert!(
        reclaimer.read(|| reclaimer.read(|| reclaimer.held_back_here())),
        "inside a nested one-call read"
    );
    assert!(!reclaimer.held_back_here(), "after the read");
    assert!(
        !other.read(|| reclaimer.held_back_here()),
        "a read of another pool holds this one's reclamation back"
    );
    {
        let _dropping = super::DroppingReclaimed::enter();
        assert!(reclaimer.held_back_here(), "dropping reclaimed values");
    }
    assert!(!reclaimer.held_back_here(), "done dropping");
}
