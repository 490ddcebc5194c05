//! Guards' announcements: what holds a sealed batch back from reclamation
//! while a [`Guard`](crate::Guard) lives (see "Grace by announcement" in
//! the reclamation docs for the protocol, its state table and the
//! argument).
//!
//! Process-wide, because a guard belongs to no pool: one count of the
//! batches every pool has sealed, and one word per thread that holds
//! guards, in a list that only grows. A thread claims a word the first
//! time it pins and gives it back when it exits, after its last guard. A
//! thread that pins after its thread-locals began to be destroyed (nothing
//! would give a word back at its exit then) claims one for each outermost
//! guard and gives it back when that guard drops.

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr;

use crossbeam_utils::CachePadded;

use crate::sync::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// A word while its reader is in no protected section (and what the seal
/// count never is).
pub(crate) const IDLE: u64 = 0;

/// One thread's announcement, on the list of words.
struct Word {
    /// `IDLE`, or the seal count its thread's outermost guard saw when it
    /// was pinned (or last re-pinned). Written only by the thread that
    /// claimed the word.
    announced: CachePadded<AtomicU64>,
    /// Whether a thread owns the word.
    claimed: AtomicBool,
    /// The next word on the list; set before the word is published.
    next: *const Word,
}

// SAFETY: `next` is written only before the word is published by the
// Release CAS in `claim_new`, and never after; the rest is atomics.
unsafe impl Sync for Word {}

/// The process-wide state: the seal count and the list of words.
struct Shared {
    /// `1 +` how many batches every pool has sealed; a batch's position is
    /// the value this had just before its seal raised it. Only ever raised
    /// by `fetch_add` (never stored to): the argument needs every write to
    /// be a read-modify-write, so that a load reading any later value
    /// synchronises with every seal before it.
    sealed: CachePadded<AtomicU64>,
    /// The most recently added word; words are never removed or freed.
    words: AtomicPtr<Word>,
}

#[cfg(not(all(test, handle_pool_loom)))]
static SHARED: Shared = Shared {
    sealed: CachePadded::new(AtomicU64::new(1)),
    words: AtomicPtr::new(ptr::null_mut()),
};

#[cfg(not(all(test, handle_pool_loom)))]
#[inline(always)]
fn shared() -> &'static Shared {
    &SHARED
}

// Under loom, afresh for every explored execution.
#[cfg(all(test, handle_pool_loom))]
fn shared() -> &'static Shared {
    loom::lazy_static! {
        static ref SHARED: Shared = Shared {
            sealed: CachePadded::new(AtomicU64::new(1)),
            words: AtomicPtr::new(ptr::null_mut()),
        };
    }
    &SHARED
}

/// The calling thread's sections (guards alive, nested in any order). One
/// cell per field, so each step reads and writes only what it needs.
struct Sections {
    /// How many guards of this thread are alive.
    depth: Cell<usize>,
    /// The word the thread owns, once it has claimed one.
    word: Cell<Option<&'static Word>>,
    /// The thread's exit has begun (its `Claim` is gone): the last guard's
    /// drop gives the word back.
    exited: Cell<bool>,
}

impl Sections {
    /// A thread's sections before its first guard.
    const fn new() -> Sections {
        Sections {
            depth: Cell::new(0),
            word: Cell::new(None),
            exited: Cell::new(false),
        }
    }
}

/// Owns the thread's word from its claim to the thread's exit, when it
/// gives it back (or leaves that to the last guard, see `Sections::exited`).
struct Claim(&'static Word);

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = SECTIONS.try_with(|now| {
            now.exited.set(true);
            if now.depth.get() == 0 {
                now.word.set(None);
                release(self.0);
            }
        });
    }
}

