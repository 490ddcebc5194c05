//! Lookups: whether a handle resolves, and to which value.

use crate::Guard;

use crate::handle::Handle;
use crate::hint::cold_path;
use crate::slot::{Slot, SlotWord};
use crate::storage::{FindSlot, View};
use crate::sync::Ordering;

use super::RawPool;

impl<T> RawPool<T> {
    /// `found` of the slot `handle` names in `slots`, if it holds the
    /// occupant the handle was made for. Every lookup goes through here.
    #[inline(always)]
    pub(super) fn find_occupied<'a, R>(
        slots: impl FindSlot<'a, T>,
        handle: Handle,
        found: impl FnOnce(&'a Slot<T>) -> R,
    ) -> Option<R>
    where
        T: 'a,
    {
        slots.find_or(
            handle.index(),
            |slot| {
                // Acquire pairs with the Release store in `publish`, so the
                // value is visible once the word matches.
                let word = slot.word.load(Ordering::Acquire);
                if word == SlotWord::occupied(handle).to_bits() {
                    Some(found(slot))
                } else {
                    // A stale or forged handle: laid out off the hit path,
                    // which then runs with no taken branch (docs/perf/0022).
                    cold_path();
                    None
                }
            },
            None,
        )
    }

    /// The slot `handle` names if it holds the occupant the handle was made for.
    #[inline]
    pub(super) fn occupied_slot(&self, handle: Handle) -> Option<&Slot<T>> {
        Self::find_occupied(&self.storage, handle, |slot| slot)
    }

    /// The storage as it is now, for a loop of lookups through
    /// [`get_in`](Self::get_in) and [`contains_in`](Self::contains_in)
    /// (see `Storage::view`).
    #[inline]
    pub(crate) fn view(&self) -> View<'_, T> {
        self.storage.view()
    }

    /// Whether `handle` refers to a value in the pool.
    #[inline]
    pub(crate) fn contains(&self, handle: Handle) -> bool {
        Self::contains_in(&self.storage, handle)
    }

    /// [`contains`](Self::contains), looking in `slots`.
    #[inline(always)]
    pub(crate) fn contains_in<'a>(slots: impl FindSlot<'a, T>, handle: Handle) -> bool
    where
        T: 'a,
    {
        // Acquire pairs with the Release store in `publish`, as in every
        // lookup: no value is read here, but a `true` orders this thread
        // after the insert, as a caller who signals through the pool may
        // expect. The word, or the fresh word where no slot exists, is
        // compared once after the paths meet: the comparison's flag then
        // widens in a zeroed register, where a `false` merged in from the
        // missing-bucket path made it a byte write that waits on the
        // previous lookup's (docs/perf/0032).
        let word = slots.find_or(
            handle.index(),
            |slot| slot.word.load(Ordering::Acquire),
            SlotWord::FRESH.to_bits(),
        );
        word == SlotWord::occupied(handle).to_bits()
    }

    /// The value `handle` refers to, protected by `guard`.
    #[inline]
    pub(crate) fn get<'g>(&'g self, handle: Handle, guard: &'g Guard) -> Option<&'g T> {
        Self::get_in(&self.storage, handle, guard)
    }

    /// [`get`](Self::get), looking in `slots`: this pool's storage, or a
    /// view of it, borrowed for `'g`.
    #[inline(always)]
    pub(crate) fn get_in<'g>(
        slots: impl FindSlot<'g, T>,
        handle: Handle,
        _guard: &'g Guard,
    ) -> Option<&'g T>
    where
        T: 'g,
    {
        // SAFETY: the word was OCCUPIED(g), so the value is initialised (the
        // Acquire load saw its publication). The guard announced this thread
        // (a `Guard` can only be made by announcing) before that load, so
        // even if the value is removed now, its batch is not reclaimed until
        // the guard is dropped (see `reclaim.md`); exclusive removals need
        // `&mut` of the pool, which `slots`' borrow of its storage for `'g`
        // rules out; the storage lives as long as that borrow: the
        // reference is valid for 'g.
        Self::find_occupied(slots, handle, |slot| unsafe { slot.value_ref() })
    }

    /// Calls `f` with the value `handle` refers to, protected for the call
    /// by a one-call read (see `Reclaimer::read`).
    #[inline]
    pub(crate) fn with<R>(&self, handle: Handle, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.reclaimer.read(|| {
            Self::find_occupied(&self.storage, handle, |slot| {
                // SAFETY: the word was OCCUPIED(g), so the value is
                // initialised. The read's protection began before that load
                // and lasts until `f` returns, so no reclamation drops the
                // value or reuses the slot meanwhile (as `Reclaimer::read`
                // promises); exclusive removals need `&mut`, which `&self`
                // rules out.
                f(unsafe { slot.value_ref() })
            })
        })
    }

    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        let slot = self.occupied_slot(handle)?;
        // SAFETY: OCCUPIED means initialised; `&mut self` excludes every
        // other access to the pool for the returned lifetime.
        Some(unsafe { slot.value_mut() })
    }

    /// Mutable references to the values of `handles`, or `None` if any is
    /// stale or two name the same slot.
    pub(crate) fn get_disjoint_mut<const N: usize>(
        &mut self,
        handles: [Handle; N],
    ) -> Option<[&mut T; N]> {
        for (i, handle) in handles.iter().enumerate() {
            self.occupied_slot(*handle)?;
            if handles[..i]
                .iter()
                .any(|other| other.index() == handle.index())
            {
                return None;
            }
        }
        Some(handles.map(|handle| {
            let slot = self.storage.slot(handle.index());
            // SAFETY: every slot was just seen OCCUPIED and `&mut self` keeps
            // it so; the indices are pairwise distinct, so the references
            // do not alias.
            unsafe { slot.value_mut() }
        }))
    }
}
