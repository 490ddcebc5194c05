//! The only module that names atomics, `UnsafeCell` and thread-locals,
//! apart from `announce`'s process-wide statics and thread-locals, which
//! switch between std and loom the same way.
//!
//! When the library is built as its own unit tests under `--cfg
//! handle_pool_loom` (see `ci/loom.sh`), everything comes from `loom`, so the
//! models in `loom_tests/` explore every interleaving of the real code;
//! otherwise from `std`. (`test` is part of the switch because loom is a
//! dev-dependency: the library built as a dependency, even of its own tests,
//! must not need it.) The std `UnsafeCell` wrapper offers loom's closure API so both
//! builds compile the same code. Nothing here appears in a public signature.

#[cfg(all(test, handle_pool_loom))]
pub(crate) use loom::thread::yield_now;
#[cfg(not(all(test, handle_pool_loom)))]
pub(crate) use std::thread::yield_now;

#[cfg(all(test, handle_pool_loom))]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::atomic::{
        fence, AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    },
};

#[cfg(not(all(test, handle_pool_loom)))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// `std::cell::UnsafeCell` with loom's `with`/`with_mut` API.
#[cfg(not(all(test, handle_pool_loom)))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(all(test, handle_pool_loom)))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The calling thread's number: no two live threads have the same, and a
/// thread that exits gives its number back for the next new thread (the
/// smallest free number first), so the numbers in use stay dense. The
/// number picks the thread's home stripe, and the thread numbered `i` owns
/// magazine `i` of every pool that has one (see `magazine`): a number is
/// handed on only after its previous thread has run its last pool
/// operation, through the registry's lock.
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
    // deterministic.
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

#[cfg(not(all(test, handle_pool_loom)))]
mod registry {
    use std::cell::{Cell, UnsafeCell};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Numbers given back by exited threads, and the next never used,
    /// behind a small spin lock of our own. Not `std::sync::Mutex`: std is
    /// not built with ThreadSanitizer here, so TSan cannot see that lock
    /// and would report the numbers as racing (`ci/tsan.supp` suppresses
    /// nothing of ours). The lock is taken twice in a thread's life.
    struct Registry {
        locked: AtomicBool,
        free: UnsafeCell<(BinaryHeap<Reverse<usize>>, usize)>,
    }

    // SAFETY: `free` is only reached through `Registry::with`, which holds
    // the lock for the whole access.
    unsafe impl Sync for Registry {}

    static REGISTRY: Registry = Registry {
        locked: AtomicBool::new(false),
        free: UnsafeCell::new((BinaryHeap::new(), 0)),
    };

