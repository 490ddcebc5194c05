//! The entry table: one entry per slot index, in storage that never moves
//! (see "The table and what a handle can cost" in the module docs of
//! `secondary::entry`).
//!
//! Two parts, by index. The *dense* part, indices below [`Table::DENSE`],
//! is the crate's own slot storage (`Storage<V>`: a flat region
//! committed up to the highest index used, as a pool's), so that a lookup
//! there costs what a pool's does. The *sparse* part, the rest of the index
//! space, is a tree: a leaf of entries, and the nodes above it, are
//! allocated the first time an index in it is inserted, published by a CAS
//! on the parent's pointer, and freed only when the table is dropped. A
//! forged index past the dense part thus costs a leaf, never a table up to
//! it. Under loom there is no dense part: the models run the tree.

use core::marker::PhantomData;
use core::ptr;

use crate::slot::Slot;
#[cfg(not(all(test, handle_pool_loom)))]
use crate::storage::Storage;
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::entry::Entry;

/// The tree's shape: index bits per leaf, per node and at the root.
#[cfg(not(all(test, handle_pool_loom)))]
mod shape {
    pub(super) const LEAF_SHIFT: u32 = 7;
    pub(super) const NODE_SHIFT: u32 = 8;
    pub(super) const ROOT_BITS: u32 = 9;
}

/// Under loom, two entries to a leaf and two children to a node and at the
/// root, so that a model reaches growth in a few inserts; the root then
/// covers indices below 16 only, which is all the models use.
#[cfg(all(test, handle_pool_loom))]
mod shape {
    pub(super) const LEAF_SHIFT: u32 = 1;
    pub(super) const NODE_SHIFT: u32 = 1;
    pub(super) const ROOT_BITS: u32 = 1;
}

use shape::{LEAF_SHIFT, NODE_SHIFT, ROOT_BITS};

/// Entries per leaf.
pub(crate) const LEAF_LEN: usize = 1 << LEAF_SHIFT;
/// Children per node.
const FANOUT: usize = 1 << NODE_SHIFT;
/// Children of the root.
const ROOT_FANOUT: usize = 1 << ROOT_BITS;
/// The index bits below a first-level node's children (each a second-level node).
const LEVEL1_SHIFT: u32 = LEAF_SHIFT + NODE_SHIFT;
/// The index bits below the root's children (each a first-level node).
const ROOT_SHIFT: u32 = LEAF_SHIFT + 2 * NODE_SHIFT;
/// One past the last index the table can hold.
const END: u64 = (ROOT_FANOUT as u64) << ROOT_SHIFT;

// Outside loom the root covers every `u32` index, so the root's bounds
// check, on `index >> ROOT_SHIFT`, is one the compiler removes.
#[cfg(not(all(test, handle_pool_loom)))]
const _: () = assert!(END == 1 << 32, "the table must cover every u32 index");

/// The most bytes of entries the dense part may commit: what a forged
/// handle just below its end can make the map commit (address space made
/// usable; pages take memory only once written).
#[cfg(not(all(test, handle_pool_loom)))]
const DENSE_BYTES: usize = 64 << 20;

/// The most indices the dense part holds, whatever the entry size.
#[cfg(not(all(test, handle_pool_loom)))]
const DENSE_MAX: u32 = 1 << 24;

/// Commits of the dense part go at least this far past the index that
/// needs one, so that a run of new indices does not commit one by one.
#[cfg(not(all(test, handle_pool_loom)))]
const DENSE_STEP: u32 = 64;

/// The entries of `LEAF_LEN` consecutive indices of the sparse part.
struct Leaf<V> {
    entries: [Slot<V>; LEAF_LEN],
}

// SAFETY: a leaf is entries, shared under `Entry`'s rules.
unsafe impl<V: Sync> Sync for Leaf<V> {}

// SAFETY: a leaf owns the values in its rooms: sending it sends them.
unsafe impl<V: Send> Send for Leaf<V> {}

