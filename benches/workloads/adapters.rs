//! One adapter per competitor, all behind [`Pool`] and [`Session`].
//!
//! Every adapter stores the same `u64` payload and does the same work per
//! operation: one lookup copies the value out, one insert stores one value,
//! one remove removes (or marks for removal) one value. Keys travel between
//! threads as `u64` bits (the `mixed` workload's shared array).

use std::sync::atomic::{AtomicU64, Ordering};

use handle_pool::{Guard, Handle, HandlePool, Reader};
use slotmap::{DefaultKey, Key as _, KeyData, SlotMap};

/// A concurrent (or, for the baseline, single-threaded) pool of `u64` values.
pub trait Pool: Sync + Sized {
    /// Row label in reports and bench ids.
    const NAME: &'static str;
    /// Whether only one thread may use the pool (the unsynchronised baseline).
    const SINGLE_THREAD: bool = false;
    /// Whether this is one of the `handle_pool` rows (for the headline ratios).
    const IS_HANDLE_POOL: bool = false;

    /// The key an insert returns.
    type Key: Copy + Send + Sync;
    /// A per-thread accessor; it may hold a pinned guard.
    type Session<'a>: Session<Key = Self::Key>
    where
        Self: 'a;

    /// An empty pool. `max_inserts` bounds the inserts the run will make; only
    /// concurrent-slotmap, whose capacity is fixed at construction, uses it.
    fn create(max_inserts: usize) -> Self;
    /// Runs `f` with a session on the calling thread.
    fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R;
    /// Slots (or entries) allocated, if the pool exposes it.
    fn capacity(&self) -> Option<usize>;
    /// The key as bits, to share it through an `AtomicU64`.
    fn key_to_bits(key: Self::Key) -> u64;
    /// The key back from [`key_to_bits`](Self::key_to_bits).
    fn key_from_bits(bits: u64) -> Self::Key;
}

/// The operations every workload is made of.
pub trait Session {
    /// The pool's key type.
    type Key: Copy;
    /// Inserts a value and returns its key.
    fn insert(&mut self, value: u64) -> Self::Key;
    /// Removes the value; `false` if it was not there.
    fn remove(&mut self, key: Self::Key) -> bool;
    /// A copy of the value, if present.
    fn get(&mut self, key: Self::Key) -> Option<u64>;
    /// Whether the key is present: the pool's own test where it has one
    /// (this default, a [`get`](Self::get), where it has not).
    #[inline]
    fn contains(&mut self, key: Self::Key) -> bool {
        self.get(key).is_some()
    }
    /// Called by every workload's timed loop after each [`REPIN_EVERY`]
    /// operations of a thread (untimed set-up, such as a prefill, does not
    /// call it): a session that holds a guard re-pins here, as a worker
    /// thread does between batches of jobs, so that reclamation can advance.
    #[inline]
    fn quiesce(&mut self) {}
}

/// Calls `visit::<P>()` for every pool, in report order.
pub trait PoolVisitor {
    /// Visits one pool type.
    fn visit<P: Pool>(&mut self);
}

/// Visits every pool type, `handle_pool` rows first.
pub fn for_each_pool(v: &mut impl PoolVisitor) {
    v.visit::<HandlePoolCall>();
    v.visit::<HandlePoolGuard>();
    v.visit::<HandlePoolReader>();
    v.visit::<StdMutexSlotMap>();
    v.visit::<ParkingLotMutexSlotMap>();
    v.visit::<ParkingLotRwLockSlotMap>();
    v.visit::<ShardedSlab>();
    v.visit::<ConcurrentSlotMap>();
    v.visit::<ConcurrentSlotMapGuard>();
    v.visit::<DashMapCounter>();
    v.visit::<UnsyncSlotMap>();
}

/// How many operations of a timed loop a guard-holding session does between
/// re-pins ([`Session::quiesce`]).
pub const REPIN_EVERY: u64 = 256;

// ---------------------------------------------------------------- handle_pool

fn handle_from_bits(bits: u64) -> Handle {
    Handle::from_bits(bits).expect("bench keys are valid handles")
}

