//! [`SecondaryMap`]: values keyed by a pool's handles, shared by every
//! thread, and its iterators.
//!
//! How it works (the entry word's state table, the races, what a handle can
//! cost) is in the [`design`](crate::design) module, "Secondary maps".

use core::fmt;
use core::marker::PhantomData;

use crate::guard::{pin, Guard};
use crate::handle::{Handle, PoolHandle};

mod entry;
mod iter;
#[cfg(feature = "rayon")]
mod par;
mod raw;
mod retired;
#[cfg(feature = "serde")]
mod serde_impl;
mod table;

pub use iter::{Drain, Iter, IterMut, Keys, Values, ValuesMut};
#[cfg(feature = "rayon")]
pub use par::{ParIter, ParIterMut};

use iter::Exclusive;
use raw::RawSecondary;

/// A map from a primary pool's handles to values, with the primary's
/// staleness rule, that every thread reads and writes at once.
///
/// A job system keeps an entity in a [`HandlePool`](crate::HandlePool) and
/// attaches components to it in other containers, written by different
/// workers, looked up by the same handle. A `SecondaryMap` is that
/// container: the rules of `slotmap`'s `SecondaryMap`, with `&self` where
/// slotmap has `&mut self`.
///
/// - An entry is keyed by the handle's slot index and remembers the
///   handle's generation. A lookup resolves only for exactly that
///   generation, so a component stored for a removed entity is never
///   returned for the new entity in its slot.
/// - [`insert`](Self::insert) replaces the entry of the same or an older
///   generation, and is refused (returns `false`) for a generation older
///   than the entry's: the handle is stale.
/// - [`remove`](Self::remove) empties the entry; an empty entry accepts an
///   insert of any generation, as in slotmap.
///
/// ```
/// use handle_pool::{pin, Handle, SecondaryMap};
///
/// // Two handles of slot 7, as a pool hands them out when it reuses the
/// // slot of a removed entity for a new one.
/// let old = Handle::from_bits((1 << 32) | 7).unwrap();
/// let new = Handle::from_bits((2 << 32) | 7).unwrap();
///
/// let positions = SecondaryMap::new();
/// assert!(positions.insert(old, (1.0, 1.0)));
/// assert_eq!(positions.get_cloned(new), None); // never the old entity's
/// assert!(positions.insert(new, (2.0, 2.0))); // replaces the old entry
/// assert!(!positions.insert(old, (9.0, 9.0))); // older: refused
///
/// let guard = pin();
/// assert_eq!(positions.get(old, &guard), None);
/// assert_eq!(positions.get(new, &guard), Some(&(2.0, 2.0)));
/// ```
///
/// # Threads
///
/// Every method that takes `&self` may run on any thread at once with any
/// other. Racing inserts for one entry: the newer generation wins whatever
/// the order (the older is refused, or replaced); two inserts of the same
/// generation both succeed, one after the other, so one value stays and the
/// other is dropped as a replaced value is. A remove and an insert racing
/// on one entry take effect in one order or the other.
///
/// ```
/// use handle_pool::{HandlePool, SecondaryMap};
/// use std::thread;
///
/// let entities = HandlePool::new();
/// let health = SecondaryMap::new();
/// let all: Vec<_> = (0..100).map(|_| entities.insert(())).collect();
/// thread::scope(|s| {
///     for part in all.chunks(25) {
///         let health = &health;
///         s.spawn(move || {
///             for &e in part {
///                 health.insert(e, 100u32);
///             }
///         });
///     }
/// });
/// assert_eq!(health.len(), 100);
/// ```
///
/// # Guarantees
///
/// The pool's, value for value:
///
/// - **Lookups are wait-free** and write nothing: `get` is four loads in
///   the table, the last next to the value, under a guard; `with` and
///   `get_cloned` announce themselves as the pool's do; `contains` is loads
///   only.
/// - **Inserts and removes are lock-free**: a CAS on the entry, repeated
///   only when another operation's CAS on that entry succeeded; an insert
///   that finds its entry's room taken (by a value, or by a replaced one
///   still waiting for its readers) puts its value in the map's own value
///   pool instead, with that pool's progress.
/// - **A value is dropped exactly once**, after every reader that could
///   see it is gone: a value replaced or removed under `&self` becomes a
///   removed value of the map's value pool (a pool of its own; a value in
///   its entry's room, through a placeholder whose drop drops it), and is
///   dropped as a pool drops removed values (see the crate docs, "When
///   values are dropped"; [`flush`](Self::flush) forces it).
/// - **Storage never moves**: entries, with room for a value each, live in
///   a flat region and a sparse tree of 128-entry leaves, and the values
///   that did not fit in their rooms in the value pool's slots; all grow as
///   indices and values come, and nothing is reallocated, so a `&V` stays
///   valid while its guard lives.
/// - **Bad input** (forged handles, handles of another pool's index space)
///   gets `None`/`false`; a lookup or remove allocates nothing, and an
///   insert past the flat region's bound allocates at most one leaf (128
///   entries) and two nodes (6 KiB for `u64` values, 128 entries of `V`
///   and 4 KiB in general), below it commits the region up to its index
///   (at most 64 MiB of address space, or 128 entries where a `V` is so
///   large that fewer fit, taking memory only where written), never a
///   table up to `2^32` entries.
/// - **A panic in user code** (a value's `Drop`, `Clone`, a closure, a
///   handle type's `PoolHandle` methods, an iterator given to `extend`)
///   leaves the map consistent, with every value dropped exactly once.
///
/// `len` and the iterators promise what the pool's do: exact when no
/// operation is in flight; under concurrency, each item yielded was in the
/// map when its entry was visited.
///
/// # Names that differ from slotmap's
///
/// | slotmap | here | why |
/// |---|---|---|
/// | `insert(&mut, k, v) -> Option<V>` | [`insert`](Self::insert)`(&self, h, v) -> bool` | other threads may be reading the replaced value: it cannot be handed back, so `insert` says whether `v` was stored |
/// | `remove(&mut, k) -> Option<V>` | [`remove`](Self::remove)`(&self, h) -> bool`, [`take`](Self::take)`(&mut, h) -> Option<V>` | as [`HandlePool`](crate::HandlePool): a value removed under `&self` may be read still; under `&mut` it is handed back |
/// | `get(k)` | [`get`](Self::get)`(h, &guard)`, [`with`](Self::with), [`get_cloned`](Self::get_cloned) | a reference is protected by a guard, or lives for one call |
/// | `contains_key` | [`contains`](Self::contains) | the pool's name |
/// | `SecondaryMap::new()` for any key | [`new`](Self::new) for [`Handle`], [`with_handle_type`](Self::with_handle_type) for typed handles | as the pool: the default handle type needs no annotation |
///
/// There is no `Index` (a reference needs a guard) and no entry API (an
/// entry could change between looking and inserting).
///
/// # Typed handles
///
/// `H` is the primary pool's handle type, so a map keyed by entity handles
/// refuses texture handles at compile time:
///
/// ```
/// use handle_pool::{new_handle_type, HandlePool, SecondaryMap};
/// new_handle_type! { struct Entity; }
/// let entities: HandlePool<&str, Entity> = HandlePool::with_handle_type();
/// let names: SecondaryMap<String, Entity> = SecondaryMap::with_handle_type();
/// let e = entities.insert("player");
/// names.insert(e, String::from("Ada"));
/// assert_eq!(names.get_cloned(e).as_deref(), Some("Ada"));
/// ```
///
/// ```compile_fail,E0308
/// use handle_pool::{new_handle_type, HandlePool, SecondaryMap};
/// new_handle_type! { struct Entity; struct Texture; }
/// let textures: HandlePool<u32, Texture> = HandlePool::with_handle_type();
/// let names: SecondaryMap<String, Entity> = SecondaryMap::with_handle_type();
/// names.insert(textures.insert(1), String::new());
/// ```
///
/// # Cost
///
/// An entry is `size_of::<V>()` and an 8-byte word (16 bytes for `u64`
/// values, as `slotmap::SecondaryMap`'s slots): for the indices below a
/// bound (2^22 of them for `u64` values, up to 64 MiB of entries) in one
/// flat region committed up to the highest index used, past it in leaves
/// of 128 entries allocated where indices are used. A value in its entry's
/// room is read with the entry, one cache miss as in slotmap; a replacement
/// that comes while the room is taken (by the value it replaces, until
/// that one's readers are gone) puts its value in a slot of the value pool
/// instead, one more miss to read until the next replacement, and the size
/// of a pool slot besides.
///
/// A map is `Send` when `V: Send` and `Sync` when `V: Send + Sync`, as a
/// pool is:
///
/// ```compile_fail,E0277
/// fn assert_sync<X: Sync>(_: &X) {}
/// let map: handle_pool::SecondaryMap<std::cell::Cell<u32>> = handle_pool::SecondaryMap::new();
/// assert_sync(&map);
/// ```
pub struct SecondaryMap<V, H = Handle> {
    raw: RawSecondary<V>,
    _handle: PhantomData<fn(H) -> H>,
}

