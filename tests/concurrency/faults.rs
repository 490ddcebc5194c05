//! The platform failing under the pool: a heavy fence that starts being
//! refused after registration, and a signal handler that uses the pool
//! while the thread it interrupted is inside an operation on it.

use handle_pool::{event_counts_here, Config, Event, HandlePool};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{self, Alive, Counted, Lock};
use crate::serial;

/// How a child process that ran its scenario to the end exits (a child
/// whose name matched no test exits with 0, having run nothing).
const CHILD_RAN: i32 = 42;

/// Runs `scenario` alone in a child process (this test binary, re-executed
/// on the one test), since what it does to the process (a seccomp filter)
/// cannot be undone; asserts the child ran it to the end.
fn in_child(name: &str, scenario: impl FnOnce()) {
    const KEY: &str = "HANDLE_POOL_FAULTS_CHILD";
    if std::env::var_os(KEY).is_some() {
        scenario();
        std::process::exit(CHILD_RAN);
    }
    let test = match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    };
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test, "--nocapture", "--test-threads=1"])
        .env(KEY, "1")
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(CHILD_RAN),
        "the child failed {test}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Makes every later `membarrier(PRIVATE_EXPEDITED)` of this process fail
/// with `ENOMEM` (a real return of that call), as a sandbox's filter
/// installed late might. Returns `false` where seccomp filters cannot be
/// installed.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn refuse_membarrier() -> bool {
    use libc::{sock_filter, sock_fprog, BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    const ARCH: u32 = 4;
    const NR: u32 = 0;
    const fn arg(i: u32) -> u32 {
        16 + 8 * i // the low half, little-endian
    }
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const ALLOW: u32 = 0x7fff_0000;
    const ENOMEM: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOMEM as u32;
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8, jf: u8| sock_filter {
        code: (BPF_JMP | BPF_JEQ | BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let rules = [(libc::SYS_membarrier as u32, 0, 1 << 3)];
    let mut program = vec![
        stmt(BPF_LD | BPF_W | BPF_ABS, ARCH),
        jump(AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET | BPF_K, ALLOW),
    ];
    for (nr, index, value) in rules {
        program.extend([
            stmt(BPF_LD | BPF_W | BPF_ABS, NR),
            jump(nr, 0, 3),
            stmt(BPF_LD | BPF_W | BPF_ABS, arg(index)),
            jump(value, 0, 1),
            stmt(BPF_RET | BPF_K, ENOMEM),
        ]);
    }
    program.push(stmt(BPF_RET | BPF_K, ALLOW));
    let fprog = sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: plain system calls; `fprog` points to a filter that lives
    // across the call, which copies it.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_TSYNC,
                &fprog as *const sock_fprog,
            ) == 0
    }
}

/// Removes `count` counted values through a magazine of this pool on a
/// thread of its own, which then exits: they sit in its partial batch.
fn remove_on_a_thread_that_exits(pool: &HandlePool<Counted>, count: usize, alive: &Alive) {
    common::scope(|s| {
        s.spawn(|| {
            for _ in 0..count {
                assert!(pool.remove(pool.insert(alive.value())));
            }
        });
    });
}

/// `membarrier` refused after the process registered: new pools make no
/// magazines, an owner retires its own at its next slow path, and `flush`
/// still drops what the calling thread removed, through its own magazine's
/// section. (A partial batch in the magazine of an idle or exited thread
/// cannot be taken any more: it waits for `&mut` reclamation or the pool's
/// drop, as documented.)
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_refused_membarrier_retires_magazines_and_flush_drops_the_callers_removals() {
    let _serial = serial();
    in_child(
        "a_refused_membarrier_retires_magazines_and_flush_drops_the_callers_removals",
        || {
            let alive = Alive::new();
            let mut pool: HandlePool<Counted> = HandlePool::new();
            let handles: Vec<_> = (0..10).map(|_| pool.insert(alive.value())).collect();
            if !refuse_membarrier() {
                eprintln!("no seccomp here: nothing to check");
                return;
            }
            remove_on_a_thread_that_exits(&pool, 10, &alive);
            // Into this thread's magazine's partial batch.
            for handle in handles {
                assert!(pool.remove(handle));
            }
            // This thread's batch is sealed through its own section; the
            // exited thread's cannot be taken (the revocation's fence is
            // refused, and marked failed).
            pool.flush();
            assert!(
                alive.count() <= 10,
                "flush left {} values, more than the exited thread's",
                alive.count()
            );
            // The owner retired its magazine: churn refills nothing now.
            let before = event_counts_here()[Event::Refill as usize];
            for _ in 0..1000 {
                assert!(pool.remove(pool.insert(alive.value())));
            }
            assert_eq!(
                event_counts_here()[Event::Refill as usize],
                before,
                "a magazine still in use"
            );
            // A new pool makes none.
            let fresh: HandlePool<u64> = HandlePool::new();
            for i in 0..1000 {
                assert!(fresh.remove(fresh.insert(i)));
            }
            assert_eq!(
                event_counts_here()[Event::Refill as usize],
                before,
                "a new pool made magazines"
            );
            pool.reclaim();
            assert_eq!(alive.count(), 0, "every removed value dropped by `reclaim`");
        },
    );
}

static SIGNALLED_POOL: AtomicPtr<HandlePool<u64>> = AtomicPtr::new(std::ptr::null_mut());
static IN_HANDLER: AtomicU64 = AtomicU64::new(0);
static HANDLER_FAILED: AtomicBool = AtomicBool::new(false);