/// Implements [`Pool`] for a `handle_pool` adapter: `$pool` wraps a
/// `HandlePool<u64>`, and `|$p| $session` makes a session from it.
macro_rules! handle_pool_adapter {
    ($pool:ident, $session:ident, $name:expr, |$p:ident| $make:expr) => {
        impl Pool for $pool {
            const NAME: &'static str = $name;
            const IS_HANDLE_POOL: bool = true;
            type Key = Handle;
            type Session<'a> = $session<'a>;

            fn create(_: usize) -> Self {
                $pool(HandlePool::new())
            }
            fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
                let $p = &self.0;
                f(&mut $make)
            }
            fn capacity(&self) -> Option<usize> {
                Some(self.0.capacity())
            }
            fn key_to_bits(key: Handle) -> u64 {
                key.to_bits()
            }
            fn key_from_bits(bits: u64) -> Handle {
                handle_from_bits(bits)
            }
        }
    };
}

/// `HandlePool` through the one-call API: `get_cloned` pins per call.
pub struct HandlePoolCall(HandlePool<u64>);

/// Session of [`HandlePoolCall`].
pub struct HandlePoolCallSession<'a>(&'a HandlePool<u64>);

handle_pool_adapter!(
    HandlePoolCall,
    HandlePoolCallSession,
    "handle_pool (one-call)",
    |pool| HandlePoolCallSession(pool)
);

impl Session for HandlePoolCallSession<'_> {
    type Key = Handle;
    #[inline]
    fn insert(&mut self, value: u64) -> Handle {
        self.0.insert(value)
    }
    #[inline]
    fn remove(&mut self, key: Handle) -> bool {
        self.0.remove(key)
    }
    #[inline]
    fn get(&mut self, key: Handle) -> Option<u64> {
        self.0.get_cloned(key)
    }
    #[inline]
    fn contains(&mut self, key: Handle) -> bool {
        self.0.contains(key)
    }
}

/// `HandlePool` with a guard held across operations, re-pinned every
/// [`REPIN_EVERY`] operations ([`Session::quiesce`]): the intended hot-loop
/// use.
pub struct HandlePoolGuard(HandlePool<u64>);

/// Session of [`HandlePoolGuard`].
pub struct HandlePoolGuardSession<'a> {
    pool: &'a HandlePool<u64>,
    // Apart from the pool reference, as a user's loop keeps the two in
    // separate locals: a re-pin is a call that takes the guard's address,
    // and with the guard inline that address was the session's, so the pool
    // reference went to memory and was reloaded before every lookup (one
    // more load per lookup: `docs/perf/0031`). `get` never reads through the
    // guard, so the box costs nothing per operation. concurrent-slotmap's
    // session keeps its guard inline: its re-pin is inlined, its `get`
    // reads the guard, and boxed it measured slower (`docs/perf/0029`).
    guard: Box<Guard>,
}

handle_pool_adapter!(
    HandlePoolGuard,
    HandlePoolGuardSession,
    "handle_pool (guard held)",
    |pool| HandlePoolGuardSession {
        pool,
        guard: Box::new(handle_pool::pin()),
    }
);

impl Session for HandlePoolGuardSession<'_> {
    type Key = Handle;
    #[inline]
    fn insert(&mut self, value: u64) -> Handle {
        self.pool.insert(value)
    }
    #[inline]
    fn remove(&mut self, key: Handle) -> bool {
        self.pool.remove(key)
    }
    #[inline]
    fn get(&mut self, key: Handle) -> Option<u64> {
        self.pool.get(key, &self.guard).copied()
    }
    #[inline]
    fn contains(&mut self, key: Handle) -> bool {
        self.pool.contains(key)
    }
    #[inline]
    fn quiesce(&mut self) {
        self.guard.repin();
    }
}

/// `HandlePool` looked up through a [`Reader`] held across operations and
/// re-pinned every [`REPIN_EVERY`] operations, as [`HandlePoolGuard`]'s
/// guard: lookups read the pool's storage as of the last re-pin instead of
/// per lookup. Inserts and removes go to the pool.
pub struct HandlePoolReader(HandlePool<u64>);

/// Session of [`HandlePoolReader`].
pub struct HandlePoolReaderSession<'a> {
    pool: &'a HandlePool<u64>,
    reader: Reader<'a, u64>,
}

handle_pool_adapter!(
    HandlePoolReader,
    HandlePoolReaderSession,
    "handle_pool (reader)",
    |pool| HandlePoolReaderSession {
        pool,
        reader: pool.reader(),
    }
);

