//! Errors.

use core::fmt;

/// The pool has handed out all `MAX_INDEX + 1` slot indices it can address
/// (or the configured limit) and none can be reused now: every slot holds a
/// value, is exhausted, or holds a removed value that a guard still
/// protects. The value is given back.
///
/// A full pool can also refuse while a slot is on its way to being
/// reusable, in the hands of an operation in progress that the insert does
/// not wait out: another thread's reclamation (preempted, it can hold the
/// slots for milliseconds), an operation preempted on a thread's private
/// free list, a batch insert whose iterator is still running, or, on the
/// same thread, the reclamation running the `Drop` that inserts. A retry
/// after that operation has finished finds the slot.
///
/// ```
/// use handle_pool::HandlePool;
/// let pool = HandlePool::new();
/// match pool.try_insert(5) {
///     Ok(handle) => assert_eq!(pool.get_cloned(handle), Some(5)),
///     Err(full) => assert_eq!(full.into_inner(), 5),
/// }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct CapacityError<T>(pub(crate) T);

impl<T> CapacityError<T> {
    /// The value that could not be inserted.
    ///
    /// ```
    /// # use handle_pool::HandlePool;
    /// # let pool = HandlePool::new();
    /// if let Err(e) = pool.try_insert("x") { assert_eq!(e.into_inner(), "x"); }
    /// ```
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for CapacityError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CapacityError(..)")
    }
}

impl<T> fmt::Display for CapacityError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("handle pool is full: every slot index is in use or retired")
    }
}

impl<T> std::error::Error for CapacityError<T> {}
