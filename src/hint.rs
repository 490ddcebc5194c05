//! Code-layout hints.

/// Marks the path that calls it as rarely taken, so the compiler lays it out
/// away from the other branch, which then runs straight through. The same
/// as `core::hint::cold_path`, which is younger than this crate's minimum
/// Rust: to rustc and LLVM a call to a `#[cold]` function means what that
/// hint means (the same branch weights, checked on rustc 1.95), and inlined
/// it leaves no call behind.
#[cold]
#[inline(always)]
pub(crate) fn cold_path() {}
