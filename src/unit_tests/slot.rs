//! The slot word: an `OCCUPIED` word is its handle's bits, and no other
//! state's word equals the bits of any handle.

use super::*;
use crate::handle::{MAX_GENERATION, MAX_INDEX};

const INDICES: [u32; 5] = [0, 1, 7, 1 << 20, MAX_INDEX];
const GENERATIONS: [u32; 5] = [1, 2, 3, 1 << 29, MAX_GENERATION];

#[test]
fn an_occupied_word_is_its_handles_bits() {
    for index in INDICES {
        for generation in GENERATIONS {
            let handle = Handle::new(index, generation);
            let word = SlotWord::occupied(handle);
            assert_eq!(word.to_bits(), handle.to_bits());
            assert_eq!(word.state(), State::Occupied);
            assert_eq!(word.generation(), generation);
        }
    }
}

#[test]
fn vacant_words_decode_and_match_no_handle() {
    let links = [0, 1, 7, MAX_INDEX, NIL];
    let mut vacant = vec![(SlotWord::FRESH, State::Free, 0)];
    for generation in [0, 1, 2, MAX_GENERATION - 1, MAX_GENERATION] {
        for link in links {
            vacant.push((SlotWord::free(generation, link), State::Free, generation));
            vacant.push((
                SlotWord::removed(generation, link),
                State::Removed,
                generation,
            ));
        }
        vacant.push((
            SlotWord::exhausted(generation),
            State::Exhausted,
            generation,
        ));
    }
    for (word, state, generation) in vacant {
        assert_eq!(word.state(), state, "{word:?}");
        assert_eq!(word.generation(), generation, "{word:?}");
        assert!(
            Handle::from_bits(word.to_bits()).is_none(),
            "{word:?} has the bits of a handle, so a forged handle would resolve to it"
        );
    }
}

#[test]
fn relinking_keeps_state_and_generation() {
    let word = SlotWord::removed(5, 9).with_link(3);
    assert_eq!(
        (word.state(), word.generation(), word.link()),
        (State::Removed, 5, 3)
    );
    let word = SlotWord::free(MAX_GENERATION - 1, NIL).with_link(0);
    assert_eq!(
        (word.state(), word.generation(), word.link()),
        (State::Free, MAX_GENERATION - 1, 0)
    );
}