impl Session for HandlePoolReaderSession<'_> {
    type Key = Handle;
    #[inline]
    fn insert(&mut self, value: u64) -> Handle {
        self.pool.insert(value)
    }
    #[inline]
    fn remove(&mut self, key: Handle) -> bool {
        self.pool.remove(key)
    }
    #[inline]
    fn get(&mut self, key: Handle) -> Option<u64> {
        self.reader.get(key).copied()
    }
    #[inline]
    fn contains(&mut self, key: Handle) -> bool {
        self.reader.contains(key)
    }
    #[inline]
    fn quiesce(&mut self) {
        self.reader.repin();
    }
}

// ---------------------------------------------------------------- slotmap

fn slotmap_key_to_bits(key: DefaultKey) -> u64 {
    key.data().as_ffi()
}

fn slotmap_key_from_bits(bits: u64) -> DefaultKey {
    KeyData::from_ffi(bits).into()
}

/// Implements [`Pool`] for a lock around a `SlotMap`: `$read` locks for
/// lookups, `$write` for inserts and removes.
macro_rules! locked_slotmap {
    ($pool:ident, $session:ident, $name:expr, $lock:ty, $new:expr, |$l:ident| $read:expr, $write:expr) => {
        #[doc = concat!("`", $name, "`.")]
        pub struct $pool($lock);

        #[doc = concat!("Session of [`", stringify!($pool), "`].")]
        pub struct $session<'a>(&'a $lock);

        impl Pool for $pool {
            const NAME: &'static str = $name;
            type Key = DefaultKey;
            type Session<'a> = $session<'a>;

            fn create(_: usize) -> Self {
                $pool($new)
            }
            fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
                f(&mut $session(&self.0))
            }
            fn capacity(&self) -> Option<usize> {
                let $l = &self.0;
                Some($read.capacity())
            }
            fn key_to_bits(key: DefaultKey) -> u64 {
                slotmap_key_to_bits(key)
            }
            fn key_from_bits(bits: u64) -> DefaultKey {
                slotmap_key_from_bits(bits)
            }
        }

        impl Session for $session<'_> {
            type Key = DefaultKey;
            #[inline]
            fn insert(&mut self, value: u64) -> DefaultKey {
                let $l = self.0;
                $write.insert(value)
            }
            #[inline]
            fn remove(&mut self, key: DefaultKey) -> bool {
                let $l = self.0;
                $write.remove(key).is_some()
            }
            #[inline]
            fn get(&mut self, key: DefaultKey) -> Option<u64> {
                let $l = self.0;
                $read.get(key).copied()
            }
            #[inline]
            fn contains(&mut self, key: DefaultKey) -> bool {
                let $l = self.0;
                $read.contains_key(key)
            }
        }
    };
}

locked_slotmap!(
    StdMutexSlotMap,
    StdMutexSession,
    "std Mutex<SlotMap>",
    std::sync::Mutex<SlotMap<DefaultKey, u64>>,
    std::sync::Mutex::new(SlotMap::new()),
    |l| l.lock().unwrap(),
    l.lock().unwrap()
);

locked_slotmap!(
    ParkingLotMutexSlotMap,
    ParkingLotMutexSession,
    "parking_lot Mutex<SlotMap>",
    parking_lot::Mutex<SlotMap<DefaultKey, u64>>,
    parking_lot::Mutex::new(SlotMap::new()),
    |l| l.lock(),
    l.lock()
);

locked_slotmap!(
    ParkingLotRwLockSlotMap,
    ParkingLotRwLockSession,
    "parking_lot RwLock<SlotMap>",
    parking_lot::RwLock<SlotMap<DefaultKey, u64>>,
    parking_lot::RwLock::new(SlotMap::new()),
    |l| l.read(),
    l.write()
);

/// Unsynchronised `SlotMap`, one thread only: the no-synchronisation limit.
///
/// The mutex is locked once per session (per thread and round), never per
/// operation: the session works on the plain `&mut SlotMap`.
pub struct UnsyncSlotMap(std::sync::Mutex<SlotMap<DefaultKey, u64>>);

/// Session of [`UnsyncSlotMap`].
pub struct UnsyncSession<'a>(&'a mut SlotMap<DefaultKey, u64>);

impl Pool for UnsyncSlotMap {
    const NAME: &'static str = "SlotMap (unsynchronised, 1 thread)";
    const SINGLE_THREAD: bool = true;
    type Key = DefaultKey;
    type Session<'a> = UnsyncSession<'a>;

