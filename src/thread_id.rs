//! Thread numbers: small, dense, reused after a thread exits. A number
//! picks the thread's home stripe and the magazine it owns in every pool.
//! A thread takes its number on its first operation on any pool, lock-free
//! (a CAS on a bitmap of the numbers in use, see [`Numbers`]), and gives
//! it back when its thread-locals are destroyed, with one atomic AND.

use core::ptr;

use crate::sync::{AtomicPtr, AtomicU64, Ordering};

/// The calling thread's number: no two live threads have the same, and a
/// thread that exits gives its number back for the next new thread (the
/// smallest free number first), so the numbers in use stay dense. The
/// number picks the thread's home stripe, and the thread numbered `i` owns
/// magazine `i` of every pool that has one (see `magazine`): a number is
/// handed on only after its previous thread has run its last pool
/// operation (see [`Numbers`]).
///
/// `None` from the start of the number's own thread-local destructor on
/// (a value dropped by a thread-local destructor that runs later may still
/// use a pool): such a thread owns no magazine any more. Destructors that
/// run before it still see the number.
#[inline]
pub(crate) fn thread_id() -> Option<usize> {
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        match known_thread_id() {
            registry::NONE => registry::ID.try_with(|id| id.0).ok(),
            number => Some(number),
        }
    }
    // Under loom the numbers come from a counter reset for every explored
    // execution (the models never reuse one), or they would not be
    // deterministic. The bitmap the process takes them from, `Numbers`,
    // has models of its own (`loom_tests/thread_id.rs`).
    #[cfg(all(test, handle_pool_loom))]
    {
        use loom::sync::atomic::AtomicUsize;
        use std::cell::Cell;
        loom::lazy_static! {
            static ref NEXT: AtomicUsize = AtomicUsize::new(0);
        }
        loom::thread_local! {
            static ID: Cell<usize> = Cell::new(usize::MAX);
        }
        Some(ID.with(|id| {
            if id.get() == usize::MAX {
                id.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            id.get()
        }))
    }
}

/// What [`known_thread_id`] answers for a thread that has no number (not
/// taken yet, or given back while its thread-locals are destroyed): past
/// every stripe and every word.
pub(crate) const NO_NUMBER: usize = usize::MAX;

/// The calling thread's number if it has taken one, [`NO_NUMBER`] if not:
/// one load, where [`thread_id`] checks a lazy thread-local and takes a
/// number on first use. For paths that fall back to `thread_id` when the
/// answer is out of their range.
#[inline]
pub(crate) fn known_thread_id() -> usize {
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        registry::NUMBER.get()
    }
    #[cfg(all(test, handle_pool_loom))]
    {
        thread_id().unwrap_or(NO_NUMBER)
    }
}

/// The numbers in use: one bit per number, in words of 64, claimed with a
/// CAS and given back with an atomic AND, so taking a number is lock-free
/// (a CAS fails only because another thread claimed or gave back a number
/// in the same word meanwhile) and giving it back is one atomic operation.
/// The words live in segments of [`Numbers::PER_SEGMENT`] numbers, linked
/// as they are needed and never freed while the process runs (as the
/// guards' words are).
///
/// Two promises, and what keeps each:
///
/// - **Dense.** A claim scans the words from the first and takes the
///   lowest clear bit it finds: the smallest number free when it looked.
/// - **Handed on after the last use.** The thread numbered `i` owns
///   magazine `i` of every pool, which it writes with plain stores: a
///   number's next thread must see everything its previous thread did with
///   it. The previous thread gives the number back (a Release
///   `fetch_and`) after its last pool operation; a claim takes the number
///   with a CAS (Acquire) that read the word with its bit clear, that is
///   the giving back or a later write of the word. Every write of a word
///   is a read-modify-write, so every later write is in the release
///   sequence of the giving back, and the claim synchronises with it.
///   (The spin lock this replaced ordered them the same way, by its
///   Acquire and Release.)
///
/// A thread that never gives its number back (a `fork` child's copy of
/// the parent's other threads, which do not run there) keeps it claimed:
/// the child's threads take other numbers, and nothing waits for it.
pub(crate) struct Numbers {
    first: Segment,
}

/// [`Numbers::PER_SEGMENT`] numbers' bits, and the segment after.
struct Segment {
    words: [AtomicU64; WORDS],
    /// The next segment, once a claim found this one full; never freed
    /// while the `Numbers` lives.
    next: AtomicPtr<Segment>,
}

/// Words per segment: 1,024 numbers (under loom 64, so that a model
/// reaches a second segment after a short sequential setup).
#[cfg(not(all(test, handle_pool_loom)))]
const WORDS: usize = 16;
#[cfg(all(test, handle_pool_loom))]
const WORDS: usize = 1;