/// `N` children, each a `Box<C>` given up to a raw pointer, or null.
struct Node<C, const N: usize = FANOUT> {
    children: [AtomicPtr<C>; N],
}

/// What a node's child is made of when it is first needed.
trait Fresh: Sized {
    fn fresh() -> Box<Self>;
}

impl<V> Fresh for Leaf<V> {
    fn fresh() -> Box<Self> {
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            // SAFETY: all zero bits are a valid leaf: every slot word
            // `VACANT` with its room free (a zero `AtomicU64`), every room
            // empty (a `MaybeUninit`); and a leaf is not zero-sized.
            unsafe { zeroed() }
        }
        #[cfg(all(test, handle_pool_loom))]
        {
            Box::new(Leaf {
                entries: core::array::from_fn(|_| Slot::new()),
            })
        }
    }
}

impl<C, const N: usize> Fresh for Node<C, N> {
    fn fresh() -> Box<Self> {
        Box::new(Node::new())
    }
}

/// A `T` of all zero bits on the heap, allocated zeroed (no copy through
/// the stack: a leaf of large values may be bigger than a thread's stack).
///
/// # Safety
/// All zero bits are a valid `T`, and `T` is not zero-sized.
#[cfg(not(all(test, handle_pool_loom)))]
unsafe fn zeroed<T>() -> Box<T> {
    use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
    let layout = Layout::new::<T>();
    debug_assert!(layout.size() > 0);
    // SAFETY: the layout has a non-zero size (the caller guarantees).
    let ptr = unsafe { alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: a fresh allocation with `T`'s layout, holding all zero bits,
    // which the caller guarantees is a valid `T`: owned by the box.
    unsafe { Box::from_raw(ptr) }
}

impl<C, const N: usize> Node<C, N> {
    fn new() -> Self {
        Node {
            children: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Child `k`, if allocated (and, under loom, if `k` is in range).
    #[inline(always)]
    fn child(&self, k: usize) -> Option<&C> {
        // Acquire pairs with the Release CAS in `child_or_grow`: the child
        // was initialised before it was published.
        let child = self.children.get(k)?.load(Ordering::Acquire);
        // SAFETY: a non-null child came from `Box::into_raw` in
        // `child_or_grow` and is freed only when this node is dropped,
        // which `&self` outlives.
        unsafe { child.as_ref() }
    }

    /// Child `k`, allocated now if it was not; `grew` is called if this
    /// call allocated it.
    ///
    /// # Panics
    /// If `k` is out of range, which only a loom model's index can be.
    fn child_or_grow(&self, k: usize, grew: impl FnOnce()) -> &C
    where
        C: Fresh,
    {
        if let Some(child) = self.child(k) {
            return child;
        }
        let Some(slot) = self.children.get(k) else {
            panic!("index past the table of a loom model");
        };
        let fresh = Box::into_raw(C::fresh());
        // Release publishes the fresh child to `child`'s Acquire loads;
        // Acquire on failure pairs with the winner's Release, since we use
        // the winner's child instead.
        let child = match slot.compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                grew();
                fresh
            }
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` just above and
                // was never shared: we lost the race.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        };
        // SAFETY: `child` is ours or the winner's, published and freed only
        // when this node is dropped, which `&self` outlives.
        unsafe { &*child }
    }
}

impl<C, const N: usize> Drop for Node<C, N> {
    fn drop(&mut self) {
        for child in &self.children {
            // Relaxed: `&mut self`, so nothing runs beside the drop.
            let child = child.load(Ordering::Relaxed);
            if !child.is_null() {
                // SAFETY: a non-null child came from `Box::into_raw` in
                // `child_or_grow` and is owned by this node alone, which is
                // being dropped: freed once.
                drop(unsafe { Box::from_raw(child) });
            }
        }
    }
}

/// The fields of an index, root to leaf.
#[inline(always)]
fn root_field(index: u32) -> usize {
    (index as u64 >> ROOT_SHIFT) as usize
}

#[inline(always)]
fn level1_field(index: u32) -> usize {
    (index >> LEVEL1_SHIFT) as usize & (FANOUT - 1)
}

#[inline(always)]
fn level2_field(index: u32) -> usize {
    (index >> LEAF_SHIFT) as usize & (FANOUT - 1)
}

#[inline(always)]
fn leaf_field(index: u32) -> usize {
    index as usize & (LEAF_LEN - 1)
}

/// The first index past the block of `1 << shift` indices holding `index`.
#[inline]
fn past_block(index: u64, shift: u32) -> u64 {
    (index | ((1 << shift) - 1)) + 1
}

/// The entry that is `slot`, a slot of the table's.
#[inline(always)]
fn entry<V>(slot: &Slot<V>) -> &Entry<V> {
    Entry::from_slot(slot)
}

/// The entries of a map.
pub(crate) struct Table<V> {
    /// Indices below [`Table::DENSE`]: the crate's slot storage.
    #[cfg(not(all(test, handle_pool_loom)))]
    dense: Storage<V>,
    /// The other indices: the tree.
    root: Node<Node<Node<Leaf<V>>>, ROOT_FANOUT>,
    /// One past the last index of the highest block allocated: where the
    /// cursors stop. Only grows.
    end: AtomicU64,
    /// One past the last index the dense part committed: where the cursors
    /// leave it. Only grows.
    dense_end: AtomicU64,
    /// Leaves allocated, for `capacity`.
    leaves: AtomicUsize,
    /// The rooms hold `V`s: the table's auto traits follow `V`'s, not those
    /// of the atomic pointers.
    _owns: PhantomData<V>,
}

impl<V> Table<V> {
    /// Indices below this live in the dense part: as many as
    /// [`DENSE_BYTES`] hold (a power of two, at most [`DENSE_MAX`]). Under
    /// loom, none.
    #[cfg(not(all(test, handle_pool_loom)))]
    pub(crate) const DENSE: u32 = {
        let fit = DENSE_BYTES / core::mem::size_of::<Slot<V>>();
        let fit = if fit > DENSE_MAX as usize {
            DENSE_MAX as usize
        } else {
            fit
        };
        // The largest power of two that fits (at least one leaf's worth).
        let fit = if fit < LEAF_LEN { LEAF_LEN } else { fit };
        1 << (usize::BITS - 1 - fit.leading_zeros())
    };
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) const DENSE: u32 = 0;

    pub(crate) fn new() -> Self {
        Table {
            #[cfg(not(all(test, handle_pool_loom)))]
            dense: Storage::new(6, Self::DENSE, Self::DENSE),
            root: Node::new(),
            end: AtomicU64::new(0),
            dense_end: AtomicU64::new(0),
            leaves: AtomicUsize::new(0),
            _owns: PhantomData,
        }
    }

    /// The leaf holding `index` (past the dense part), if it was allocated.
    #[inline(always)]
    fn leaf(&self, index: u32) -> Option<&Leaf<V>> {
        self.root
            .child(root_field(index))?
            .child(level1_field(index))?
            .child(level2_field(index))
    }

    /// The entry of `index`, if its storage was allocated.
    #[inline(always)]
    pub(crate) fn find(&self, index: u32) -> Option<&Entry<V>> {
        #[cfg(not(all(test, handle_pool_loom)))]
        if index < Self::DENSE {
            return self.dense.find(index).map(entry);
        }
        Some(entry(&self.leaf(index)?.entries[leaf_field(index)]))
    }

    /// `found` of the entry of `index`, or `missing` if its storage was
    /// never allocated: as the storage's own `find_or`, so that a lookup
    /// does its work on each path (dense, sparse) rather than merge the two
    /// into an `Option` first.
    #[inline(always)]
    pub(crate) fn find_or<'a, R>(
        &'a self,
        index: u32,
        found: impl FnOnce(&'a Entry<V>) -> R,
        missing: R,
    ) -> R {
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            // The flat region first: it holds indices below `DENSE` alone
            // (the dense storage hands out no more), so a hit there, the
            // common lookup, needs no test against `DENSE`.
            if let Some(slot) = self.dense.flat_slot(index) {
                return found(entry(slot));
            }
            if index < Self::DENSE {
                return self
                    .dense
                    .find_in_buckets(index, |slot| found(entry(slot)), missing);
            }
        }
        match self.leaf(index) {
            Some(leaf) => found(entry(&leaf.entries[leaf_field(index)])),
            None => missing,
        }
    }

    /// The entry of `index` and its word now (`VACANT`, 0, if its storage
    /// was never allocated), loaded with Acquire: see the callers for what
    /// it pairs with.
    #[inline(always)]
    pub(crate) fn load(&self, index: u32) -> (Option<&Entry<V>>, u64) {
        match self.find(index) {
            Some(entry) => (Some(entry), entry.word().load(Ordering::Acquire)),
            None => (None, 0),
        }
    }

    /// The entry of `index`, allocating its storage if needed: in the dense
    /// part, the storage's commit up to a little past `index` (at most
    /// [`DENSE_BYTES`] in all); past it, at most a leaf and the two nodes
    /// above it, whatever the index.
    ///
    /// # Panics
    /// Under loom only, for an index past the model's table.
    pub(crate) fn find_or_grow(&self, index: u32) -> &Entry<V> {
        if let Some(entry) = self.find(index) {
            return entry;
        }
        self.grow(index)
    }

    #[cold]
    #[inline(never)]
    fn grow(&self, index: u32) -> &Entry<V> {
        #[cfg(not(all(test, handle_pool_loom)))]
        if index < Self::DENSE {
            let end = index.saturating_add(DENSE_STEP).min(Self::DENSE);
            self.dense.ensure(index, end);
            self.raise_dense_end(end.into());
            return entry(self.dense.slot(index));
        }
        let leaf = self
            .root
            .child_or_grow(root_field(index), || {})
            .child_or_grow(level1_field(index), || {})
            .child_or_grow(level2_field(index), || {
                // Relaxed: a count for `capacity`.
                self.leaves.fetch_add(1, Ordering::Relaxed);
                self.raise_end(past_block(index.into(), LEAF_SHIFT));
            });
        entry(&leaf.entries[leaf_field(index)])
    }

    /// Raises the cursors' end to `end`.
    fn raise_end(&self, end: u64) {
        // Relaxed: a cursor must visit what was inserted before it began,
        // which happens before it, and this raise is sequenced before that
        // insert's CAS: its load reads this value or a larger one.
        self.end.fetch_max(end, Ordering::Relaxed);
    }

    /// Raises the dense part's end, and the cursors' end, to `end`.
    #[cfg(not(all(test, handle_pool_loom)))]
    fn raise_dense_end(&self, end: u64) {
        // Relaxed: as in `raise_end`.
        self.dense_end.fetch_max(end, Ordering::Relaxed);
        self.raise_end(end);
    }

    /// Allocates the entries of indices `0..end`.
    pub(crate) fn reserve(&self, end: u64) {
        let end = end.min(END);
        #[cfg(not(all(test, handle_pool_loom)))]
        {
            let dense_end = end.min(Self::DENSE.into()) as u32;
            self.dense.ensure(0, dense_end);
            self.raise_dense_end(dense_end.into());
        }
        let mut index = u64::from(Self::DENSE);
        while index < end {
            // `index < END <= 2^32`.
            self.find_or_grow(index as u32);
            index += LEAF_LEN as u64;
        }
    }

    /// Entries allocated.
    pub(crate) fn capacity(&self) -> usize {
        // Relaxed: a count for reporting.
        let sparse = self.leaves.load(Ordering::Relaxed) * LEAF_LEN;
        #[cfg(not(all(test, handle_pool_loom)))]
        return self.dense.capacity() + sparse;
        #[cfg(all(test, handle_pool_loom))]
        sparse
    }

    /// A cursor over the entries allocated, in index order.
    pub(crate) fn entries(&self) -> Entries<'_, V> {
        Entries {
            table: self,
            next: 0,
            // Relaxed: see `raise_end`.
            end: self.end.load(Ordering::Relaxed),
            dense_end: self.dense_end.load(Ordering::Relaxed),
            leaf: None,
        }
    }

    /// The leaf holding `index` (past the dense part), or the first index
    /// past the missing subtree that would hold it.
    fn leaf_or_skip(&self, index: u64) -> Result<&Leaf<V>, u64> {
        if index >= END {
            return Err(u64::MAX);
        }
        // `index < END <= 2^32`.
        let narrow = index as u32;
        let Some(level1) = self.root.child(root_field(narrow)) else {
            return Err(past_block(index, ROOT_SHIFT));
        };
        let Some(level2) = level1.child(level1_field(narrow)) else {
            return Err(past_block(index, LEVEL1_SHIFT));
        };
        level2
            .child(level2_field(narrow))
            .ok_or_else(|| past_block(index, LEAF_SHIFT))
    }
}

/// The entries of a range of indices, in index order, skipping those never
/// allocated. Splits in two for rayon.
pub(crate) struct Entries<'a, V> {
    table: &'a Table<V>,
    /// The next index to visit.
    next: u64,
    /// One past the last index to visit.
    end: u64,
    /// One past the last index of the dense part committed when the cursor
    /// was made: from there to the dense part's end nothing is allocated.
    dense_end: u64,
    /// The leaf holding `next`, once found (and the index past it).
    leaf: Option<(&'a Leaf<V>, u64)>,
}

impl<'a, V> Iterator for Entries<'a, V> {
    type Item = (u32, &'a Entry<V>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            // `next < end <= 2^32`.
            let index = self.next as u32;
            if index < Table::<V>::DENSE {
                if self.next >= self.dense_end {
                    // Nothing committed past it when the cursor was made.
                    self.next = Table::<V>::DENSE.into();
                    continue;
                }
                self.next += 1;
                match self.table.find(index) {
                    Some(entry) => return Some((index, entry)),
                    // In a bucket never allocated: nothing there.
                    None => continue,
                }
            }
            match self.leaf {
                Some((leaf, past)) if self.next < past => {
                    self.next += 1;
                    return Some((index, entry(&leaf.entries[leaf_field(index)])));
                }
                _ => match self.table.leaf_or_skip(self.next) {
                    Ok(leaf) => self.leaf = Some((leaf, past_block(self.next, LEAF_SHIFT))),
                    Err(skip) => {
                        self.leaf = None;
                        self.next = skip;
                    }
                },
            }
        }
        None
    }

    /// `(0, Some(indices left))`: storage never allocated is skipped.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end.saturating_sub(self.next);
        (0, usize::try_from(left).ok())
    }
}

impl<V> Entries<'_, V> {
    /// Splits the indices left in two and returns the upper part, keeping
    /// the lower; `None` if fewer than two are left. The cut is the middle,
    /// moved down to a leaf boundary when one is above the start, so that
    /// parts walk whole leaves.
    #[cfg(feature = "rayon")]
    pub(crate) fn split_off(&mut self) -> Option<Self> {
        let left = self.end.saturating_sub(self.next);
        if left < 2 {
            return None;
        }
        let middle = self.next + left / 2;
        let boundary = middle & !(LEAF_LEN as u64 - 1);
        let cut = if boundary > self.next {
            boundary
        } else {
            middle
        };
        let upper = Entries {
            table: self.table,
            next: cut,
            end: self.end,
            dense_end: self.dense_end,
            leaf: None,
        };
        self.end = cut;
        Some(upper)
    }
}
