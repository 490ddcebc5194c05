//! Parallel mutation with rayon (feature `rayon`): after compaction the
//! live values are positions `0..len`, which rayon splits in halves, cut
//! at a segment boundary where one is near the middle, so that each part
//! walks whole slices.

use core::marker::PhantomData;

use rayon::iter::plumbing::{bridge_unindexed, Folder, UnindexedConsumer, UnindexedProducer};
use rayon::iter::ParallelIterator;

use crate::handle::PoolHandle;
use crate::sync::Ordering;

use super::column::Column;
use super::index::handle_in;
use super::DensePool;

impl<T, H: PoolHandle> DensePool<T, H> {
    /// A parallel iterator over `(handle, &mut value)`, after compacting:
    /// the live values, each once, split along the dense array's slices.
    ///
    /// Needs `T: Send`, as handing `&mut T` to other threads does.
    ///
    /// # Panics
    /// As [`compact`](Self::compact).
    ///
    /// ```
    /// use handle_pool::DensePool;
    /// use rayon::prelude::*;
    /// let mut pool: DensePool<u64> = (0..1000).collect();
    /// pool.par_iter_mut().for_each(|(_, v)| *v += 1);
    /// assert_eq!(pool.values_mut().map(|v| *v).sum::<u64>(), 500_500);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter_mut(&mut self) -> ParIterMut<'_, T, H>
    where
        T: Send,
    {
        self.compact();
        ParIterMut {
            positions: Positions::new(self),
            _handle: PhantomData,
        }
    }

    /// A parallel iterator over `&mut value`, after compacting: each part a
    /// run of slices, which the compiler can vectorise.
    ///
    /// # Panics
    /// As [`compact`](Self::compact).
    ///
    /// ```
    /// use handle_pool::DensePool;
    /// use rayon::prelude::*;
    /// let mut pool: DensePool<u32> = (0..10).collect();
    /// assert_eq!(pool.par_values_mut().map(|v| *v).max(), Some(9));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_values_mut(&mut self) -> ParValuesMut<'_, T>
    where
        T: Send,
    {
        self.compact();
        ParValuesMut {
            positions: Positions::new(self),
        }
    }
}

/// Positions `start..end` of a compacted pool borrowed mutably: live
/// values, each handed out by one part only.
struct Positions<'a, T> {
    column: &'a Column<T>,
    start: u32,
    end: u32,
    _values: PhantomData<&'a mut T>,
}

impl<'a, T> Positions<'a, T> {
    /// Every live position of `pool`, which the caller has just compacted.
    fn new<H: PoolHandle>(pool: &'a mut DensePool<T, H>) -> Self {
        let raw = pool.raw_mut();
        let end = raw.round.len;
        Positions {
            column: &raw.column,
            start: 0,
            end,
            _values: PhantomData,
        }
    }

    /// Splits the positions in two, keeping the lower part.
    fn split_off(&mut self) -> Option<Self> {
        let cut = self.column.split_point(self.start, self.end)?;
        let upper = Positions {
            column: self.column,
            start: cut,
            end: self.end,
            _values: PhantomData,
        };
        self.end = cut;
        Some(upper)
    }

    /// Each run of the range: its words and its values, as a slice.
    fn runs(self) -> impl Iterator<Item = (&'a [crate::sync::AtomicU64], &'a mut [T])> {
        self.column.runs(self.start, self.end).map(|run| {
            // SAFETY: positions below the compacted length are live, the
            // pool is borrowed mutably for 'a, and parts split off cover
            // disjoint ranges: each value is handed out once.
            let values = unsafe { run.values_mut() };
            (run.words, values)
        })
    }
}

// SAFETY: a part hands out `&mut T` for its own positions only (parts are
// disjoint ranges of a pool borrowed mutably): sending it sends those,
// which needs `T: Send`, as for `std::slice::IterMut`. It reads the
// column's segment pointers and words, atomics shared between threads.
unsafe impl<T: Send> Send for Positions<'_, T> {}

/// One part of a parallel pass.
struct Producer<'a, T, H, V> {
    positions: Positions<'a, T>,
    _item: PhantomData<fn() -> (H, V)>,
}

impl<'a, T: Send, H: PoolHandle + Send> UnindexedProducer for Producer<'a, T, H, (H, &'a mut T)> {
    type Item = (H, &'a mut T);

    fn split(mut self) -> (Self, Option<Self>) {
        let upper = self.positions.split_off().map(|positions| Producer {
            positions,
            _item: PhantomData,
        });
        (self, upper)
    }

    fn fold_with<F: Folder<Self::Item>>(self, mut folder: F) -> F {
        for (words, values) in self.positions.runs() {
            folder = folder.consume_iter(words.iter().zip(values).map(|(word, value)| {
                // Relaxed: the pool is borrowed mutably.
                (
                    H::from_handle(handle_in(word.load(Ordering::Relaxed))),
                    value,
                )
            }));
            if folder.full() {
                break;
            }
        }
        folder
    }
}

impl<'a, T: Send> UnindexedProducer for Producer<'a, T, (), &'a mut T> {
    type Item = &'a mut T;

    fn split(mut self) -> (Self, Option<Self>) {
        let upper = self.positions.split_off().map(|positions| Producer {
            positions,
            _item: PhantomData,
        });
        (self, upper)
    }

    fn fold_with<F: Folder<Self::Item>>(self, mut folder: F) -> F {
        for (_, values) in self.positions.runs() {
            folder = folder.consume_iter(values);
            if folder.full() {
                break;
            }
        }
        folder
    }
}

/// Parallel iterator over `(handle, &mut value)`, from
/// [`DensePool::par_iter_mut`].
///
/// ```
/// use handle_pool::DensePool;
/// use rayon::prelude::*;
/// let mut pool: DensePool<u32> = (0..10).collect();
/// assert_eq!(pool.par_iter_mut().filter(|(_, v)| **v % 2 == 0).count(), 5);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParIterMut<'a, T, H> {
    positions: Positions<'a, T>,
    _handle: PhantomData<fn() -> H>,
}

impl<'a, T: Send, H: PoolHandle + Send> ParallelIterator for ParIterMut<'a, T, H> {
    type Item = (H, &'a mut T);

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        let producer: Producer<'a, T, H, (H, &'a mut T)> = Producer {
            positions: self.positions,
            _item: PhantomData,
        };
        bridge_unindexed(producer, consumer)
    }
}

/// Parallel iterator over `&mut value`, from [`DensePool::par_values_mut`].
///
/// ```
/// use handle_pool::DensePool;
/// use rayon::prelude::*;
/// let mut pool: DensePool<u32> = (0..10).collect();
/// pool.par_values_mut().for_each(|v| *v *= 2);
/// assert_eq!(pool.values_mut().map(|v| *v).sum::<u32>(), 90);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
pub struct ParValuesMut<'a, T> {
    positions: Positions<'a, T>,
}

impl<'a, T: Send> ParallelIterator for ParValuesMut<'a, T> {
    type Item = &'a mut T;

    fn drive_unindexed<C: UnindexedConsumer<Self::Item>>(self, consumer: C) -> C::Result {
        let producer: Producer<'a, T, (), &'a mut T> = Producer {
            positions: self.positions,
            _item: PhantomData,
        };
        bridge_unindexed(producer, consumer)
    }
}