impl<V> SecondaryMap<V> {
    /// An empty map keyed by [`Handle`]s. Allocates no entry until the first
    /// insert.
    ///
    /// ```
    /// let map: handle_pool::SecondaryMap<u32> = handle_pool::SecondaryMap::new();
    /// assert!(map.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_handle_type()
    }

    /// An empty map with the entries of indices `0..capacity` allocated,
    /// each with room for a value.
    ///
    /// As for `Vec::with_capacity`, the memory is the caller's to ask for: a
    /// request the system cannot meet aborts the process.
    ///
    /// ```
    /// let map: handle_pool::SecondaryMap<u32> = handle_pool::SecondaryMap::with_capacity(1000);
    /// assert!(map.capacity() >= 1000);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_handle_type(capacity)
    }
}

impl<V, H: PoolHandle> SecondaryMap<V, H> {
    /// An empty map keyed by handles of type `H` (see
    /// [`new_handle_type!`](crate::new_handle_type)).
    ///
    /// ```
    /// use handle_pool::{new_handle_type, SecondaryMap};
    /// new_handle_type! { struct Entity; }
    /// let map: SecondaryMap<u32, Entity> = SecondaryMap::with_handle_type();
    /// assert!(map.is_empty());
    /// ```
    pub fn with_handle_type() -> Self {
        Self::from_raw(RawSecondary::new(crate::config::Config::default()))
    }