#[cfg(not(all(test, handle_pool_loom)))]
std::thread_local! {
    /// Const and without drop glue: readable until the thread is gone,
    /// also from other thread-locals' destructors.
    static SECTIONS: Sections = const { Sections::new() };
    static CLAIM: Claim = Claim(claim());
}
#[cfg(all(test, handle_pool_loom))]
loom::thread_local! {
    static SECTIONS: Sections = Sections::new();
    static CLAIM: Claim = Claim(claim());
}

/// Gives a word back; its owner has cleared it.
fn release(word: &Word) {
    // Release pairs with the Acquire CAS in `claim`: the next owner's
    // writes come after ours.
    word.claimed.store(false, Ordering::Release);
}

/// A word nobody owns, claimed for the calling thread: a given-back one
/// if any, else a new one.
fn claim() -> &'static Word {
    words()
        .find(|word| {
            // Acquire pairs with the previous owner's Release in `release`.
            word.claimed
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })
        .unwrap_or_else(claim_new)
}

/// Every word on the list, the newest first.
fn words() -> impl Iterator<Item = &'static Word> {
    // Acquire pairs with the Release CAS in `claim_new`.
    let head = shared().words.load(Ordering::Acquire).cast_const();
    core::iter::successors(
        // SAFETY: words are never freed, and the Acquire load above (or
        // the one in `claim_new` before our CAS) pairs with the Release CAS
        // that published each word, whose `next` was written before it.
        unsafe { head.as_ref() },
        // SAFETY: as above: `next` is a published word or null.
        |word| unsafe { word.next.as_ref() },
    )
}

/// A new word, claimed, pushed on the list; never freed.
#[cold]
fn claim_new() -> &'static Word {
    let word = Box::into_raw(Box::new(Word {
        announced: CachePadded::new(AtomicU64::new(IDLE)),
        claimed: AtomicBool::new(true),
        next: ptr::null(),
    }));
    let mut head = shared().words.load(Ordering::Acquire);
    loop {
        // SAFETY: `word` came from `Box::into_raw` above and nobody else
        // sees it until the CAS below succeeds.
        unsafe { (*word).next = head };
        // Release pairs with the Acquire load of the head in `words`: the
        // word is initialised before it is seen.
        match shared()
            .words
            .compare_exchange_weak(head, word, Ordering::Release, Ordering::Acquire)
        {
            // SAFETY: leaked on purpose: words are never freed.
            Ok(_) => return unsafe { &*word },
            Err(actual) => head = actual,
        }
    }
}

/// Takes a position for a batch just sealed: what the seal count was just
/// before this seal raised it.
#[inline]
pub(crate) fn seal_position() -> u64 {
    // Release pairs with the Acquire loads in `announce`,
    // `Reclaimer::read_announced` and `sealed_so_far`: whoever reads this
    // increment (or a later one) sees the batch's slots removed.
    shared().sealed.fetch_add(1, Ordering::Release)
}

/// The seal count now, for an announcement or a reclaimer's bound.
#[inline]
pub(crate) fn sealed_so_far() -> u64 {
    // Acquire: see `seal_position`.
    shared().sealed.load(Ordering::Acquire)
}

/// Enters a guard's section (see the state table in the reclamation docs).
#[inline]
pub(crate) fn enter() {
    SECTIONS.with(|now| {
        let depth = now.depth.get();
        if depth == 0 {
            let word = match now.word.get() {
                Some(word) => word,
                None => claim_outermost(now),
            };
            announce(&word.announced);
        }
        now.depth.set(depth + 1);
    });
}

/// The word for the thread's outermost guard when it has none: the one it
/// claims for good on its first guard; or, once its exit has begun, one
/// for this guard alone (`exited` says to give it back when it drops).
#[cold]
#[inline(never)]
fn claim_outermost(now: &Sections) -> &'static Word {
    let kept = if now.exited.get() {
        None
    } else {
        CLAIM.try_with(|claim| claim.0).ok()
    };
    let word = kept.unwrap_or_else(|| {
        now.exited.set(true);
        claim()
    });
    now.word.set(Some(word));
    word
}

