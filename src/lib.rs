#![doc = include_str!("../README.md")]
#![warn(missing_docs, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The map of the crate, in data-flow order (each module names only those
// below it):
//
// - `pool`: `HandlePool<T, H>`, the API and its docs; converts typed handles.
// - `iter`, `collect`, `serde_impl`, `par`: iterators, `FromIterator`/
//   `Extend`/`IntoIterator`, serde, rayon's parallel iterators and
//   collection; typed wrappers over the raw pool's cursors.
// - `raw`: `RawPool<T>`, every slot mechanic: acquire, publish, look up,
//   remove, give back, restore, and the length accounting.
// - `reclaim`: the epoch collector, guard checks, eras and deferred batches,
//   behind one boundary: takes sealed batches, returns free chains.
// - `stripe`: per-thread-group stripes (free list, removal batch, length
//   share) and the length identity.
// - `lists`: the free list and the removal batch, threaded through slot words.
// - `storage`: chunked, stable slot storage.
// - `slot`: the slot word, its state table, and the value cell.
// - `handle`, `config`, `error`: plain types; `sync`: std or loom.
mod collect;
mod config;
mod error;
mod handle;
mod iter;
mod lists;
#[cfg(feature = "rayon")]
mod par;
mod pool;
mod raw;
mod reclaim;
pub mod reference;
#[cfg(feature = "serde")]
mod serde_impl;
mod slot;
mod storage;
mod stripe;
mod sync;

// The loom models run as this library's unit tests (see `ci/loom.sh`), so
// loom is only a dev-dependency; the models name the crate `handle_pool`.
#[cfg(all(test, handle_pool_loom))]
extern crate self as handle_pool;
#[cfg(all(test, handle_pool_loom))]
#[path = "../loom_tests/main.rs"]
mod loom_tests;

pub use collect::IntoIter;
/// Pool parameters for this crate's own tests (feature `testing`; not part
/// of the stable API).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub use config::Config;
pub use crossbeam_epoch::{pin, Guard};
pub use error::CapacityError;
pub use handle::{Handle, PoolHandle, MAX_GENERATION, MAX_INDEX};
pub use iter::{Drain, Iter, IterMut, Keys, Values, ValuesMut};
#[cfg(feature = "rayon")]
pub use par::{ParDrain, ParIter, ParIterMut, ParValuesMut};
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
