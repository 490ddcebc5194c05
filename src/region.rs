//! Address space reserved once and made usable from its start as the pool
//! grows: the home of the storage's flat region (see `docs/storage.md`),
//! which a pool reserves when it outgrows its first chunk.
//!
//! On Unix a region is an anonymous private mapping with no access (which
//! systems do not count against their commit limit: it cannot be written,
//! so no `MAP_NORESERVE`, which some Unixes lack, is needed); a commit
//! makes its first bytes readable and writable with `mprotect`, so only what
//! has been committed counts against the system's commit limit, and pages
//! take physical memory only when first written. Fresh pages read as zero.
//!
//! A region of at least [`HUGE_PAGE`] starts on a huge-page boundary and,
//! on Linux, is advised for transparent huge pages (`MADV_HUGEPAGE`): a
//! lookup in a large pool is a random access into it, and with 4 KiB pages
//! nearly every one at a million slots also misses the TLB. The kernel
//! backs with a huge page only a 2 MiB extent that lies whole within the
//! readable and writable part, so a pool whose mapped part is smaller than
//! that keeps small pages, and a larger one holds at most the extents its
//! mapped part covers (an eighth ahead of its capacity, see the storage).
//! Where transparent huge pages are off (`never`), the advice is refused and
//! ignored; where they are `always`, it changes nothing.
//! Elsewhere [`Region::reserve`] returns `None` and the storage uses
//! buckets only. Under loom (whose atomics cannot live in zeroed memory)
//! it returns `None` too, and the storage backs its flat region with a
//! heap slice instead (see the storage).
//!
//! # What the process's regions may take
//!
//! A region with its first page committed is two of the process's memory
//! mappings (the usable part and the reserved rest), and mappings are
//! limited per process (Linux: `vm.max_map_count`, 65,530 by default);
//! its reservation counts against an address-space limit (`RLIMIT_AS`,
//! `ulimit -v`) as if it were used. So that pools never exhaust what the
//! rest of the process needs, [`Region::reserve`] refuses (and the pool
//! uses buckets) past a budget shared by every region of the process:
//!
//! - at most `Region::live_limit()` regions at once: a quarter of the
//!   mapping limit (read once, at the first reservation; 65,530 where it
//!   cannot be read), two mappings each, so 8,191 by default;
//! - under an address-space limit, at most a quarter of it reserved by all
//!   regions together, and at most a 64th by each (`Region::allowance`).
//!
//! Only pools that outgrow their first chunk reserve a region (see the
//! storage), so the budget is spent on the pools that benefit from one.

#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
use crate::sync::{AtomicUsize, Ordering};

/// The huge page size the region aligns to: 2 MiB, that of x86-64 and of
/// 64-bit Arm with 4 KiB pages. Elsewhere the alignment is merely unused.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// A reserved range of address space, unmapped when dropped.
pub(crate) struct Region {
    /// Page-aligned start of the mapping.
    base: *mut u8,
    /// Bytes reserved, a multiple of `page`.
    len: usize,
    /// The system's page size.
    page: usize,
}

// SAFETY: a `Region` is address space, not data: its methods only change the
// mapping's protection (a system call, safe from any thread) and the
// pointer is never read or written through here. What lives in the region
// is the storage's, whose auto traits follow its slots'.
unsafe impl Send for Region {}
// SAFETY: as above; `commit` takes `&self` and is safe to call concurrently
// (see there).
unsafe impl Sync for Region {}

/// Regions alive in the process, and the bytes they reserve: the budget
/// (see the module docs). Relaxed throughout: counts, not publication.
#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
static LIVE: AtomicUsize = AtomicUsize::new(0);
#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
static RESERVED: AtomicUsize = AtomicUsize::new(0);

/// The process's mapping limit where it cannot be read (Linux's default).
#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
const DEFAULT_MAP_COUNT: usize = 65_530;

impl Region {
    /// The start of the region.
    #[inline]
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// The system's page size: what a commit maps at least.
    pub(crate) fn page(&self) -> usize {
        self.page
    }

