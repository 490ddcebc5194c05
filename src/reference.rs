//! A single-threaded table with the pool's observable semantics, written to
//! be obviously correct rather than fast: the oracle the model checks compare
//! against, and a stand-in for testing code that uses a pool.

use crate::handle::{Handle, MAX_GENERATION, MAX_INDEX};

/// A plain generational table with the same rules as [`HandlePool`](crate::HandlePool):
/// insert returns a handle no earlier insert returned, a removed handle never
/// resolves again, generations start at 1 and a slot whose occupant reached
/// the generation limit is never reused.
///
/// Slot reuse order differs from the pool's (the pool reuses slots later and
/// per stripe), so compare tables by what handles refer to, not by their bits.
///
/// ```
/// use handle_pool::ReferenceTable;
/// let mut table = ReferenceTable::new();
/// let h = table.insert('a').unwrap();
/// assert_eq!(table.get(h), Some(&'a'));
/// assert_eq!(table.remove(h), Some('a'));
/// assert_eq!(table.get(h), None);
/// assert_ne!(table.insert('b').unwrap(), h);
/// ```
#[derive(Clone, Debug)]
pub struct ReferenceTable<T> {
    /// Per slot: the generation of its last occupant (0 if none) and the value.
    slots: Vec<(u32, Option<T>)>,
    /// Vacant reusable slot indices; reused oldest first.
    free: std::collections::VecDeque<u32>,
    max_generation: u32,
    max_slots: u64,
    len: usize,
}

impl<T> Default for ReferenceTable<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ReferenceTable<T> {
    /// An empty table with the pool's default limits.
    ///
    /// ```
    /// let t: handle_pool::ReferenceTable<u8> = handle_pool::ReferenceTable::new();
    /// assert!(t.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_limits(MAX_GENERATION, MAX_INDEX as u64 + 1)
    }

    /// An empty table whose slots retire after `max_generation` and which
    /// holds at most `max_slots` slots, to match a pool made with the same
    /// limits.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::with_limits(1, 1);
    /// let h = t.insert(1).unwrap();
    /// t.remove(h);
    /// assert!(t.insert(2).is_err()); // the only slot is retired
    /// ```
    pub fn with_limits(max_generation: u32, max_slots: u64) -> Self {
        assert!((1..=MAX_GENERATION).contains(&max_generation));
        ReferenceTable {
            slots: Vec::new(),
            free: Default::default(),
            max_generation,
            max_slots: max_slots.min(MAX_INDEX as u64 + 1),
            len: 0,
        }
    }

    /// Inserts a value; `Err` gives it back when no slot is left.
    ///
    /// # Errors
    /// The value, when every slot is occupied or retired.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// let h = t.insert(1).unwrap();
    /// assert_eq!(t.get(h), Some(&1));
    /// ```
    pub fn insert(&mut self, value: T) -> Result<Handle, T> {
        let index = match self.free.pop_front() {
            Some(index) => index,
            None if (self.slots.len() as u64) < self.max_slots => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
            None => return Err(value),
        };
        let slot = &mut self.slots[index as usize];
        slot.0 += 1;
        slot.1 = Some(value);
        self.len += 1;
        Ok(Handle::new(index, slot.0))
    }

    fn slot(&self, handle: Handle) -> Option<&(u32, Option<T>)> {
        self.slots
            .get(handle.index() as usize)
            .filter(|slot| slot.0 == handle.generation() && slot.1.is_some())
    }

    /// The value `handle` refers to.
    ///
    /// ```
    /// let t: handle_pool::ReferenceTable<u8> = handle_pool::ReferenceTable::new();
    /// assert_eq!(t.get(handle_pool::Handle::from_bits(1 << 32).unwrap()), None);
    /// ```
    pub fn get(&self, handle: Handle) -> Option<&T> {
        self.slot(handle).and_then(|slot| slot.1.as_ref())
    }

    /// The value `handle` refers to, mutably.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// let h = t.insert(1).unwrap();
    /// *t.get_mut(h).unwrap() = 2;
    /// assert_eq!(t.get(h), Some(&2));
    /// ```
    pub fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        self.slot(handle)?;
        self.slots[handle.index() as usize].1.as_mut()
    }

    /// Whether `handle` refers to a value.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// let h = t.insert(1).unwrap();
    /// assert!(t.contains(h));
    /// ```
    pub fn contains(&self, handle: Handle) -> bool {
        self.slot(handle).is_some()
    }

    /// Removes and returns the value `handle` refers to.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// let h = t.insert(1).unwrap();
    /// assert_eq!(t.remove(h), Some(1));
    /// assert_eq!(t.remove(h), None);
    /// ```
    pub fn remove(&mut self, handle: Handle) -> Option<T> {
        self.slot(handle)?;
        let index = handle.index();
        let slot = &mut self.slots[index as usize];
        let value = slot.1.take();
        self.len -= 1;
        if slot.0 < self.max_generation {
            self.free.push_back(index);
        }
        value
    }

    /// Number of values.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// t.insert(1).unwrap();
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no values.
    ///
    /// ```
    /// assert!(handle_pool::ReferenceTable::<u8>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `(handle, &value)` pairs, in index order.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// let h = t.insert(1).unwrap();
    /// assert_eq!(t.iter().collect::<Vec<_>>(), vec![(h, &1)]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (Handle, &T)> + '_ {
        self.slots.iter().enumerate().filter_map(|(index, slot)| {
            slot.1
                .as_ref()
                .map(|value| (Handle::new(index as u32, slot.0), value))
        })
    }

    /// Removes every value for which `keep` returns `false`.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// t.insert(1).unwrap();
    /// t.insert(2).unwrap();
    /// t.retain(|_, v| *v > 1);
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(Handle, &mut T) -> bool) {
        let doomed: Vec<Handle> = (0..self.slots.len())
            .filter_map(|index| {
                let (generation, value) = &mut self.slots[index];
                let handle = Handle::new(index as u32, (*generation).max(1));
                match value {
                    Some(v) => (!keep(handle, v)).then_some(handle),
                    None => None,
                }
            })
            .collect();
        for handle in doomed {
            self.remove(handle);
        }
    }

    /// Removes every value; every old handle becomes stale.
    ///
    /// ```
    /// let mut t = handle_pool::ReferenceTable::new();
    /// let h = t.insert(1).unwrap();
    /// t.clear();
    /// assert!(!t.contains(h));
    /// ```
    pub fn clear(&mut self) {
        self.retain(|_, _| false);
    }
}