    fn create(_: usize) -> Self {
        UnsyncSlotMap(std::sync::Mutex::new(SlotMap::new()))
    }
    fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
        let mut map = self
            .0
            .try_lock()
            .expect("the unsynchronised SlotMap is used by one thread at a time");
        f(&mut UnsyncSession(&mut map))
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.0.lock().unwrap().capacity())
    }
    fn key_to_bits(key: DefaultKey) -> u64 {
        slotmap_key_to_bits(key)
    }
    fn key_from_bits(bits: u64) -> DefaultKey {
        slotmap_key_from_bits(bits)
    }
}

impl Session for UnsyncSession<'_> {
    type Key = DefaultKey;
    #[inline]
    fn insert(&mut self, value: u64) -> DefaultKey {
        self.0.insert(value)
    }
    #[inline]
    fn remove(&mut self, key: DefaultKey) -> bool {
        self.0.remove(key).is_some()
    }
    #[inline]
    fn get(&mut self, key: DefaultKey) -> Option<u64> {
        self.0.get(key).copied()
    }
    #[inline]
    fn contains(&mut self, key: DefaultKey) -> bool {
        self.0.contains_key(key)
    }
}

// ---------------------------------------------------------------- sharded-slab

/// `sharded_slab::Slab` (default config). It exposes no capacity.
pub struct ShardedSlab(sharded_slab::Slab<u64>);

/// Session of [`ShardedSlab`].
pub struct ShardedSlabSession<'a>(&'a sharded_slab::Slab<u64>);

impl Pool for ShardedSlab {
    const NAME: &'static str = "sharded-slab";
    type Key = usize;
    type Session<'a> = ShardedSlabSession<'a>;

    fn create(_: usize) -> Self {
        ShardedSlab(sharded_slab::Slab::new())
    }
    fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
        f(&mut ShardedSlabSession(&self.0))
    }
    fn capacity(&self) -> Option<usize> {
        None
    }
    fn key_to_bits(key: usize) -> u64 {
        key as u64
    }
    fn key_from_bits(bits: u64) -> usize {
        bits as usize
    }
}

impl Session for ShardedSlabSession<'_> {
    type Key = usize;
    #[inline]
    fn insert(&mut self, value: u64) -> usize {
        self.0.insert(value).expect("sharded-slab shard full")
    }
    #[inline]
    fn remove(&mut self, key: usize) -> bool {
        self.0.remove(key)
    }
    #[inline]
    fn get(&mut self, key: usize) -> Option<u64> {
        self.0.get(key).map(|entry| *entry)
    }
    #[inline]
    fn contains(&mut self, key: usize) -> bool {
        self.0.contains(key)
    }
}

// ---------------------------------------------------------------- concurrent-slotmap

type CsMap = concurrent_slotmap::SlotMap<concurrent_slotmap::SlotId, u64>;
type CsKey = concurrent_slotmap::SlotId;

fn cs_new(max_inserts: usize) -> CsMap {
    // Its capacity is fixed at construction (a virtual-memory reservation
    // committed as it grows). Slots it has not reused yet count against it, so
    // leave room for every insert the run makes.
    let max = (max_inserts.max(1024) as u64 * 2).min(u32::MAX as u64 / 2) as u32;
    CsMap::new(max)
}

fn cs_key_to_bits(key: CsKey) -> u64 {
    ((key.generation() as u64) << 32) | key.index() as u64
}

fn cs_key_from_bits(bits: u64) -> CsKey {
    CsKey::new(bits as u32, (bits >> 32) as u32)
}

/// vulkano's `concurrent_slotmap::SlotMap`, pinning per call (its one-call use).
/// Capacity is its committed slot count.
pub struct ConcurrentSlotMap(CsMap);

/// Session of [`ConcurrentSlotMap`].
pub struct ConcurrentSlotMapSession<'a>(&'a CsMap);

impl Pool for ConcurrentSlotMap {
    const NAME: &'static str = "concurrent-slotmap (pin per call)";
    type Key = CsKey;
    type Session<'a> = ConcurrentSlotMapSession<'a>;

    fn create(max_inserts: usize) -> Self {
        ConcurrentSlotMap(cs_new(max_inserts))
    }
    fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
        f(&mut ConcurrentSlotMapSession(&self.0))
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.0.capacity() as usize)
    }
    fn key_to_bits(key: CsKey) -> u64 {
        cs_key_to_bits(key)
    }
    fn key_from_bits(bits: u64) -> CsKey {
        cs_key_from_bits(bits)
    }
}

