//! The entry table: one entry word per slot index, in a sparse tree that
//! never moves (see "The table and what a handle can cost" in the module
//! docs of `secondary::entry`).
//!
//! An index splits into four fields, root to leaf. A node or leaf is
//! allocated the first time an insert needs it, published by a CAS on its
//! parent's pointer, and freed only when the table is dropped, so a
//! reference to an entry word lives as long as the table.

use core::ptr;

use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// The tree's shape: index bits per leaf and per node.
#[cfg(not(all(test, handle_pool_loom)))]
mod shape {
    pub(super) const LEAF_SHIFT: u32 = 8;
    pub(super) const NODE_SHIFT: u32 = 8;
}

/// Under loom, two entries to a leaf and two children to a node, so that a
/// model reaches growth in a few inserts; the root then covers indices
/// below 16 only, which is all the models use.
#[cfg(all(test, handle_pool_loom))]
mod shape {
    pub(super) const LEAF_SHIFT: u32 = 1;
    pub(super) const NODE_SHIFT: u32 = 1;
}

use shape::{LEAF_SHIFT, NODE_SHIFT};

/// Entries per leaf.
pub(crate) const LEAF_LEN: usize = 1 << LEAF_SHIFT;
/// Children per node (the root included).
const FANOUT: usize = 1 << NODE_SHIFT;
/// The index bits below a first-level node's children (each a second-level node).
const LEVEL1_SHIFT: u32 = LEAF_SHIFT + NODE_SHIFT;
/// The index bits below the root's children (each a first-level node).
const ROOT_SHIFT: u32 = LEAF_SHIFT + 2 * NODE_SHIFT;
/// One past the last index the table can hold.
const END: u64 = (FANOUT as u64) << ROOT_SHIFT;

// Outside loom the root covers every `u32` index, so the root's bounds
// check, on `index >> ROOT_SHIFT`, is one the compiler removes.
#[cfg(not(all(test, handle_pool_loom)))]
const _: () = assert!(END == 1 << 32, "the table must cover every u32 index");

/// Entry words of `LEAF_LEN` consecutive indices.
pub(crate) struct Leaf {
    words: [AtomicU64; LEAF_LEN],
}

/// `FANOUT` children, each a `Box<C>` given up to a raw pointer, or null.
struct Node<C> {
    children: [AtomicPtr<C>; FANOUT],
}

/// What a node's child is made of when it is first needed.
trait Fresh: Sized {
    fn fresh() -> Box<Self>;
}

impl Fresh for Leaf {
    fn fresh() -> Box<Self> {
        Box::new(Leaf {
            words: core::array::from_fn(|_| AtomicU64::new(0)),
        })
    }
}

impl<C> Fresh for Node<C> {
    fn fresh() -> Box<Self> {
        Box::new(Node::new())
    }
}

impl<C> Node<C> {
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

impl<C> Drop for Node<C> {
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

/// The entry words of a map.
pub(crate) struct Table {
    root: Node<Node<Node<Leaf>>>,
    /// One past the last index of the highest leaf allocated: where the
    /// cursors stop. Only grows.
    end: AtomicU64,
    /// Leaves allocated, for `capacity`.
    leaves: AtomicUsize,
}

impl Table {
    pub(crate) fn new() -> Self {
        Table {
            root: Node::new(),
            end: AtomicU64::new(0),
            leaves: AtomicUsize::new(0),
        }
    }

    /// The leaf holding `index`, if it was allocated.
    #[inline(always)]
    fn leaf(&self, index: u32) -> Option<&Leaf> {
        self.root
            .child(root_field(index))?
            .child(level1_field(index))?
            .child(level2_field(index))
    }

    /// The entry word of `index`, if its leaf was allocated.
    #[inline(always)]
    pub(crate) fn find(&self, index: u32) -> Option<&AtomicU64> {
        Some(&self.leaf(index)?.words[leaf_field(index)])
    }

    /// The entry word of `index` now (`VACANT`, 0, if its leaf was never
    /// allocated), loaded with Acquire: see the callers for what it pairs
    /// with.
    #[inline(always)]
    pub(crate) fn load(&self, index: u32) -> u64 {
        match self.find(index) {
            Some(word) => word.load(Ordering::Acquire),
            None => 0,
        }
    }

    /// The entry word of `index`, allocating its leaf (and the nodes above
    /// it) if needed: at most three allocations of one node or leaf each,
    /// whatever the index.
    ///
    /// # Panics
    /// Under loom only, for an index past the model's table.
    pub(crate) fn find_or_grow(&self, index: u32) -> &AtomicU64 {
        let leaf = self
            .root
            .child_or_grow(root_field(index), || {})
            .child_or_grow(level1_field(index), || {})
            .child_or_grow(level2_field(index), || self.grew(index));
        &leaf.words[leaf_field(index)]
    }

    /// Bookkeeping after this thread allocated the leaf of `index`.
    #[cold]
    fn grew(&self, index: u32) {
        // Relaxed: counts for `capacity` and for the cursors' end. A cursor
        // must visit what was inserted before it began, which happens before
        // it, and this raise is sequenced before that insert's CAS: its load
        // reads this value or a larger one.
        self.leaves.fetch_add(1, Ordering::Relaxed);
        self.end
            .fetch_max(past_block(index.into(), LEAF_SHIFT), Ordering::Relaxed);
    }

    /// Allocates the leaves of indices `0..end`.
    pub(crate) fn reserve(&self, end: u64) {
        let end = end.min(END);
        let mut index = 0;
        while index < end {
            // `index < END <= 2^32`.
            self.find_or_grow(index as u32);
            index += LEAF_LEN as u64;
        }
    }

    /// Entries allocated.
    pub(crate) fn capacity(&self) -> usize {
        // Relaxed: a count for reporting.
        self.leaves.load(Ordering::Relaxed) * LEAF_LEN
    }

    /// A cursor over the entry words of every allocated leaf, in index order.
    pub(crate) fn words(&self) -> Words<'_> {
        Words {
            table: self,
            next: 0,
            // Relaxed: see `grew`.
            end: self.end.load(Ordering::Relaxed),
            leaf: None,
        }
    }

    /// The leaf holding `index`, or the first index past the missing
    /// subtree that would hold it.
    fn leaf_or_skip(&self, index: u64) -> Result<&Leaf, u64> {
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

/// The entry words of a range of indices, in index order, skipping the
/// leaves never allocated. Splits in two for rayon.
pub(crate) struct Words<'a> {
    table: &'a Table,
    /// The next index to visit.
    next: u64,
    /// One past the last index to visit.
    end: u64,
    /// The leaf holding `next`, once found (and the index past it).
    leaf: Option<(&'a Leaf, u64)>,
}

impl<'a> Iterator for Words<'a> {
    type Item = (u32, &'a AtomicU64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.end {
            match self.leaf {
                Some((leaf, past)) if self.next < past => {
                    // `next < end <= 2^32`.
                    let index = self.next as u32;
                    self.next += 1;
                    return Some((index, &leaf.words[leaf_field(index)]));
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

    /// `(0, Some(indices left))`: leaves never allocated are skipped.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end.saturating_sub(self.next);
        (0, usize::try_from(left).ok())
    }
}

impl Words<'_> {
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
        let upper = Words {
            table: self.table,
            next: cut,
            end: self.end,
            leaf: None,
        };
        self.end = cut;
        Some(upper)
    }
}
