//! The free list alone: pops and pushes racing on one list over a tiny
//! storage, without the pool around them.

use loom::sync::Arc;
use loom::thread;

use crate::lists::{Chain, FreeList};
use crate::slot::{SlotWord, NIL};
use crate::storage::Storage;
use crate::sync::Ordering;

const SLOTS: u32 = 3;

/// Pops one slot, and asserts the list had one.
fn pop(list: &FreeList, storage: &Storage<u32>) -> u32 {
    list.pop(storage).expect("a free slot").0
}

/// One thread pops two slots and pushes one of them back while another pops
/// one. In every execution each slot ends exactly once either held by a
/// thread or on the list (none lost, none handed out twice), and the tag
/// counts the successful pops.
#[test]
fn free_list_pop_push_race() {
    loom::model(|| {
        let storage = Arc::new(Storage::<u32>::new(0));
        storage.ensure(0, SLOTS);
        for index in 0..SLOTS {
            let link = if index + 1 == SLOTS { NIL } else { index + 1 };
            let word = SlotWord::free(1, link).to_bits();
            storage.slot(index).word.store(word, Ordering::Relaxed);
        }
        let list = Arc::new(FreeList::new());
        list.push(
            &storage,
            Chain {
                first: 0,
                last: SLOTS - 1,
            },
        );

        let (list2, storage2) = (Arc::clone(&list), Arc::clone(&storage));
        let popper = thread::spawn(move || {
            let kept = pop(&list2, &storage2);
            let given_back = pop(&list2, &storage2);
            let chain = Chain {
                first: given_back,
                last: given_back,
            };
            list2.push(&storage2, chain);
            kept
        });
        let mine = pop(&list, &storage);
        let kept = popper.join().unwrap();

        assert_eq!(list.pops(), 3, "the tag counts the three pops");
        let mut on_list = Vec::new();
        while let Some((index, ..)) = list.pop(&storage) {
            on_list.push(index);
        }
        assert_eq!(on_list.len(), 1, "one slot left on the list: {on_list:?}");
        let mut everywhere = vec![mine, kept];
        everywhere.extend(on_list);
        everywhere.sort_unstable();
        assert_eq!(everywhere, [0, 1, 2], "each slot exactly once");
    });
}
