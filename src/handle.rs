//! Handles: a 32-bit slot index and a 32-bit generation packed into one `u64`.
//!
//! Bits 0..32 hold the index and bits 32..64 the generation. Generations start
//! at 1, so no handle is ever all zeroes and `Option<Handle>` is 8 bytes.
//! Valid indices are `0..=MAX_INDEX` (`u32::MAX` ends the free lists inside the
//! pool) and valid generations are `1..=MAX_GENERATION` (the slot word spends
//! two of its 32 generation bits on the slot state; see `slot`).
//!
//! The null handle is index `u32::MAX`, generation `MAX_GENERATION`: no
//! pool ever resolves it, since no slot has index `u32::MAX` (indices stop
//! at `MAX_INDEX`, and `u32::MAX` ends the free lists), so no slot word
//! equals its bits (an `OCCUPIED` word is a handle's bits, whose index is
//! the slot's own); and its generation is that of a retired slot, in range,
//! so code that checks a handle's generation meets nothing new.

use core::fmt;
use core::hash::Hash;
use core::num::NonZeroU64;

/// The largest slot index a handle can carry (`u32::MAX` ends the free lists).
///
/// ```
/// use handle_pool::{Handle, MAX_INDEX};
/// assert!(Handle::from_bits((1 << 32) | MAX_INDEX as u64).is_some());
/// assert!(Handle::from_bits((1 << 32) | u32::MAX as u64).is_none());
/// // Past it, only the null handle's bits are a handle:
/// let null = Handle::null().to_bits();
/// assert_eq!(null as u32, u32::MAX);
/// assert!(Handle::from_bits(null).unwrap().is_null());
/// ```
pub const MAX_INDEX: u32 = u32::MAX - 1;

/// The largest generation a handle can carry. A slot whose occupant had this
/// generation is retired for good when that occupant is removed.
///
/// ```
/// use handle_pool::{Handle, MAX_GENERATION};
/// assert!(Handle::from_bits((MAX_GENERATION as u64) << 32).is_some());
/// assert!(Handle::from_bits((MAX_GENERATION as u64 + 1) << 32).is_none());
/// ```
pub const MAX_GENERATION: u32 = (1 << 30) - 1;

const INDEX_BITS: u32 = 32;

/// The null handle's bits: index `u32::MAX`, generation `MAX_GENERATION`.
const NULL_BITS: u64 = ((MAX_GENERATION as u64) << INDEX_BITS) | u32::MAX as u64;

/// A handle to a value in a [`HandlePool`](crate::HandlePool): slot index and generation.
///
/// Handles are `Copy`, 8 bytes (also inside an `Option`) and never dangle: once
/// the value is removed, the handle is stale for good and every lookup with it
/// returns `None`, even after the slot is reused.
///
/// ```
/// use handle_pool::{Handle, HandlePool};
///
/// let pool = HandlePool::new();
/// let h: Handle = pool.insert("value");
/// assert_eq!(Handle::from_bits(h.to_bits()), Some(h));
/// assert_eq!(std::mem::size_of::<Option<Handle>>(), 8);
/// assert_eq!(format!("{h:?}"), "Handle(0v1)"); // index 0, generation 1
/// ```
///
/// [`Handle::null()`] (also `Handle::default()`) is a handle that no pool
/// ever resolves, for a field that has no value to refer to yet.
///
/// A handle does not know its pool. Given to another pool with the same
/// handle type, it finds whatever that pool holds in the same slot under the
/// same generation, as a slotmap key does in another `SlotMap`; it is
/// checked like any other handle, so this is a logic error, never undefined
/// behaviour. Distinct handle types made with
/// [`new_handle_type!`](crate::new_handle_type) keep pools of different
/// kinds apart at compile time:
///
/// ```
/// use handle_pool::HandlePool;
///
/// let a = HandlePool::new();
/// let b = HandlePool::new();
/// let ha = a.insert("in a");
/// b.insert("in b");
/// assert_eq!(b.get_cloned(ha), Some("in b")); // same index, same generation
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Handle(NonZeroU64);

impl Handle {
    /// Packs an index and a generation. Both must be in range.
    #[inline]
    pub(crate) const fn new(index: u32, generation: u32) -> Self {
        debug_assert!(index <= MAX_INDEX && generation >= 1 && generation <= MAX_GENERATION);
        let bits = ((generation as u64) << INDEX_BITS) | index as u64;
        match NonZeroU64::new(bits) {
            Some(bits) => Handle(bits),
            None => panic!("a handle's generation is never zero"),
        }
    }

