#![doc = include_str!("../README.md")]
#![warn(missing_docs, rust_2018_idioms)]

mod collect;
mod config;
mod error;
mod free_list;
mod handle;
mod iter;
mod pool;
mod reclaim;
pub mod reference;
#[cfg(feature = "serde")]
mod serde_impl;
mod shared;
mod slot;
mod storage;
mod sync;

// The loom models run as this library's unit tests (see `ci/loom.sh`), so
// loom is only a dev-dependency; the models name the crate `handle_pool`.
#[cfg(all(test, handle_pool_loom))]
extern crate self as handle_pool;
#[cfg(all(test, handle_pool_loom))]
#[path = "../loom_tests/main.rs"]
mod loom_tests;

pub use collect::IntoIter;
#[doc(hidden)]
pub use config::Config;
pub use crossbeam_epoch::{pin, Guard};
pub use error::CapacityError;
pub use handle::{Handle, PoolHandle, MAX_GENERATION, MAX_INDEX};
pub use iter::{Drain, Iter, IterMut};
pub use pool::HandlePool;
pub use reference::ReferenceTable;

#[cfg(feature = "serde")]
#[doc(hidden)]
pub use serde as __serde;

/// Without the `serde` feature, handle types get no serde impls.
#[cfg(not(feature = "serde"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __serde_handle {
    ($name:ident) => {};
}