    /// What a commit of `bytes` should cover: whole pages, and from
    /// [`HUGE_PAGE`] on whole huge pages (the region is then aligned to
    /// them), so that the extent a growing pool first writes to lies whole
    /// in the mapped part and can be served by a huge page. Rounded up:
    /// mapped pages take memory only when written, so a pool past 2 MiB
    /// holds at most one huge page it does not use yet.
    pub(crate) fn round_up(&self, bytes: usize) -> usize {
        if bytes >= HUGE_PAGE && self.len >= HUGE_PAGE {
            bytes.next_multiple_of(HUGE_PAGE)
        } else {
            bytes.next_multiple_of(self.page)
        }
    }

    /// Bytes reserved.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
impl Region {
    /// How many regions may be alive at once: a quarter of the process's
    /// mapping limit, two mappings each (see the module docs).
    pub(crate) fn live_limit() -> usize {
        map_count_limit() / 8
    }

    /// The most bytes a region reserved now may have, at most `wanted`: 0
    /// if the process holds [`live_limit`](Self::live_limit) regions
    /// already, and under an address-space limit at most a 64th of it. (A
    /// hint: [`reserve`](Self::reserve) checks the budget again.)
    pub(crate) fn allowance(wanted: usize) -> usize {
        if LIVE.load(Ordering::Relaxed) >= Self::live_limit() {
            return 0;
        }
        match address_space_limit() {
            Some(limit) => wanted.min(limit / 64),
            None => wanted,
        }
    }

    /// Reserves at least `bytes` of address space (rounded up to pages),
    /// aligned to a page, and to [`HUGE_PAGE`] if it is at least that long,
    /// with no access yet. `None` if `bytes` is zero, if `align` exceeds a
    /// page, if the process's regions would pass their budget (see the
    /// module docs), or if the system refuses the mapping (address space or
    /// map count exhausted): the caller then does without.
    pub(crate) fn reserve(bytes: usize, align: usize) -> Option<Region> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two())?;
        if bytes == 0 || align > page {
            return None;
        }
        let len = bytes.checked_next_multiple_of(page)?;
        let budget = Budget::claim(len)?;
        // A huge-page boundary is found in a mapping longer by the slack,
        // whose ends outside the aligned range are unmapped again.
        let slack = if len >= HUGE_PAGE && page < HUGE_PAGE {
            HUGE_PAGE - page
        } else {
            0
        };
        let mapped = len.checked_add(slack)?;
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choosing: it cannot overlap anything Rust owns.
        let start = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                mapped,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            // `budget` drops: its share is given back.
            return None;
        }
        if start.is_null() {
            // A mapping at address 0 (possible only where the system lets a
            // process map page zero) would give a null base, which the
            // storage tells the compiler a region's base never is.
            // SAFETY: the mapping was just made, of `mapped` bytes, and
            // nothing lives in it.
            unsafe { libc::munmap(start, mapped) };
            return None;
        }
        let start = start.cast::<u8>();
        // Page-aligned (mmap's), so the head and tail are whole pages.
        let head = if slack == 0 {
            0
        } else {
            start.align_offset(HUGE_PAGE)
        };
        debug_assert!(head <= slack && head % page == 0);
        let tail = slack - head;
        // SAFETY: both ranges lie in the mapping just made, outside
        // `[start + head, start + head + len)`, and nothing lives in them.
        unsafe {
            if head > 0 {
                libc::munmap(start.cast(), head);
            }
            if tail > 0 {
                libc::munmap(start.add(head + len).cast(), tail);
            }
        }
        // SAFETY: `head <= slack`, within the mapping.
        let base = unsafe { start.add(head) };
        if slack > 0 {
            advise_huge_pages(base, len);
        }
        // The region holds its share of the budget from here on, and gives
        // it back when it is unmapped.
        core::mem::forget(budget);
        Some(Region { base, len, page })
    }

    /// Makes the first `bytes` (a multiple of the page size, at most `len`)
    /// readable and writable; `false` if the system refuses (out of memory
    /// under strict overcommit).
    ///
    /// Idempotent and safe to race: pages already readable and writable keep
    /// their protection and contents (Linux skips a range whose protection
    /// does not change; POSIX `mprotect` never touches contents), so two
    /// committers may cover overlapping ranges while other threads use the
    /// committed slots.
    pub(crate) fn commit(&self, bytes: usize) -> bool {
        debug_assert!(bytes % self.page == 0 && bytes <= self.len);
        // SAFETY: `[base, base + bytes)` lies in our own mapping and holds no
        // Rust object whose access a protection change could break: it only
        // grants access.
        unsafe { libc::mprotect(self.base.cast(), bytes, libc::PROT_READ | libc::PROT_WRITE) == 0 }
    }
}