/// Where this thread's `errno` lives.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: no preconditions; the pointer is this thread's.
    unsafe { libc::__errno_location() }
}

/// Where this thread's `errno` lives.
#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: no preconditions; the pointer is this thread's.
    unsafe { libc::__error() }
}

extern "C" fn churn_in_handler(_: libc::c_int) {
    // A handler leaves `errno` as it found it: the code it interrupted may
    // be between a failing call and its read of `errno`, and the pool's
    // calls (a yield, a fence) may set it. (ThreadSanitizer reports a
    // handler that does not: "signal handler spoils errno".)
    let errno = errno_location();
    // SAFETY: this thread's `errno`, read and written on this thread.
    let saved = unsafe { *errno };
    churn_once();
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// The handler's work: one insert, read and remove on the signalled pool.
fn churn_once() {
    let pool = SIGNALLED_POOL.load(Ordering::Acquire);
    if pool.is_null() {
        return;
    }
    // SAFETY: the test keeps the pool alive, and stops signalling, before
    // it drops the pool.
    let pool = unsafe { &*pool };
    let handle = pool.insert(u64::MAX);
    if pool.get_cloned(handle) != Some(u64::MAX) || !pool.remove(handle) {
        HANDLER_FAILED.store(true, Ordering::Relaxed);
    }
    IN_HANDLER.fetch_add(1, Ordering::Relaxed);
}

/// A signal handler inserts and removes while the thread it interrupts
/// churns the same pool, often inside its magazine's section: the handler
/// finds the magazine entered and uses the shared lists, so neither sees
/// a handle go wrong and nothing is lost. (The pool is not async-signal-
/// safe in general: sealing a batch allocates, and a handler that
/// allocates may deadlock in a `malloc` it interrupted. Nothing here
/// seals a batch in the handler, see below.)
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
))]
#[test]
fn a_signal_handler_using_the_pool_does_not_corrupt_the_interrupted_operation() {
    let _serial = serial();
    // Batches of 2^20 never fill here, so no removal is reclaimed and each
    // insert takes a fresh slot. A pool whose slots in use pass 3/4 of what
    // it promises (4 x live + 1,024) counts as behind on reclamation, and
    // an insert that finds it behind seals its own partial batch to wait
    // for, which allocates: under ThreadSanitizer (slow enough to churn
    // past 768 pairs) that came to pass in the handler ("signal-unsafe
    // call inside of a signal": malloc from `Reclaimer::seal`, through
    // `round_behind`). So `LIVE` values stay live throughout, and the
    // churner stops at `PAIRS` pairs, and the signals with it: the pool is
    // behind only past 2 x LIVE + 768 pairs, the handler's included (at
    // most one per 20 us of the 300 ms).
    const LIVE: u64 = 1 << 17;
    const PAIRS: u64 = 1 << 17;
    let pool: HandlePool<u64> = HandlePool::with_config(Config {
        batch: 1 << 20,
        ..Config::default()
    });
    // Room for every slot the test takes: no growth in the handler either.
    pool.reserve((LIVE + PAIRS) as usize + (1 << 16));
    let live = pool.insert_many(0..LIVE);
    SIGNALLED_POOL.store(&pool as *const _ as *mut _, Ordering::Release);
    // SAFETY: installs a handler for SIGUSR2, which nothing else here
    // uses; the handler only touches atomics and the pool.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = churn_in_handler as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()),
            0
        );
    }
    let stop = AtomicBool::new(false);
    let churned_all = AtomicBool::new(false);
    let target = Lock::new(None);
    let churned = common::scope(|s| {
        let churner = s.spawn(|| {
            // SAFETY: `pthread_self` has no preconditions.
            *target.lock() = Some(unsafe { libc::pthread_self() });
            // The handler runs on this thread, so its seals count here.
            let seals = event_counts_here()[Event::Seal as usize];
            let mut pairs = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if pairs == PAIRS {
                    churned_all.store(true, Ordering::Relaxed);
                    thread::yield_now();
                    continue;
                }
                let handle = pool.insert(pairs);
                assert_eq!(
                    pool.get_cloned(handle),
                    Some(pairs),
                    "a fresh handle went wrong"
                );
                assert!(
                    pool.remove(handle),
                    "a fresh handle was not there to remove"
                );
                pairs += 1;
            }
            assert_eq!(
                event_counts_here()[Event::Seal as usize],
                seals,
                "a batch was sealed on the signalled thread (in the handler too?)"
            );
            pairs
        });
        let target = loop {
            if let Some(target) = *target.lock() {
                break target;
            }
            thread::yield_now();
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) && !churned_all.load(Ordering::Relaxed) {
            // SAFETY: signals a thread of this process that is running.
            unsafe { libc::pthread_kill(target, libc::SIGUSR2) };
            thread::sleep(Duration::from_micros(20));
        }
        stop.store(true, Ordering::Relaxed);
        churner.join().unwrap()
    });
    SIGNALLED_POOL.store(std::ptr::null_mut(), Ordering::Release);
    let handled = IN_HANDLER.load(Ordering::Relaxed);
    eprintln!("{churned} pairs churned, {handled} in the handler");
    assert!(
        !HANDLER_FAILED.load(Ordering::Relaxed),
        "a handle went wrong in the handler"
    );
    assert!(handled > 0, "no signal reached the handler");
    assert_eq!(pool.len(), LIVE as usize);
    for (value, handle) in (0..LIVE).zip(live) {
        assert_eq!(pool.get_cloned(handle), Some(value));
    }
}