impl Segment {
    #[cfg(not(all(test, handle_pool_loom)))]
    const fn new() -> Segment {
        Segment {
            words: [const { AtomicU64::new(0) }; WORDS],
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[cfg(all(test, handle_pool_loom))]
    fn new() -> Segment {
        Segment {
            words: core::array::from_fn(|_| AtomicU64::new(0)),
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The next segment, made and linked if there is none yet: a thread
    /// that loses the race to link one frees its own and takes the
    /// winner's.
    #[cold]
    fn next_or_new(&self) -> &Segment {
        // Acquire pairs with the Release CAS below, in whichever thread
        // linked the segment: its words are initialised before we use them.
        let next = self.next.load(Ordering::Acquire);
        if !next.is_null() {
            // SAFETY: a linked segment is never freed while its `Numbers`
            // lives, which `&self` borrows; it was initialised before the
            // Release CAS that linked it, which the load above read.
            return unsafe { &*next };
        }
        let fresh = Box::into_raw(Box::new(Segment::new()));
        // Release publishes the fresh segment's initialised words; Acquire
        // on failure pairs with the winner's Release, as the load above.
        match self
            .next
            .compare_exchange(next, fresh, Ordering::Release, Ordering::Acquire)
        {
            // SAFETY: linked just now, and never freed while `self` lives.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` above and was
                // never shared: the CAS that would have linked it failed.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as for `next` above: linked, initialised, and
                // published by the winner's Release CAS, which we read.
                unsafe { &*winner }
            }
        }
    }
}

impl Numbers {
    /// How many numbers one segment holds.
    pub(crate) const PER_SEGMENT: usize = WORDS * 64;

    /// No number in use.
    #[cfg(not(all(test, handle_pool_loom)))]
    pub(crate) const fn new() -> Numbers {
        Numbers {
            first: Segment::new(),
        }
    }

    /// No number in use.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn new() -> Numbers {
        Numbers {
            first: Segment::new(),
        }
    }

    /// Takes the smallest number free (see the type's docs): lock-free.
    pub(crate) fn claim(&self) -> usize {
        let mut segment = &self.first;
        let mut base = 0;
        loop {
            for (at, word) in segment.words.iter().enumerate() {
                // Relaxed: only a guess at which bit is clear; the CAS
                // below checks it, and its Acquire is what orders us.
                let mut bits = word.load(Ordering::Relaxed);
                while bits != u64::MAX {
                    let bit = (!bits).trailing_zeros();
                    // Acquire pairs with the Release `fetch_and` of the
                    // number's previous thread in `give_back` (see the
                    // type's docs): its pool operations happen before ours.
                    match word.compare_exchange_weak(
                        bits,
                        bits | 1 << bit,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return base + at * 64 + bit as usize,
                        Err(now) => bits = now,
                    }
                }
            }
            segment = segment.next_or_new();
            base += Self::PER_SEGMENT;
        }
    }

    /// Gives `number` back, after the calling thread's last use of it.
    ///
    /// # Panics
    /// If `number` was never claimed; in debug builds also if it is not in
    /// use now: a number given back twice could be held by two threads at
    /// once.
    pub(crate) fn give_back(&self, number: usize) {
        let mut segment = &self.first;
        for _ in 0..number / Self::PER_SEGMENT {
            // Acquire: as in `next_or_new`. The segment exists: the number
            // was claimed from it.
            let next = segment.next.load(Ordering::Acquire);
            assert!(!next.is_null(), "thread number {number} was never claimed");
            // SAFETY: as in `next_or_new`: linked, initialised, published
            // by the Release CAS that the load above read, never freed
            // while `self` lives.
            segment = unsafe { &*next };
        }
        let within = number % Self::PER_SEGMENT;
        let bit = 1u64 << (within % 64);
        // Release pairs with the Acquire CAS in `claim`: everything this
        // thread did with the number happens before its next thread's
        // first use of it.
        let before = segment.words[within / 64].fetch_and(!bit, Ordering::Release);
        debug_assert!(before & bit != 0, "thread number {number} given back twice");
    }
}

impl Drop for Numbers {
    /// Frees the segments after the first. (The process's own `Numbers`
    /// is a static, never dropped; the tests' and loom models' are not.)
    fn drop(&mut self) {
        // Relaxed: `&mut self`, no other thread uses the segments now.
        let mut next = self.first.next.load(Ordering::Relaxed);
        while !next.is_null() {
            // SAFETY: every linked segment came from `Box::into_raw` in
            // `next_or_new`, is linked exactly once, and `&mut self` means
            // nobody else holds a reference to it.
            let segment = unsafe { Box::from_raw(next) };
            next = segment.next.load(Ordering::Relaxed);
        }
    }
}

#[cfg(not(all(test, handle_pool_loom)))]
mod registry {
    use std::cell::Cell;

    use super::Numbers;

    /// The process's thread numbers.
    static NUMBERS: Numbers = Numbers::new();

    /// A thread's number; given back when the thread's locals are destroyed.
    pub(super) struct Id(pub(super) usize);

    impl Id {
        fn take() -> Id {
            let id = NUMBERS.claim();
            NUMBER.set(id);
            Id(id)
        }
    }

    impl Drop for Id {
        fn drop(&mut self) {
            // Forgotten before it is given back: from here on this thread
            // asks `ID`, which answers that it has no number, so no pool
            // operation of this thread uses it after the giving back.
            NUMBER.set(NONE);
            // Release (in `give_back`): this thread's last pool operations
            // with the number happen before the next thread given it uses it.
            NUMBERS.give_back(self.0);
        }
    }

    /// [`NUMBER`] while the thread has no number.
    pub(super) const NONE: usize = super::NO_NUMBER;

    std::thread_local! {
        pub(super) static ID: Id = Id::take();
        /// A copy of `ID`'s number while it lives, [`NONE`] before and
        /// after. Const and without drop glue, so it can always be read,
        /// with no check of a lazy state.
        pub(super) static NUMBER: Cell<usize> = const { Cell::new(NONE) };
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
#[path = "unit_tests/thread_id.rs"]
mod tests;