/// Asks for transparent huge pages in `[base, base + len)`, a range of our
/// own mapping. Only advice: a refusal (huge pages configured off, or not
/// built in) leaves small pages, which are just slower to look up in.
#[cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    not(all(test, handle_pool_loom))
))]
fn advise_huge_pages(base: *mut u8, len: usize) {
    // SAFETY: the range is a mapping of ours with nothing in it yet;
    // MADV_HUGEPAGE changes how later faults are served, never contents.
    unsafe { libc::madvise(base.cast(), len, libc::MADV_HUGEPAGE) };
}

/// No transparent huge pages to ask for on this system.
#[cfg(all(
    unix,
    not(target_os = "linux"),
    target_pointer_width = "64",
    not(all(test, handle_pool_loom))
))]
fn advise_huge_pages(_base: *mut u8, _len: usize) {}

#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours, and the storage that owns this region
        // is being dropped: no reference into it is left.
        let unmapped = unsafe { libc::munmap(self.base.cast(), self.len) };
        debug_assert_eq!(unmapped, 0, "munmap of a pool's region failed");
        drop(Budget(self.len));
    }
}

/// One region's share of the budget (see the module docs): a place among
/// the regions alive and its bytes, given back when this drops.
#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
struct Budget(usize);

#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
impl Budget {
    /// A share for a region of `len` bytes, if the budget has room.
    fn claim(len: usize) -> Option<Budget> {
        if LIVE.fetch_add(1, Ordering::Relaxed) >= Region::live_limit() {
            LIVE.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let reserved = RESERVED
            .fetch_add(len, Ordering::Relaxed)
            .saturating_add(len);
        // From here on the share is given back by `drop`.
        let budget = Budget(len);
        match address_space_limit() {
            Some(limit) if len > limit / 64 || reserved > limit / 4 => None,
            _ => Some(budget),
        }
    }
}

#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
impl Drop for Budget {
    fn drop(&mut self) {
        RESERVED.fetch_sub(self.0, Ordering::Relaxed);
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The process's limit on memory mappings: Linux's `vm.max_map_count`,
/// read once (65,530 where it cannot be read, and on other systems).
#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
fn map_count_limit() -> usize {
    /// The limit once read; 0 before.
    static LIMIT: AtomicUsize = AtomicUsize::new(0);
    match LIMIT.load(Ordering::Relaxed) {
        0 => {
            let limit = read_map_count_limit().unwrap_or(DEFAULT_MAP_COUNT).max(1);
            // Racing readers read the same file: any of their answers will do.
            LIMIT.store(limit, Ordering::Relaxed);
            limit
        }
        limit => limit,
    }
}

#[cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    not(all(test, handle_pool_loom))
))]
fn read_map_count_limit() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(all(
    unix,
    not(target_os = "linux"),
    target_pointer_width = "64",
    not(all(test, handle_pool_loom))
))]
fn read_map_count_limit() -> Option<usize> {
    None
}

/// The process's address-space limit (`RLIMIT_AS`), if it has one.
#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
fn address_space_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid `rlimit` for the call to fill in.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
}

#[cfg(not(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom)))))]
impl Region {
    /// No reserved regions on this target: the storage uses buckets only
    /// (under loom, a heap slice for its flat region instead, see there).
    pub(crate) fn reserve(_bytes: usize, _align: usize) -> Option<Region> {
        None
    }

    /// No regions on this target: nothing may be reserved.
    pub(crate) fn allowance(_wanted: usize) -> usize {
        0
    }

    /// Never called: no region exists on this target.
    pub(crate) fn commit(&self, _bytes: usize) -> bool {
        unreachable!("no regions on this target")
    }
}