    /// [`with_capacity`](SecondaryMap::with_capacity) for handles of type `H`.
    ///
    /// ```
    /// use handle_pool::{new_handle_type, SecondaryMap};
    /// new_handle_type! { struct Entity; }
    /// let map: SecondaryMap<u32, Entity> = SecondaryMap::with_capacity_and_handle_type(10);
    /// assert!(map.capacity() >= 10);
    /// ```
    pub fn with_capacity_and_handle_type(capacity: usize) -> Self {
        let map = Self::with_handle_type();
        map.raw.reserve(capacity);
        map
    }

    /// A map whose value pool has these parameters (feature `testing`; not
    /// part of the stable API).
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn with_config(config: crate::config::Config) -> Self {
        Self::from_raw(RawSecondary::new(config))
    }

    /// Whether the value for `handle` is in its entry's room (`None` if
    /// there is none), for the loom models.
    #[cfg(all(test, handle_pool_loom))]
    pub(crate) fn is_in_its_room(&self, handle: H) -> Option<bool> {
        self.raw.is_in_its_room(handle.handle())
    }

    fn from_raw(raw: RawSecondary<V>) -> Self {
        SecondaryMap {
            raw,
            _handle: PhantomData,
        }
    }

    /// Stores `value` for `handle`, replacing the value of the same or an
    /// older generation; returns whether it was stored.
    ///
    /// `false` means the entry holds a newer generation than `handle`'s (the
    /// handle is stale), or `handle` is [`Handle::null()`]: `value` is
    /// dropped, as slotmap drops it. A value
    /// replaced is not returned, because other threads may still be reading
    /// it; it is dropped once no reader can see it, as a removed value is.
    /// Racing inserts for one entry: see "Threads" above.
    ///
    /// Lock-free. Allocates the table's leaf for the handle's index if it is
    /// the first there (at most one leaf and two nodes, whatever the index).
    ///
    /// # Panics
    /// If the map's value pool is full: 2^31 values live, awaiting
    /// reclamation or in retired slots at once (a guard held for good keeps
    /// every replaced value). `value` may be stored by then; the value it
    /// replaced is kept aside, never dropped while a reader may still see
    /// it, until [`clear`](Self::clear) or the map's drop.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let health = SecondaryMap::new();
    /// assert!(health.insert(e, 100));
    /// assert!(health.insert(e, 90)); // the same generation: replaced
    /// assert_eq!(health.get_cloned(e), Some(90));
    /// ```
    #[inline]
    pub fn insert(&self, handle: H, value: V) -> bool {
        self.raw.insert(handle.handle(), value)
    }

