#![doc = include_str!("../README.md")]
#![warn(missing_docs, rust_2018_idioms)]

mod config;
mod error;
mod free_list;
mod handle;
mod iter;
mod pool;
mod reclaim;
pub mod reference;
mod shared;
mod slot;
mod storage;
mod sync;

#[doc(hidden)]
pub use config::Config;
pub use crossbeam_epoch::{pin, Guard};
pub use error::CapacityError;
pub use handle::{Handle, PoolHandle, MAX_GENERATION, MAX_INDEX};
pub use iter::{Drain, Iter, IterMut};
pub use pool::HandlePool;
pub use reference::ReferenceTable;
