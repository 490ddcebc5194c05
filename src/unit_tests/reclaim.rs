//! Who holds reclamation back: the calling thread's own guard or one-call
//! read, and nothing else.

use super::*;

#[test]
fn a_thread_holds_reclamation_back_while_pinned_or_inside_its_own_read() {
    // Enough words that this test thread has one (numbers are dense).
    let reclaimer = Reclaimer::new(1024);
    let other = Reclaimer::new(1024);
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
}