    /// Whether `handle` resolves: the map holds a value for exactly its
    /// generation.
    ///
    /// Wait-free and needs no guard: it only loads. A `true` orders the
    /// calling thread after the insert, as a `get` that finds the value
    /// does.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let tags = SecondaryMap::new();
    /// tags.insert(e, "hero");
    /// assert!(tags.contains(e));
    /// tags.remove(e);
    /// assert!(!tags.contains(e));
    /// ```
    #[inline]
    pub fn contains(&self, handle: H) -> bool {
        self.raw.contains(handle.handle())
    }

    /// The value for `handle`, if the map holds one for exactly its
    /// generation.
    ///
    /// Wait-free: loads only, no write to shared memory. The reference lives
    /// as long as both the borrow of the map and the guard; a value removed
    /// or replaced meanwhile is not dropped until the guard is.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let names = SecondaryMap::new();
    /// names.insert(e, String::from("Ada"));
    /// let guard = pin();
    /// let name = names.get(e, &guard).unwrap();
    /// names.remove(e); // gone for lookups, but `name` stays valid
    /// assert_eq!(name, "Ada");
    /// assert_eq!(names.get(e, &guard), None);
    /// ```
    ///
    /// The reference cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let names = SecondaryMap::new();
    /// names.insert(e, 1);
    /// let r = {
    ///     let guard = pin();
    ///     names.get(e, &guard).unwrap()
    /// };
    /// println!("{r}");
    /// ```
    ///
    /// nor its map:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let guard = pin();
    /// let r = {
    ///     let names = SecondaryMap::new();
    ///     names.insert(e, 1);
    ///     names.get(e, &guard).unwrap()
    /// };
    /// println!("{r}");
    /// ```
    #[inline]
    pub fn get<'g>(&'g self, handle: H, guard: &'g Guard) -> Option<&'g V> {
        self.raw.get(handle.handle(), guard)
    }

    /// Calls `f` with the value for `handle`.
    ///
    /// Wait-free, and cheaper than a pin: protected as the pool's
    /// [`with`](crate::HandlePool::with) is, by a word of the calling
    /// thread's own in the map's value pool, for the call. A value removed
    /// or replaced meanwhile is not dropped until `f` returns. Calls nest,
    /// and `f` may call any method of the map.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let paths = SecondaryMap::new();
    /// paths.insert(e, vec![(0, 0), (1, 0)]);
    /// assert_eq!(paths.with(e, |path| path.len()), Some(2));
    /// ```
    #[inline]
    pub fn with<R>(&self, handle: H, f: impl FnOnce(&V) -> R) -> Option<R> {
        self.raw.with(handle.handle(), f)
    }