    /// The null handle: a handle no pool ever resolves (every lookup finds
    /// nothing, every removal removes nothing), for a field that refers to
    /// nothing yet. The same as `Handle::default()`.
    ///
    /// Its index is `u32::MAX`, which no slot has (indices stop at
    /// [`MAX_INDEX`]); its generation is [`MAX_GENERATION`].
    ///
    /// ```
    /// use handle_pool::{Handle, HandlePool};
    ///
    /// let pool = HandlePool::new();
    /// pool.insert("value");
    /// let nothing = Handle::null();
    /// assert!(nothing.is_null() && !pool.contains(nothing));
    /// assert!(!pool.remove(nothing));
    /// assert_eq!(Handle::default(), nothing);
    /// assert_eq!(Handle::from_bits(nothing.to_bits()), Some(nothing));
    /// assert_eq!(format!("{nothing:?}"), "Handle(null)");
    /// ```
    #[inline]
    pub const fn null() -> Self {
        match NonZeroU64::new(NULL_BITS) {
            Some(bits) => Handle(bits),
            None => panic!("the null handle's bits are not zero"),
        }
    }

    /// Whether this is the [null](Self::null) handle.
    ///
    /// ```
    /// use handle_pool::{Handle, HandlePool};
    /// let pool = HandlePool::new();
    /// assert!(!pool.insert(1).is_null());
    /// assert!(Handle::null().is_null());
    /// ```
    #[inline]
    pub const fn is_null(self) -> bool {
        self.0.get() == NULL_BITS
    }

    /// The slot index (`u32::MAX` for the [null](Self::null) handle).
    ///
    /// ```
    /// # use handle_pool::HandlePool;
    /// let pool = HandlePool::new();
    /// let h = pool.insert(1);
    /// assert!(h.index() <= handle_pool::MAX_INDEX);
    /// ```
    #[inline]
    pub const fn index(self) -> u32 {
        self.0.get() as u32
    }

    /// The generation: how many times the slot had been filled when this
    /// handle was made (starting at 1; [`MAX_GENERATION`] for the
    /// [null](Self::null) handle).
    ///
    /// ```
    /// # use handle_pool::HandlePool;
    /// let pool = HandlePool::new();
    /// assert_eq!(pool.insert(1).generation(), 1);
    /// ```
    #[inline]
    pub const fn generation(self) -> u32 {
        (self.0.get() >> INDEX_BITS) as u32
    }

    /// The handle as a `u64`, for FFI, serialisation or hashing elsewhere.
    ///
    /// ```
    /// # use handle_pool::{Handle, HandlePool};
    /// let pool = HandlePool::new();
    /// let h = pool.insert(1);
    /// assert_eq!(Handle::from_bits(h.to_bits()), Some(h));
    /// ```
    #[inline]
    pub const fn to_bits(self) -> u64 {
        self.0.get()
    }

    /// The handle with these bits: one an insert could produce, or the
    /// [null](Self::null) handle (whose bits a program may have stored);
    /// `None` for any other bits (generation 0 or above
    /// [`MAX_GENERATION`], index above [`MAX_INDEX`] but the null
    /// handle's). When it returns
    /// `Some(h)`, `h.to_bits() == bits`.
    ///
    /// A handle made from bits is checked by every pool operation like any
    /// other: a forged one simply finds nothing.
    ///
    /// ```
    /// use handle_pool::Handle;
    /// assert_eq!(Handle::from_bits(0), None);
    /// assert_eq!(Handle::from_bits(u64::MAX), None);
    /// let h = Handle::from_bits((1 << 32) | 7).unwrap();
    /// assert_eq!((h.index(), h.generation()), (7, 1));
    /// ```
    #[inline]
    pub const fn from_bits(bits: u64) -> Option<Self> {
        if bits == NULL_BITS {
            return Some(Self::null());
        }
        let index = bits as u32;
        let generation = (bits >> INDEX_BITS) as u32;
        if index > MAX_INDEX || generation == 0 || generation > MAX_GENERATION {
            return None;
        }
        Some(Self::new(index, generation))
    }

    /// Writes the handle as every handle type's `Debug` does: `Name(IvG)`
    /// for index `I` and generation `G`, or `Name(null)`. For
    /// [`new_handle_type!`](crate::new_handle_type); not part of the API.
    #[doc(hidden)]
    pub fn __debug_as(self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            write!(f, "{name}(null)")
        } else {
            write!(f, "{name}({}v{})", self.index(), self.generation())
        }
    }
}

/// The [null](Handle::null) handle.
impl Default for Handle {
    #[inline]
    fn default() -> Self {
        Self::null()
    }
}

/// `Handle(IvG)`: index `I`, generation `G` (`Handle(null)` for the null
/// handle); typed handles print the same with their own name.
impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.__debug_as("Handle", f)
    }
}

/// Handles order by slot index, then by generation.
impl Ord for Handle {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.index(), self.generation()).cmp(&(other.index(), other.generation()))
    }
}

