//! What the value pool holds for a secondary map: a value that could not go
//! in its entry's room, or a *retired cell*, which owns a room whose value
//! the map took out of its entry and whose `Drop` drops that value and frees
//! the room (see "The shape" in the module docs of `secondary::entry`).

use core::ptr::NonNull;

use super::entry::{free_room, Entry};

/// A value of the map's value pool.
pub(crate) enum Stored<V> {
    /// A value an entry's word names as `POOLED`.
    Value(V),
    /// A room taken out of its entry, inserted and removed at once: dropped
    /// by the value pool's reclamation once no reader can see the value in
    /// the room. Held for its `Drop` alone.
    Retired(#[allow(dead_code)] RetiredCell<V>),
}

impl<V> Stored<V> {
    /// The value of a `Stored` an entry's word names.
    #[inline(always)]
    pub(crate) fn value(&self) -> &V {
        match self {
            Stored::Value(value) => value,
            Stored::Retired(_) => not_a_value(),
        }
    }

    /// [`value`](Self::value), mutably.
    #[inline(always)]
    pub(crate) fn value_mut(&mut self) -> &mut V {
        match self {
            Stored::Value(value) => value,
            Stored::Retired(_) => not_a_value(),
        }
    }

    /// [`value`](Self::value), taken.
    pub(crate) fn into_value(self) -> V {
        match self {
            Stored::Value(value) => value,
            Stored::Retired(_) => not_a_value(),
        }
    }
}

#[cold]
#[inline(never)]
fn not_a_value() -> ! {
    panic!("handle-pool bug: an entry word names a retired cell as its value")
}

/// Owns the room of an entry whose value the map took out of its word;
/// dropping it drops the value and frees the room.
pub(crate) struct RetiredCell<V>(NonNull<Entry<V>>);

impl<V> RetiredCell<V> {
    /// The room of `entry`, from now on this retired cell's.
    ///
    /// # Safety
    /// The caller holds the room (it won the CAS that took an `INLINE` word
    /// out of the entry, leaving `HELD` set), the room holds a value, and
    /// the entry outlives the value pool this retired cell goes into (the
    /// map drops its value pool before its table).
    pub(crate) unsafe fn new(entry: &Entry<V>) -> Self {
        RetiredCell(NonNull::from(entry))
    }
}

impl<V> Drop for RetiredCell<V> {
    fn drop(&mut self) {
        // SAFETY: the entry outlives the value pool (see `new`), which is
        // dropping this.
        let entry = unsafe { self.0.as_ref() };
        // SAFETY: the room holds a value and is ours (see `new`); a retired
        // cell is dropped once no reader can see the value (the value
        // pool's reclamation of a removed value, or `&mut` of the map), so
        // nobody reads it afterwards.
        let value = unsafe { entry.take() };
        free_room(entry);
        drop(value);
    }
}

// SAFETY: a retired cell moves a `V` out of its room and drops it, on
// whichever thread drops the cell: `V: Send`, as a `V` in a pool.
unsafe impl<V: Send> Send for RetiredCell<V> {}

// SAFETY: through `&RetiredCell` nothing can be reached: it has no method,
// and its `Drop` needs it owned.
unsafe impl<V> Sync for RetiredCell<V> {}
