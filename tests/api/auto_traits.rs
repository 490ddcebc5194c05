//! The auto traits of every public type follow `T`'s, as std's collections
//! do. The negative cases are `compile_fail` doctests on each type; these are
//! the positive ones, checked at compile time.

use std::cell::Cell;
use std::sync::MutexGuard;

use handle_pool::{
    CapacityError, Drain, Handle, HandlePool, IntoIter, Iter, IterMut, Keys, ReferenceTable,
    Values, ValuesMut,
};

fn send<X: Send>() {}
fn sync<X: Sync>() {}

/// `Send + !Sync`.
type C = Cell<u32>;
/// `Sync + !Send`.
type G = MutexGuard<'static, u32>;

#[test]
fn handles_and_errors_are_send_and_sync() {
    send::<Handle>();
    sync::<Handle>();
    send::<CapacityError<u32>>();
    sync::<CapacityError<u32>>();
}

#[test]
fn pool_is_send_when_t_is_send_and_sync_when_t_is_send_and_sync() {
    send::<HandlePool<u32>>();
    sync::<HandlePool<u32>>();
    send::<HandlePool<C>>();
    send::<HandlePool<Vec<String>>>();
    sync::<HandlePool<std::sync::Mutex<u32>>>();
}

#[test]
fn shared_iterator_follows_t_sync() {
    send::<Iter<'static, u32, Handle>>();
    sync::<Iter<'static, u32, Handle>>();
    // `&G` may cross threads: `G: Sync`.
    send::<Iter<'static, G, Handle>>();
    sync::<Iter<'static, G, Handle>>();
}

#[test]
fn mutable_iterators_follow_t_send_and_t_sync() {
    send::<IterMut<'static, u32, Handle>>();
    sync::<IterMut<'static, u32, Handle>>();
    send::<IterMut<'static, C, Handle>>();
    sync::<IterMut<'static, G, Handle>>();
    send::<Drain<'static, u32, Handle>>();
    sync::<Drain<'static, u32, Handle>>();
    send::<Drain<'static, C, Handle>>();
    sync::<Drain<'static, G, Handle>>();
    send::<IntoIter<u32, Handle>>();
    sync::<IntoIter<u32, Handle>>();
    send::<IntoIter<C, Handle>>();
}

#[test]
fn key_and_value_iterators_follow_the_iterators_they_wrap() {
    send::<Keys<'static, u32, Handle>>();
    sync::<Keys<'static, u32, Handle>>();
    send::<Values<'static, u32, Handle>>();
    sync::<Values<'static, u32, Handle>>();
    // `&G` may cross threads: `G: Sync`.
    send::<Values<'static, G, Handle>>();
    sync::<Values<'static, G, Handle>>();
    send::<ValuesMut<'static, u32, Handle>>();
    sync::<ValuesMut<'static, u32, Handle>>();
    // `&mut C` may be sent: `C: Send`; `&mut G` shared: `G: Sync`.
    send::<ValuesMut<'static, C, Handle>>();
    sync::<ValuesMut<'static, G, Handle>>();
}

#[test]
fn reference_table_follows_t_as_a_vec_does() {
    send::<ReferenceTable<u32>>();
    sync::<ReferenceTable<u32>>();
    send::<ReferenceTable<C>>();
    sync::<ReferenceTable<G>>();
}

#[cfg(feature = "rayon")]
#[test]
fn parallel_iterators_follow_t() {
    use handle_pool::{ParDrain, ParIter, ParIterMut, ParValuesMut};
    send::<ParIter<'static, u32, Handle>>();
    sync::<ParIter<'static, u32, Handle>>();
    send::<ParIter<'static, G, Handle>>();
    send::<ParIterMut<'static, u32, Handle>>();
    send::<ParIterMut<'static, C, Handle>>();
    send::<ParValuesMut<'static, C>>();
    send::<ParDrain<'static, C, Handle>>();
}