impl PartialOrd for Handle {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A handle type a [`HandlePool`](crate::HandlePool) can hand out: [`Handle`]
/// itself, or a distinct type made with [`new_handle_type!`](crate::new_handle_type).
///
/// The trait is safe to implement, and the pool stays sound against any
/// implementation, however it behaves:
///
/// - every operation calls [`handle`](Self::handle) once per handle it is
///   given and acts on that answer alone, checking it like any other
///   handle: bits that name no live value find nothing, and a second call
///   that would answer differently is never made;
/// - [`from_handle`](Self::from_handle) only makes what the pool hands out;
///   the pool never converts its result back, so a type that does not
///   round-trip gets handles that find nothing, not another value;
/// - either method may panic: the operation stops where it was, with no
///   slot lost, the length exact and every value dropped exactly once.
///
/// Types made with [`new_handle_type!`](crate::new_handle_type) round-trip
/// exactly, as a handle type should.
///
/// ```
/// use handle_pool::{Handle, PoolHandle};
/// let h = Handle::from_bits((3 << 32) | 9).unwrap();
/// assert_eq!(<Handle as PoolHandle>::from_handle(h).handle(), h);
/// ```
pub trait PoolHandle: Copy + Eq + Ord + Hash + fmt::Debug {
    /// Wraps a raw handle.
    fn from_handle(handle: Handle) -> Self;
    /// The raw handle inside.
    fn handle(self) -> Handle;
}

impl PoolHandle for Handle {
    #[inline]
    fn from_handle(handle: Handle) -> Self {
        handle
    }
    #[inline]
    fn handle(self) -> Handle {
        self
    }
}

/// Declares handle types distinct from [`Handle`] and from each other, so a
/// handle of one pool cannot be passed to a pool of another kind by mistake.
///
/// Each type is a `Copy` newtype over [`Handle`] with the same size, niche,
/// ordering and methods: `index`, `generation`, `to_bits`, `from_bits`,
/// `null`, `is_null`, `Default` (the null handle), and a `Debug` that
/// prints `Name(IvG)` as [`Handle`]'s prints `Handle(IvG)`.
///
/// ```
/// use handle_pool::{new_handle_type, HandlePool};
///
/// new_handle_type! {
///     /// Handle to an entity.
///     pub struct EntityHandle;
///     /// Handle to a texture.
///     pub struct TextureHandle;
/// }
///
/// let entities: HandlePool<&str, EntityHandle> = HandlePool::with_handle_type();
/// let e: EntityHandle = entities.insert("player");
/// assert_eq!(entities.with(e, |name| name.len()), Some(6));
/// assert_eq!((e.index(), e.generation()), (0, 1));
/// assert_eq!(format!("{e:?}"), "EntityHandle(0v1)");
/// assert!(EntityHandle::default().is_null());
/// assert!(!entities.contains(EntityHandle::null()));
/// ```
///
/// A handle of the wrong type does not compile:
///
/// ```compile_fail,E0308
/// use handle_pool::{new_handle_type, HandlePool};
/// new_handle_type! { struct EntityHandle; struct TextureHandle; }
/// let entities: HandlePool<u32, EntityHandle> = HandlePool::with_handle_type();
/// let textures: HandlePool<u32, TextureHandle> = HandlePool::with_handle_type();
/// let t = textures.insert(1);
/// entities.remove(t);
/// ```
#[macro_export]
macro_rules! new_handle_type {
    ( $(#[$outer:meta])* $vis:vis struct $name:ident; $($rest:tt)* ) => {
        $(#[$outer])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(transparent)]
        $vis struct $name($crate::Handle);

        #[allow(dead_code)]
        impl $name {
            /// The slot index (`u32::MAX` for the null handle).
            #[inline]
            $vis const fn index(self) -> u32 {
                self.0.index()
            }

            /// The generation: how many times the slot had been filled when
            /// this handle was made (starting at 1; `MAX_GENERATION` for
            /// the null handle).
            #[inline]
            $vis const fn generation(self) -> u32 {
                self.0.generation()
            }

            /// The handle as a `u64`.
            #[inline]
            $vis const fn to_bits(self) -> u64 {
                self.0.to_bits()
            }

            /// The handle with these bits, or `None` if no insert could
            /// produce them (the null handle's bits give the null handle).
            #[inline]
            $vis const fn from_bits(bits: u64) -> ::core::option::Option<Self> {
                match $crate::Handle::from_bits(bits) {
                    ::core::option::Option::Some(h) => ::core::option::Option::Some($name(h)),
                    ::core::option::Option::None => ::core::option::Option::None,
                }
            }

            /// The null handle, which no pool ever resolves (also `Default`).
            #[inline]
            $vis const fn null() -> Self {
                $name($crate::Handle::null())
            }

            /// Whether this is the null handle.
            #[inline]
            $vis const fn is_null(self) -> bool {
                self.0.is_null()
            }
        }

        impl ::core::default::Default for $name {
            /// The null handle.
            #[inline]
            fn default() -> Self {
                $name::null()
            }
        }

        impl $crate::PoolHandle for $name {
            #[inline]
            fn from_handle(handle: $crate::Handle) -> Self {
                $name(handle)
            }
            #[inline]
            fn handle(self) -> $crate::Handle {
                self.0
            }
        }

        impl ::core::convert::From<$name> for $crate::Handle {
            #[inline]
            fn from(handle: $name) -> $crate::Handle {
                handle.0
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                self.0.__debug_as(::core::stringify!($name), f)
            }
        }

        $crate::__serde_handle!($name);

        $crate::new_handle_type!($($rest)*);
    };
    () => {};
}
