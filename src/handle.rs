//! Handles: a 32-bit slot index and a 32-bit generation packed into one `u64`.
//!
//! Bits 0..32 hold the index and bits 32..64 the generation. Generations start
//! at 1, so no handle is ever all zeroes and `Option<Handle>` is 8 bytes.
//! Valid indices are `0..=MAX_INDEX` (`u32::MAX` ends the free lists inside the
//! pool) and valid generations are `1..=MAX_GENERATION` (the slot word spends
//! two of its 32 generation bits on the slot state; see `slot`).

use core::fmt;
use core::hash::Hash;
use core::num::NonZeroU64;

/// The largest slot index a handle can carry (`u32::MAX` ends the free lists).
///
/// ```
/// use handle_pool::{Handle, MAX_INDEX};
/// assert!(Handle::from_bits((1 << 32) | MAX_INDEX as u64).is_some());
/// assert!(Handle::from_bits((1 << 32) | u32::MAX as u64).is_none());
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

    /// The slot index.
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
    /// handle was made (starting at 1).
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

    /// The handle with these bits, or `None` if no insert could ever produce
    /// them (generation 0 or above [`MAX_GENERATION`], index above
    /// [`MAX_INDEX`]). When it returns `Some(h)`, `h.to_bits() == bits`.
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
        let index = bits as u32;
        let generation = (bits >> INDEX_BITS) as u32;
        if index > MAX_INDEX || generation == 0 || generation > MAX_GENERATION {
            return None;
        }
        Some(Self::new(index, generation))
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("index", &self.index())
            .field("generation", &self.generation())
            .finish()
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
/// ordering and `to_bits`/`from_bits`.
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

        impl $name {
            /// The handle as a `u64`.
            #[inline]
            #[allow(dead_code)]
            $vis const fn to_bits(self) -> u64 {
                self.0.to_bits()
            }

            /// The handle with these bits, or `None` if no insert could produce them.
            #[inline]
            #[allow(dead_code)]
            $vis const fn from_bits(bits: u64) -> ::core::option::Option<Self> {
                match $crate::Handle::from_bits(bits) {
                    ::core::option::Option::Some(h) => ::core::option::Option::Some($name(h)),
                    ::core::option::Option::None => ::core::option::Option::None,
                }
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
                ::core::write!(f, "{}({}v{})", ::core::stringify!($name), self.0.index(), self.0.generation())
            }
        }

        $crate::__serde_handle!($name);

        $crate::new_handle_type!($($rest)*);
    };
    () => {};
}
