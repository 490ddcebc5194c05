//! Address space reserved up front and made usable from its start as the
//! pool grows: the home of the storage's flat region (see `docs/storage.md`).
//!
//! On Unix a region is an anonymous private mapping with no access (which
//! systems do not count against their commit limit: it cannot be written,
//! so no `MAP_NORESERVE`, which some Unixes lack, is needed); a commit
//! makes its first bytes readable and writable with `mprotect`, so only what
//! has been committed counts against the system's commit limit, and pages
//! take physical memory only when first written. Fresh pages read as zero.
//! Elsewhere, and under loom (whose atomics cannot live in zeroed memory),
//! [`Region::reserve`] returns `None` and the storage uses buckets only.

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

    /// `bytes` rounded up to a whole number of pages.
    pub(crate) fn round_up(&self, bytes: usize) -> usize {
        bytes.next_multiple_of(self.page)
    }

    /// Bytes reserved.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(all(unix, target_pointer_width = "64", not(all(test, handle_pool_loom))))]
impl Region {
    /// Reserves at least `bytes` of address space (rounded up to pages),
    /// aligned to a page, with no access yet. `None` if `bytes` is zero, if
    /// `align` exceeds a page, or if the system refuses the mapping (address
    /// space or map count exhausted): the caller then does without.
    pub(crate) fn reserve(bytes: usize, align: usize) -> Option<Region> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two())?;
        if bytes == 0 || align > page {
            return None;
        }
        let len = bytes.checked_next_multiple_of(page)?;
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choosing: it cannot overlap anything Rust owns.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        Some(Region {
            base: base.cast(),
            len,
            page,
        })
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
    /// No reserved regions on this target: the storage uses buckets only.
    pub(crate) fn reserve(_bytes: usize, _align: usize) -> Option<Region> {
        None
    }

    /// Never called: no region exists on this target.
    pub(crate) fn commit(&self, _bytes: usize) -> bool {
        unreachable!("no regions on this target")
    }
}