/// For the loom models: makes the calling thread one whose exit has begun
/// (as if its `Claim` had been dropped), with no guard alive.
#[cfg(all(test, handle_pool_loom))]
pub(crate) fn begin_exit() {
    SECTIONS.with(|now| {
        assert_eq!(now.depth.get(), 0, "no guard alive");
        if let Some(word) = now.word.take() {
            release(word);
        }
        now.exited.set(true);
    });
}

/// Announces the seal count in `word`, a guard's or a one-call read's (see
/// the argument in the docs): the reader loads no slot before this returns.
#[inline(always)]
pub(crate) fn announce(word: &AtomicU64) {
    // Release pairs with the reclaimer's Acquire loads in `oldest`.
    word.store(sealed_so_far(), Ordering::Release);
    // SeqCst pairs with the reclaimer's fence (`Reclaimer::horizon`):
    // either its load sees this announcement, or this reader's slot loads
    // see every removal that happened before its fence.
    fence(Ordering::SeqCst);
}

/// Clears `word` when its reader's protected section ends.
#[inline(always)]
pub(crate) fn clear(word: &AtomicU64) {
    // Release pairs with the Acquire loads in `oldest`: what the reader
    // did with its references happens before a reclamation that sees the
    // word cleared (or announced anew) drops the values.
    word.store(IDLE, Ordering::Release);
}

/// The oldest announcement among `words` (`u64::MAX` if none). The caller
/// has issued its `SeqCst` fence (see `Reclaimer::horizon`).
pub(crate) fn oldest<'a>(words: impl IntoIterator<Item = &'a AtomicU64>) -> u64 {
    words
        .into_iter()
        // Acquire pairs with the Release stores of `announce` and `clear`:
        // a section seen over is over before what the caller does next.
        .map(|word| word.load(Ordering::Acquire))
        .filter(|&announced| announced != IDLE)
        .min()
        .unwrap_or(u64::MAX)
}

/// A guard's announcement, withdrawn when this drops: what a [`Guard`](crate::Guard)
/// holds, and what protects a one-call read of a thread with no word in
/// the pool (see `Reclaimer::read`). Not `Send`: it must be left on the
/// thread that entered it.
pub(crate) struct Announcement(PhantomData<*const ()>);

impl Announcement {
    #[inline]
    pub(crate) fn begin() -> Announcement {
        enter();
        Announcement(PhantomData)
    }
}

impl Drop for Announcement {
    #[inline]
    fn drop(&mut self) {
        leave();
    }
}

/// Leaves a guard's section; the last one clears the announcement.
#[inline]
pub(crate) fn leave() {
    SECTIONS.with(|now| {
        let depth = now.depth.get();
        debug_assert!(depth > 0, "a guard's section left twice");
        now.depth.set(depth - 1);
        if depth == 1 {
            leave_outermost(now);
        }
    });
}

#[inline]
fn leave_outermost(now: &Sections) {
    if let Some(word) = now.word.get() {
        clear(&word.announced);
        if now.exited.get() {
            now.word.set(None);
            release(word);
        }
    }
}

/// Announces anew if this is the thread's only guard, so that batches
/// sealed since it was pinned can be reclaimed (`Guard::repin`).
pub(crate) fn renew() {
    SECTIONS.with(|now| {
        if now.depth.get() == 1 {
            if let Some(word) = now.word.get() {
                announce(&word.announced);
            }
        }
    });
}

/// Whether the calling thread holds a guard.
#[inline]
pub(crate) fn guarded_here() -> bool {
    SECTIONS
        .try_with(|now| now.depth.get() > 0)
        .unwrap_or(false)
}

/// The oldest announcement of a guard alive (`u64::MAX` if none). The
/// caller has issued its `SeqCst` fence (see `Reclaimer::horizon`).
pub(crate) fn oldest_guard() -> u64 {
    oldest(words().map(|word| &*word.announced))
}