    impl Registry {
        fn with<R>(&self, f: impl FnOnce(&mut (BinaryHeap<Reverse<usize>>, usize)) -> R) -> R {
            // Acquire pairs with the Release store in `Unlock::drop`: the
            // previous holder's changes are visible.
            while self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::thread::yield_now();
            }
            struct Unlock<'a>(&'a AtomicBool);
            impl Drop for Unlock<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _unlock = Unlock(&self.locked);
            // SAFETY: the lock is held until `_unlock` drops, after `f`.
            f(unsafe { &mut *self.free.get() })
        }
    }

    /// A thread's number; given back when the thread's locals are destroyed.
    pub(super) struct Id(pub(super) usize);

    impl Id {
        fn take() -> Id {
            let id = REGISTRY.with(|(given_back, next)| match given_back.pop() {
                Some(Reverse(id)) => id,
                None => {
                    *next += 1;
                    *next - 1
                }
            });
            NUMBER.set(id);
            Id(id)
        }
    }

    impl Drop for Id {
        fn drop(&mut self) {
            // Forgotten before it is given back: from here on this thread
            // asks `ID`, which answers that it has no number.
            NUMBER.set(NONE);
            // The lock orders this thread's last pool operations before the
            // first of the next thread given the number.
            REGISTRY.with(|(given_back, _)| given_back.push(Reverse(self.0)));
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

/// Marks the calling thread as dropping values a reclamation took off a
/// pool's sealed lists, for as long as it lives (see `reclaim_batch`): a
/// value's `Drop` that inserts into the same pool must not wait for
/// reclamation, which is waiting for that `Drop` to return.
pub(crate) struct DroppingReclaimed(());

#[cfg(not(all(test, handle_pool_loom)))]
std::thread_local! {
    static DROPPING_RECLAIMED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
#[cfg(all(test, handle_pool_loom))]
loom::thread_local! {
    static DROPPING_RECLAIMED: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

impl DroppingReclaimed {
    pub(crate) fn enter() -> Self {
        // A thread whose locals are being destroyed is not marked; it does
        // not wait either (see `Reclaimer::held_back_here`).
        let _ = DROPPING_RECLAIMED.try_with(|depth| depth.set(depth.get() + 1));
        DroppingReclaimed(())
    }

    /// Whether the calling thread is inside a [`DroppingReclaimed`].
    pub(crate) fn here() -> bool {
        DROPPING_RECLAIMED
            .try_with(|depth| depth.get() > 0)
            .unwrap_or(false)
    }
}

impl Drop for DroppingReclaimed {
    fn drop(&mut self) {
        let _ = DROPPING_RECLAIMED.try_with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

/// Sleeps of growing length, up to a total: for a thread that waits for
/// others to make progress it cannot make for them (see
/// `RawPool::wait_at_bound`). Under loom a nap is a yield, and the
/// patience lasts one nap: the models explore what happens between the
/// looks, not how long they take.
pub(crate) struct Patience {
    /// `None` where there is no clock.
    #[cfg(not(all(test, handle_pool_loom)))]
    until: Option<std::time::Instant>,
    #[cfg(not(all(test, handle_pool_loom)))]
    nap: std::time::Duration,
    #[cfg(all(test, handle_pool_loom))]
    spent: bool,
}

impl Patience {
    /// The first nap; each next one is twice as long, up to `LONGEST_NAP`.
    #[cfg(not(all(test, handle_pool_loom)))]
    const FIRST_NAP: std::time::Duration = std::time::Duration::from_micros(50);
    #[cfg(not(all(test, handle_pool_loom)))]
    const LONGEST_NAP: std::time::Duration = std::time::Duration::from_millis(1);

    /// Patience for naps adding up to about `total` (measured in wall
    /// time, so oversleeping on a loaded machine counts). None at all
    /// where there is no clock to measure it (`wasm32-unknown-unknown`,
    /// whose `Instant::now` panics).
    pub(crate) fn new(total: std::time::Duration) -> Self {
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            let clock = !cfg!(all(target_family = "wasm", target_os = "unknown"));
            Patience {
                until: clock.then(|| std::time::Instant::now() + total),
                nap: Self::FIRST_NAP,
            }
        }
        #[cfg(all(test, handle_pool_loom))]
        {
            let _ = total;
            Patience { spent: false }
        }
    }

    /// Sleeps the next nap and returns `true`, or returns `false` at once
    /// if the patience is spent.
    pub(crate) fn nap(&mut self) -> bool {
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            let Some(until) = self.until else {
                return false;
            };
            let now = std::time::Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep(self.nap.min(until - now));
            self.nap = (self.nap * 2).min(Self::LONGEST_NAP);
            true
        }
        #[cfg(all(test, handle_pool_loom))]
        {
            if core::mem::replace(&mut self.spent, true) {
                return false;
            }
            loom::thread::yield_now();
            true
        }
    }
}

/// The two halves of an asymmetric fence, for the magazine handshake (see
/// `magazine`): an owner's frequent `light_fence` costs nothing at run
/// time, and a revoker's rare `heavy_fence` makes every running thread of
/// the process execute a full barrier (Linux `membarrier`, private
/// expedited), so that together they order like two `SeqCst` fences.
/// Under loom both are `SeqCst` fences, which is what the pair promises.
#[inline(always)]
pub(crate) fn light_fence() {
    #[cfg(all(test, handle_pool_loom))]
    loom::sync::atomic::fence(Ordering::SeqCst);
    #[cfg(not(all(test, handle_pool_loom)))]
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// The heavy half (see [`light_fence`]); `false` if the system refused it,
/// in which case nothing may be concluded from it.
pub(crate) fn heavy_fence() -> bool {
    #[cfg(all(test, handle_pool_loom))]
    {
        loom::sync::atomic::fence(Ordering::SeqCst);
        true
    }
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        membarrier::heavy()
    }
}

/// Whether the heavy half is available here (registers the process for
/// it on first use). Without it, pools make no magazines.
pub(crate) fn asymmetric_fences() -> bool {
    #[cfg(all(test, handle_pool_loom))]
    {
        true
    }
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        membarrier::available()
    }
}

#[cfg(all(target_os = "linux", not(all(test, handle_pool_loom))))]
mod membarrier {
    use std::sync::atomic::{AtomicU8, Ordering};

    // From linux/membarrier.h.
    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    const UNKNOWN: u8 = 0;
    const AVAILABLE: u8 = 1;
    const UNAVAILABLE: u8 = 2;
    static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes two integers and touches no memory of
        // ours; an unknown command or a refusal is an error return.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) }
    }

    pub(super) fn available() -> bool {
        // Acquire pairs with the Release store below: a thread that sees
        // AVAILABLE sees a process already registered.
        match STATE.load(Ordering::Acquire) {
            AVAILABLE => true,
            UNAVAILABLE => false,
            _ => {
                // Registering twice (two threads racing here) is harmless.
                let commands = membarrier(CMD_QUERY);
                let ok = commands >= 0
                    && commands & CMD_PRIVATE_EXPEDITED != 0
                    && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
                STATE.store(if ok { AVAILABLE } else { UNAVAILABLE }, Ordering::Release);
                ok
            }
        }
    }

    pub(super) fn heavy() -> bool {
        if !available() {
            return false;
        }
        if membarrier(CMD_PRIVATE_EXPEDITED) == 0 {
            return true;
        }
        // A forked child may have inherited AVAILABLE without its own
        // registration: register once more and retry.
        membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(CMD_PRIVATE_EXPEDITED) == 0
    }
}

#[cfg(all(not(target_os = "linux"), not(all(test, handle_pool_loom))))]
mod membarrier {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn heavy() -> bool {
        false
    }
}

#[cfg(all(test, not(handle_pool_loom)))]
mod tests {
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
}