    /// A clone of the value for `handle` (protected as in
    /// [`with`](Self::with)).
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let names = SecondaryMap::new();
    /// names.insert(e, String::from("Ada"));
    /// assert_eq!(names.get_cloned(e).as_deref(), Some("Ada"));
    /// ```
    #[inline]
    pub fn get_cloned(&self, handle: H) -> Option<V>
    where
        V: Clone,
    {
        self.with(handle, V::clone)
    }

    /// Removes the value for `handle`; `false` if the map held none for
    /// exactly its generation (or another thread removed or replaced it
    /// first).
    ///
    /// The handle no longer resolves from this moment on. The value is not
    /// returned, because other threads may still be reading it: it is
    /// dropped once no reader can see it (see the crate docs, "When values
    /// are dropped"). [`take`](Self::take), with `&mut self`, returns it.
    ///
    /// Lock-free: a CAS on the entry, again only if the entry's value was
    /// replaced for the same generation meanwhile.
    ///
    /// # Panics
    /// If the value was in its entry's room and the map's value pool, which
    /// retires it, is full (as for [`insert`](Self::insert)): the handle no
    /// longer resolves, and the value is kept aside, never dropped while a
    /// reader may still see it, until [`clear`](Self::clear) or the map's
    /// drop.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let tags = SecondaryMap::new();
    /// tags.insert(e, "hero");
    /// assert!(tags.remove(e));
    /// assert!(!tags.remove(e));
    /// ```
    #[inline]
    pub fn remove(&self, handle: H) -> bool {
        self.raw.remove(handle.handle())
    }

    /// Number of values in the map.
    ///
    /// Exact when no operation is in flight. Under concurrency it counts an
    /// insert's value a little before the insert returns, and a replaced
    /// value a little after, as the pool's `len` may lag behind or run
    /// ahead.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let tags = SecondaryMap::new();
    /// tags.insert(entities.insert(()), "a");
    /// assert_eq!(tags.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether [`len`](Self::len) is 0.
    ///
    /// ```
    /// let map: handle_pool::SecondaryMap<u8> = handle_pool::SecondaryMap::new();
    /// assert!(map.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of entries allocated: 128 per block of indices any insert
    /// used (or [`with_capacity`](SecondaryMap::with_capacity) asked for).
    ///
    /// ```
    /// use handle_pool::{Handle, SecondaryMap};
    /// let map = SecondaryMap::new();
    /// let far = Handle::from_bits((1 << 32) | 4_000_000_000).unwrap();
    /// map.insert(far, 1u8);
    /// assert_eq!(map.capacity(), 128);
    /// ```
    pub fn capacity(&self) -> usize {
        self.raw.capacity()
    }

    /// Drops every removed or replaced value that no reader can see now,
    /// as [`HandlePool::flush`](crate::HandlePool::flush) does for a pool.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let value = Arc::new(());
    /// let map = SecondaryMap::new();
    /// map.insert(e, Arc::clone(&value));
    /// map.remove(e);
    /// map.flush();
    /// assert_eq!(Arc::strong_count(&value), 1);
    /// ```
    pub fn flush(&self) {
        self.raw.flush();
    }

    /// Iterates over `(handle, &value)` for the values in the map, in index
    /// order.
    ///
    /// Under concurrency every item yielded was in the map at the moment
    /// its entry was visited; a value inserted or removed during the
    /// iteration may or may not be yielded. Each entry is visited once.
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let health = SecondaryMap::new();
    /// for hp in [10, 20] {
    ///     health.insert(entities.insert(()), hp);
    /// }
    /// let guard = pin();
    /// assert_eq!(health.iter(&guard).map(|(_, hp)| hp).sum::<i32>(), 30);
    /// ```
    ///
    /// An item cannot outlive its guard:
    ///
    /// ```compile_fail,E0597
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let health = SecondaryMap::new();
    /// health.insert(entities.insert(()), 10);
    /// let first = {
    ///     let guard = pin();
    ///     health.iter(&guard).next()
    /// };
    /// println!("{first:?}");
    /// ```
    pub fn iter<'g>(&'g self, guard: &'g Guard) -> Iter<'g, V, H> {
        let _ = guard;
        Iter::new(self.raw.occupied())
    }

