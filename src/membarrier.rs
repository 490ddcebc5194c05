//! The asymmetric fence of the magazine handshake: a light half for the
//! owner, free at run time, and a heavy half for a revoker (Linux
//! `membarrier`, private expedited).
//!
//! | state | heavy fence | new pools |
//! |---|---|---|
//! | unknown | registers first | ask |
//! | available | `membarrier`; refused: failed | make magazines |
//! | unavailable (never registered) | refused | make none |
//! | failed (refused after registration) | refused | make none; owners retire theirs |

use crate::sync::Ordering;

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
/// in which case nothing may be concluded from it, and from then on it is
/// refused at once ([`fences_failed`]).
pub(crate) fn heavy_fence() -> bool {
    crate::events::count(crate::events::Event::HeavyFence);
    #[cfg(all(test, handle_pool_loom))]
    {
        loom::sync::atomic::fence(Ordering::SeqCst);
        true
    }
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        syscall::heavy()
    }
}

/// Whether the heavy fence was refused after the process registered for
/// it: each magazine's owner then retires its magazine at its next slow
/// path (see `RawPool::retire_own_magazine`), since no revoker can take
/// it over any more.
#[inline]
pub(crate) fn fences_failed() -> bool {
    #[cfg(all(test, handle_pool_loom))]
    {
        false
    }
    #[cfg(not(all(test, handle_pool_loom)))]
    {
        syscall::failed()
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
        syscall::available()
    }
}

#[cfg(all(target_os = "linux", not(all(test, handle_pool_loom))))]
mod syscall {
    use std::sync::atomic::{AtomicU8, Ordering};

    // From linux/membarrier.h.
    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    const UNKNOWN: u8 = 0;
    const AVAILABLE: u8 = 1;
    const UNAVAILABLE: u8 = 2;
    const FAILED: u8 = 3;
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
            UNAVAILABLE | FAILED => false,
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

    pub(super) fn failed() -> bool {
        // Relaxed: a hint for the owners' slow paths; `heavy` itself reads
        // the state it acts on.
        STATE.load(Ordering::Relaxed) == FAILED
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
        if membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(CMD_PRIVATE_EXPEDITED) == 0
        {
            return true;
        }
        // Refused after registration (a sandbox's filter installed late,
        // `ENOMEM`): no revoker can take a magazine over from now on. New
        // pools make none, and owners retire theirs (`fences_failed`).
        // (A page-protection change is no substitute: on x86-64 with
        // broadcast TLB invalidation, as on arm64, it interrupts no other
        // core.)
        // Release pairs with the Acquire load in `available`.
        STATE.store(FAILED, Ordering::Release);
        false
    }
}

#[cfg(all(not(target_os = "linux"), not(all(test, handle_pool_loom))))]
mod syscall {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn failed() -> bool {
        false
    }

    pub(super) fn heavy() -> bool {
        false
    }
}
