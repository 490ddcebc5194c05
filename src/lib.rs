#![doc = include_str!("../README.md")]
#![warn(missing_docs, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The map of the crate, in data-flow order, opens `docs/design.md`
// (rendered as the `design` module).
mod announce;
mod collect;
mod config;
pub mod dense;
mod error;
mod events;
mod guard;
mod handle;
mod hint;
mod iter;
mod lists;
mod magazine;
mod membarrier;
mod pool;
// After `pool`: rustdoc lists impl blocks in module order, so the pool's
// own methods, constructors first, come before the rayon ones.
#[cfg(feature = "rayon")]
mod par;
mod raw;
mod reader;
mod reclaim;
pub mod reference;
mod region;
pub mod secondary;
#[cfg(feature = "serde")]
mod serde_impl;
mod slot;
mod storage;
mod stripe;
mod sync;
mod thread_id;

// The loom models run as this library's unit tests (see `.ci/loom.sh`), so
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
pub use dense::DensePool;
pub use error::CapacityError;
/// Counts of slow-path events for this crate's own tools (feature
/// `testing`; not part of the stable API).
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use events::{snapshot as event_counts, snapshot_here as event_counts_here, Event};
pub use guard::{pin, Guard, ThreadBound};
pub use handle::{Handle, PoolHandle, MAX_GENERATION, MAX_INDEX};
pub use iter::{Drain, Iter, IterMut, Keys, Values, ValuesMut};
#[cfg(feature = "rayon")]
pub use par::{ParDrain, ParIter, ParIterMut, ParValuesMut};
pub use pool::HandlePool;
pub use reader::Reader;
pub use reference::ReferenceTable;
pub use secondary::SecondaryMap;

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

/// How the pool works, for reviewers and contributors: the map of the
/// crate, the slot word's state table, the lists threaded through the
/// slots, reclamation, and the arguments behind the guarantees. Documentation
/// only; nothing here is API.
#[doc = include_str!("../docs/design.md")]
#[doc = "\n# Slots\n"]
#[doc = include_str!("../docs/slot.md")]
#[doc = "\n# Storage\n"]
#[doc = include_str!("../docs/storage.md")]
#[doc = "\n# Lists\n"]
#[doc = include_str!("../docs/lists.md")]
#[doc = "\n# Stripes\n"]
#[doc = include_str!("../docs/stripe.md")]
#[doc = "\n# Magazines\n"]
#[doc = include_str!("../docs/magazine.md")]
#[doc = "\n# Reclamation\n"]
#[doc = include_str!("../docs/reclaim.md")]
#[doc = "\n# Secondary maps\n"]
#[doc = include_str!("../docs/secondary.md")]
pub mod design {}