impl Session for ConcurrentSlotMapSession<'_> {
    type Key = CsKey;
    #[inline]
    fn insert(&mut self, value: u64) -> CsKey {
        self.0.insert(value, &self.0.pin())
    }
    #[inline]
    fn remove(&mut self, key: CsKey) -> bool {
        self.0.remove(key, &self.0.pin()).is_some()
    }
    #[inline]
    fn get(&mut self, key: CsKey) -> Option<u64> {
        self.0.get(key, &self.0.pin()).copied()
    }
}

/// concurrent-slotmap with a guard held and re-pinned every [`REPIN_EVERY`]
/// operations, like [`HandlePoolGuard`].
pub struct ConcurrentSlotMapGuard(CsMap);

/// Session of [`ConcurrentSlotMapGuard`].
pub struct ConcurrentSlotMapGuardSession<'a> {
    map: &'a CsMap,
    // An `Option` so the old guard is dropped before the new one is pinned:
    // pinning while a guard exists only nests and never unpins.
    guard: Option<concurrent_slotmap::hyaline::Guard<'a>>,
}

impl<'a> ConcurrentSlotMapGuardSession<'a> {
    #[inline]
    fn guard(&self) -> &concurrent_slotmap::hyaline::Guard<'a> {
        self.guard.as_ref().expect("pinned")
    }
}

impl Pool for ConcurrentSlotMapGuard {
    const NAME: &'static str = "concurrent-slotmap (guard held)";
    type Key = CsKey;
    type Session<'a> = ConcurrentSlotMapGuardSession<'a>;

    fn create(max_inserts: usize) -> Self {
        ConcurrentSlotMapGuard(cs_new(max_inserts))
    }
    fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
        f(&mut ConcurrentSlotMapGuardSession {
            map: &self.0,
            guard: Some(self.0.pin()),
        })
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.0.capacity() as usize)
    }
    fn key_to_bits(key: CsKey) -> u64 {
        cs_key_to_bits(key)
    }
    fn key_from_bits(bits: u64) -> CsKey {
        cs_key_from_bits(bits)
    }
}

impl Session for ConcurrentSlotMapGuardSession<'_> {
    type Key = CsKey;
    #[inline]
    fn insert(&mut self, value: u64) -> CsKey {
        self.map.insert(value, self.guard())
    }
    #[inline]
    fn remove(&mut self, key: CsKey) -> bool {
        self.map.remove(key, self.guard()).is_some()
    }
    #[inline]
    fn get(&mut self, key: CsKey) -> Option<u64> {
        self.map.get(key, self.guard()).copied()
    }
    #[inline]
    fn quiesce(&mut self) {
        self.guard = None;
        self.guard = Some(self.map.pin());
    }
}

// ---------------------------------------------------------------- dashmap

/// `DashMap<u64, u64>` with keys from an `AtomicU64` counter.
pub struct DashMapCounter {
    map: dashmap::DashMap<u64, u64>,
    next: AtomicU64,
}

/// Session of [`DashMapCounter`].
pub struct DashMapSession<'a>(&'a DashMapCounter);

impl Pool for DashMapCounter {
    const NAME: &'static str = "DashMap<u64, _> + AtomicU64 keys";
    type Key = u64;
    type Session<'a> = DashMapSession<'a>;

    fn create(_: usize) -> Self {
        DashMapCounter {
            map: dashmap::DashMap::new(),
            next: AtomicU64::new(0),
        }
    }
    fn session<R>(&self, f: impl FnOnce(&mut Self::Session<'_>) -> R) -> R {
        f(&mut DashMapSession(self))
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.map.capacity())
    }
    fn key_to_bits(key: u64) -> u64 {
        key
    }
    fn key_from_bits(bits: u64) -> u64 {
        bits
    }
}

impl Session for DashMapSession<'_> {
    type Key = u64;
    #[inline]
    fn insert(&mut self, value: u64) -> u64 {
        let key = self.0.next.fetch_add(1, Ordering::Relaxed);
        self.0.map.insert(key, value);
        key
    }
    #[inline]
    fn remove(&mut self, key: u64) -> bool {
        self.0.map.remove(&key).is_some()
    }
    #[inline]
    fn get(&mut self, key: u64) -> Option<u64> {
        self.0.map.get(&key).map(|value| *value)
    }
    #[inline]
    fn contains(&mut self, key: u64) -> bool {
        self.0.map.contains_key(&key)
    }
}