    /// Iterates over the handles of the values in the map, with the
    /// guarantees of [`iter`](Self::iter).
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let tags = SecondaryMap::new();
    /// tags.insert(e, "hero");
    /// assert_eq!(tags.keys(&pin()).collect::<Vec<_>>(), [e]);
    /// ```
    pub fn keys<'g>(&'g self, guard: &'g Guard) -> Keys<'g, V, H> {
        Keys::new(self.iter(guard))
    }

    /// Iterates over `&value` for the values in the map, with the
    /// guarantees of [`iter`](Self::iter).
    ///
    /// ```
    /// use handle_pool::{pin, HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let health: SecondaryMap<u32> = (1..=4).map(|hp| (entities.insert(()), hp)).collect();
    /// assert_eq!(health.values(&pin()).sum::<u32>(), 10);
    /// ```
    pub fn values<'g>(&'g self, guard: &'g Guard) -> Values<'g, V, H> {
        Values::new(self.iter(guard))
    }

    /// The value for `handle`, mutably. Needs no guard.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let mut health = SecondaryMap::new();
    /// health.insert(e, 10);
    /// *health.get_mut(e).unwrap() -= 3;
    /// assert_eq!(health.get_cloned(e), Some(7));
    /// ```
    pub fn get_mut(&mut self, handle: H) -> Option<&mut V> {
        self.raw.get_mut(handle.handle())
    }

    /// Removes the value for `handle` and returns it (slotmap's `remove`).
    /// Needs no guard: `&mut self` proves no reader holds it.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let mut names = SecondaryMap::new();
    /// names.insert(e, String::from("Ada"));
    /// assert_eq!(names.take(e).as_deref(), Some("Ada"));
    /// assert_eq!(names.take(e), None);
    /// ```
    pub fn take(&mut self, handle: H) -> Option<V> {
        self.raw.take(handle.handle())
    }

    /// Iterates over `(handle, &mut value)`, in index order. Needs no guard.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let mut health = SecondaryMap::new();
    /// health.insert(e, 10);
    /// for (_, hp) in health.iter_mut() {
    ///     *hp *= 2;
    /// }
    /// assert_eq!(health.get_cloned(e), Some(20));
    /// ```
    pub fn iter_mut(&mut self) -> IterMut<'_, V, H> {
        IterMut::new(Exclusive::new(self.raw.occupied()))
    }

    /// Iterates over `&mut value`. Needs no guard.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let mut health: SecondaryMap<u32> = (0..4).map(|_| (entities.insert(()), 1)).collect();
    /// health.values_mut().for_each(|hp| *hp += 1);
    /// assert_eq!(health.values_mut().map(|hp| *hp).sum::<u32>(), 8);
    /// ```
    pub fn values_mut(&mut self) -> ValuesMut<'_, V, H> {
        ValuesMut::new(self.iter_mut())
    }

    /// Keeps only the values for which `keep` returns `true`; the others
    /// are dropped at once.
    ///
    /// # Panics
    /// If `keep` or a value's `Drop` panics, the map stays consistent: the
    /// values already visited are kept or removed as decided, the rest are
    /// kept.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let mut health: SecondaryMap<u32> = (0..10).map(|hp| (entities.insert(()), hp)).collect();
    /// health.retain(|_, hp| *hp >= 5);
    /// assert_eq!(health.len(), 5);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(H, &mut V) -> bool) {
        self.raw
            .retain(|handle, value| keep(H::from_handle(handle), value));
    }

    /// Removes every value; no old handle resolves afterwards. Values
    /// removed earlier and not reclaimed yet are dropped too. Keeps the
    /// allocated entries.
    ///
    /// # Panics
    /// If a value's `Drop` panics: after every value was dropped, with the
    /// first panic.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let mut tags = SecondaryMap::new();
    /// tags.insert(e, "hero");
    /// tags.clear();
    /// assert!(tags.is_empty() && !tags.contains(e));
    /// ```
    pub fn clear(&mut self) {
        self.raw.clear();
    }

    /// Removes every value, yielding `(handle, value)` pairs in index
    /// order. No old handle resolves once the iterator is dropped, whether
    /// or not it was consumed. Leaked instead (`mem::forget`), it leaves
    /// the values it had not yielded in the map, their handles resolving.
    ///
    /// # Panics
    /// When the iterator is dropped, if the `Drop` of a value it had not
    /// yielded panics: after every such value was dropped, with the first
    /// panic (as [`clear`](Self::clear)).
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let mut tags = SecondaryMap::new();
    /// tags.insert(e, "hero");
    /// assert_eq!(tags.drain().collect::<Vec<_>>(), [(e, "hero")]);
    /// assert!(tags.is_empty() && !tags.contains(e));
    /// ```
    pub fn drain(&mut self) -> Drain<'_, V, H> {
        Drain::new(self.raw.drained())
    }
}

