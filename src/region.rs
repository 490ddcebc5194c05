//! Address space reserved up front and made usable from its start as the
//! pool grows: the home of the storage's flat region (see `docs/storage.md`).
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
    /// Reserves at least `bytes` of address space (rounded up to pages),
    /// aligned to a page, and to [`HUGE_PAGE`] if it is at least that long,
    /// with no access yet. `None` if `bytes` is zero, if `align` exceeds a
    /// page, or if the system refuses the mapping (address space or map
    /// count exhausted): the caller then does without.
    pub(crate) fn reserve(bytes: usize, align: usize) -> Option<Region> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two())?;
        if bytes == 0 || align > page {
            return None;
        }
        let len = bytes.checked_next_multiple_of(page)?;
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
    }
}

#[cfg(not(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom)))))]
impl Region {
    /// No reserved regions on this target: the storage uses buckets only
    /// (under loom, a heap slice for its flat region instead, see there).
    pub(crate) fn reserve(_bytes: usize, _align: usize) -> Option<Region> {
        None
    }

    /// Never called: no region exists on this target.
    pub(crate) fn commit(&self, _bytes: usize) -> bool {
        unreachable!("no regions on this target")
    }
}
