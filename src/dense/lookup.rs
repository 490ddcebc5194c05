//! Lookups: the sparse word says whether the value is there and where
//! (see "Lookups" in the module docs); the column gives its address.

use core::ptr::NonNull;

use crate::Guard;

use crate::handle::Handle;
use crate::hint::cold_path;
use crate::slot::SlotWord;
use crate::sync::Ordering;

use super::index::{handle_in, holds_value, position_for};
use super::raw::RawDense;

impl<T> RawDense<T> {
    /// The position of the value `handle` refers to, if it is in the pool:
    /// one load of the sparse word and one comparison. Every lookup goes
    /// through here.
    #[inline(always)]
    pub(super) fn find(&self, handle: Handle) -> Option<u32> {
        // Acquire pairs with the Release store of the sparse word in
        // `Claim::publish`: the value is initialised and its segment
        // allocated once the word is `OCCUPIED` with the handle's bits.
        let word = self.sparse.find_or(
            handle.index(),
            |slot| slot.word.load(Ordering::Acquire),
            SlotWord::FRESH.to_bits(),
        );
        position_for(word, handle)
    }

    /// The value cell of the value `handle` refers to, if it is in the pool.
    #[inline(always)]
    fn find_value(&self, handle: Handle) -> Option<NonNull<T>> {
        let Some(position) = self.find(handle) else {
            cold_path();
            return None;
        };
        // SAFETY: `position` comes from an OCCUPIED sparse word loaded with
        // Acquire in `find`, which pairs with the insert's Release store
        // made after it allocated the position's segment.
        Some(unsafe { self.column.value_at(position) })
    }

    /// Whether `handle` refers to a value in the pool.
    #[inline]
    pub(crate) fn contains(&self, handle: Handle) -> bool {
        self.find(handle).is_some()
    }

    /// The value `handle` refers to, protected by `guard`.
    #[inline]
    pub(crate) fn get<'g>(&'g self, handle: Handle, _guard: &'g Guard) -> Option<&'g T> {
        let value = self.find_value(handle)?;
        // SAFETY: the sparse word was OCCUPIED(handle) (an Acquire load), so
        // the value is initialised. The guard announced this thread before
        // that load (a `Guard` can only be made by announcing), and a remove
        // vacates the sparse word before it seals the value's batch, so even
        // if the value is removed now its batch is not reclaimed until the
        // guard is dropped (see `reclaim.md`); it does not move either,
        // since only `&mut` moves values, which the borrow of `self` for 'g
        // rules out; the column lives as long as that borrow.
        Some(unsafe { value.as_ref() })
    }

    /// Calls `f` with the value `handle` refers to, protected for the call
    /// by a one-call read (see `Reclaimer::read`).
    #[inline]
    pub(crate) fn with<R>(&self, handle: Handle, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.reclaimer.read(|| {
            let value = self.find_value(handle)?;
            // SAFETY: the sparse word was OCCUPIED(handle), so the value is
            // initialised; the read's protection began before that load and
            // lasts until `f` returns, so no reclamation drops it meanwhile
            // (see `get`), and only `&mut`, which `&self` rules out, moves it.
            Some(f(unsafe { value.as_ref() }))
        })
    }

    /// The position of the value `handle` refers to.
    #[inline]
    pub(crate) fn position(&self, handle: Handle) -> Option<u32> {
        self.find(handle)
    }

    /// The handle of the value at `position`, if one is there.
    pub(crate) fn handle_at(&self, position: u32) -> Option<Handle> {
        if position >= self.end() {
            return None;
        }
        let cell = self.column.find(position)?;
        // Acquire pairs with the Release store of the dense word in
        // `Claim::publish`: a handle seen here resolves, as a `get` that
        // finds the value does.
        let word = cell.word.load(Ordering::Acquire);
        holds_value(word).then(|| handle_in(word))
    }

    /// The value `handle` refers to, mutably.
    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        let mut value = self.find_value(handle)?;
        // SAFETY: OCCUPIED means initialised; `&mut self` excludes every
        // other access to the pool for the returned lifetime.
        Some(unsafe { value.as_mut() })
    }
}