impl<V, H: PoolHandle> Default for SecondaryMap<V, H> {
    fn default() -> Self {
        Self::with_handle_type()
    }
}

impl<V: Clone, H: PoolHandle> Clone for SecondaryMap<V, H> {
    /// A map with a clone of every value, for the same handles: each entry
    /// as it was when visited (under concurrency, as [`iter`](Self::iter)).
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let e = entities.insert(());
    /// let names = SecondaryMap::new();
    /// names.insert(e, String::from("Ada"));
    /// let copy = names.clone();
    /// names.remove(e);
    /// assert_eq!(copy.get_cloned(e).as_deref(), Some("Ada"));
    /// ```
    fn clone(&self) -> Self {
        let copy = Self::with_handle_type();
        let guard = pin();
        for (handle, found) in self.raw.occupied() {
            // SAFETY: the cursor loaded the word with Acquire under `guard`,
            // which lives until the value is cloned.
            let value: &V = unsafe { found.value_ref() };
            copy.raw.insert(handle, value.clone());
        }
        drop(guard);
        copy
    }
}

impl<V: fmt::Debug, H: PoolHandle> fmt::Debug for SecondaryMap<V, H> {
    /// The entries as a map from handle to value, in index order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = pin();
        f.debug_map().entries(self.iter(&guard)).finish()
    }
}

impl<V, H: PoolHandle> Extend<(H, V)> for SecondaryMap<V, H> {
    /// Inserts every pair, as [`insert`](SecondaryMap::insert): a pair whose
    /// handle is older than its entry's is refused, its value dropped.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let mut tags = SecondaryMap::new();
    /// tags.extend([(entities.insert(()), "a"), (entities.insert(()), "b")]);
    /// assert_eq!(tags.len(), 2);
    /// ```
    fn extend<I: IntoIterator<Item = (H, V)>>(&mut self, pairs: I) {
        for (handle, value) in pairs {
            self.insert(handle, value);
        }
    }
}

impl<V, H: PoolHandle> FromIterator<(H, V)> for SecondaryMap<V, H> {
    /// A map holding the pairs, inserted in order as by `extend`.
    ///
    /// ```
    /// use handle_pool::{HandlePool, SecondaryMap};
    /// let entities = HandlePool::new();
    /// let tags: SecondaryMap<&str> = [(entities.insert(()), "a")].into_iter().collect();
    /// assert_eq!(tags.len(), 1);
    /// ```
    fn from_iter<I: IntoIterator<Item = (H, V)>>(pairs: I) -> Self {
        let mut map = Self::with_handle_type();
        map.extend(pairs);
        map
    }
}
