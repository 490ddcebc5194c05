//! `SecondaryMap`: one model per race on an entry (see "Loom models" in
//! `docs/secondary.md`), each checked against the sequential orders of its
//! two operations.
//!
//! The map's table has two entries to a leaf and two children to a node
//! under loom, so the first insert allocates a node chain by CAS; its value
//! pool is tiny (batches of one, so a value taken out of an entry is sealed
//! at once and a `flush` reclaims it; four stripes, so that both threads
//! have a one-call word). Values are the harness's `Tracked`: loom reports
//! a drop or a reuse of a value slot that is not ordered after a read of
//! the value, and the drop log checks that each value is dropped exactly
//! once when the map is.

use std::sync::Arc;

use handle_pool::{pin, Config, Handle, SecondaryMap};

use super::harness::{explore, spawn_parked, DropLog, Reached, Recorder, Tracked};

type Map = SecondaryMap<Tracked>;

/// The tiny value pool of every model here.
fn map() -> Map {
    SecondaryMap::with_config(Config {
        stripes: 4,
        ..Config::tiny(8, 1)
    })
}

/// The handle of the entry every model races on, with this generation.
fn entry(generation: u32) -> Handle {
    Handle::from_bits((u64::from(generation) << 32) | 3).unwrap()
}

/// A new value with this id, counted in `log`.
fn value(log: &Arc<DropLog>, id: u32) -> Tracked {
    Recorder::new(Arc::clone(log)).value(id)
}

/// The id of the value the map holds for `handle`, read under a guard.
fn read(map: &Map, handle: Handle) -> Option<u32> {
    let guard = pin();
    map.get(handle, &guard).map(Tracked::id)
}

/// Inserts of generations 1 and 2 for one entry: whatever the order, the
/// entry ends with generation 2's value; generation 1's insert is refused
/// (it came second) or replaced (it came first), and both values are
/// dropped exactly once.
#[test]
fn racing_inserts_of_two_generations_keep_the_newer() {
    let (older_first, newer_first) = (Reached::default(), Reached::default());
    let (seen_older, seen_newer) = (older_first.clone(), newer_first.clone());
    explore(
        "racing_inserts_of_two_generations_keep_the_newer",
        move || {
            let log = DropLog::new(2);
            let map = Arc::new(map());
            let older = {
                let (map, log) = (Arc::clone(&map), Arc::clone(&log));
                spawn_parked(move || map.insert(entry(1), value(&log, 0)))
            };
            assert!(
                map.insert(entry(2), value(&log, 1)),
                "the newer is never refused"
            );
            let older_stored = older.finished();
            if older_stored {
                seen_older.mark();
            } else {
                seen_newer.mark();
            }
            assert_eq!(read(&map, entry(2)), Some(1));
            assert_eq!(read(&map, entry(1)), None);
            assert_eq!(map.len(), 1);
            let map = Arc::into_inner(map).expect("the thread let go of the map");
            drop(map);
            log.assert_each_dropped_once();
            older.release();
        },
    );
    older_first.assert("generation 1 stored first, then replaced");
    newer_first.assert("generation 2 stored first, generation 1 refused");
}

/// A remove of the entry's generation against an insert of the same
/// generation (a replacement): either the remove comes first (it empties
/// the entry, the insert fills it again) or the insert does (it replaces
/// the value, and the remove, retrying on the replaced word, empties the
/// entry). The remove succeeds either way, and each value is dropped once.
#[test]
fn insert_racing_remove_is_one_or_the_other() {
    let (remove_first, insert_first) = (Reached::default(), Reached::default());
    let (seen_remove, seen_insert) = (remove_first.clone(), insert_first.clone());
    explore("insert_racing_remove_is_one_or_the_other", move || {
        let log = DropLog::new(2);
        let map = Arc::new(map());
        assert!(map.insert(entry(1), value(&log, 0)));
        let remover = {
            let map = Arc::clone(&map);
            spawn_parked(move || map.remove(entry(1)))
        };
        assert!(
            map.insert(entry(1), value(&log, 1)),
            "the same generation replaces"
        );
        assert!(remover.finished(), "the remove finds a value either way");
        match read(&map, entry(1)) {
            // remove, then insert
            Some(id) => {
                assert_eq!(id, 1);
                assert_eq!(map.len(), 1);
                seen_remove.mark();
            }
            // insert, then remove
            None => {
                assert_eq!(map.len(), 0);
                seen_insert.mark();
            }
        }
        let map = Arc::into_inner(map).expect("the thread let go of the map");
        drop(map);
        log.assert_each_dropped_once();
        remover.release();
    });
    remove_first.assert("the remove first");
    insert_first.assert("the insert first");
}

/// A one-call read and a read under a held guard of generation 1's value,
/// on the main thread (thread number 0: its one-call read announces in its
/// word in the value pool), against a thread that replaces it with
/// generation 2 (into the value pool: the room is taken, and retired),
/// flushes (once no reader holds it back, the retired room's drop drops
/// generation 1's value and frees the room) and replaces that with
/// generation 3 (written in the freed room). Each read sees generation 1's
/// value intact or none at all; loom reports the drop or the rewrite of the
/// room if it is not ordered after the read. The guarded read also looks up generation 2:
/// found, its value must have been written before its entry named it.
#[test]
fn lookup_racing_replacement_and_reclamation_reads_an_intact_value() {
    let (found, reclaimed_early) = (Reached::default(), Reached::default());
    let (seen_found, seen_reclaimed) = (found.clone(), reclaimed_early.clone());
    explore(
        "lookup_racing_replacement_and_reclamation_reads_an_intact_value",
        move || {
            let log = DropLog::new(3);
            let map = Arc::new(map());
            assert!(map.insert(entry(1), value(&log, 0)));
            let writer = {
                let (map, log) = (Arc::clone(&map), Arc::clone(&log));
                spawn_parked(move || {
                    assert!(map.insert(entry(2), value(&log, 1)));
                    map.flush();
                    let dropped = log.drops(0) == 1;
                    assert!(map.insert(entry(3), value(&log, 2)));
                    dropped
                })
            };
            let one_call = map.with(entry(1), Tracked::id);
            assert!(matches!(one_call, None | Some(0)), "{one_call:?}");
            let held = {
                let guard = pin();
                let value = map.get(entry(1), &guard);
                let id = value.map(Tracked::id);
                // Generation 2's value, if its insert is seen, was
                // published before its entry word was stored.
                let newer = map.get(entry(2), &guard).map(Tracked::id);
                assert!(matches!(newer, None | Some(1)), "{newer:?}");
                // Still intact at the end of the guard's life.
                assert_eq!(value.map(Tracked::id), id);
                id
            };
            assert!(matches!(held, None | Some(0)), "{held:?}");
            if one_call.is_some() || held.is_some() {
                seen_found.mark();
            }
            if writer.finished() {
                seen_reclaimed.mark();
            }
            assert_eq!(read(&map, entry(3)), Some(2));
            assert_eq!(read(&map, entry(1)), None);
            let map = Arc::into_inner(map).expect("the thread let go of the map");
            drop(map);
            log.assert_each_dropped_once();
            writer.release();
        },
    );
    found.assert("a read found generation 1's value");
    reclaimed_early.assert("the writer's flush reclaimed generation 1's value");
}

/// A room freed on one thread and claimed on another: generation 1's value,
/// in the room, is removed in the setup (the room retired); one thread
/// inserts generation 2, which writes in the room if it finds it freed and
/// goes to the value pool if not, while the other flushes, which drops the
/// value and frees the room once no reader holds it back. The write must
/// come after the old value was moved out of the room (loom reports it
/// otherwise), and both outcomes occur.
#[test]
fn a_room_freed_on_one_thread_is_claimed_on_another() {
    let (in_the_room, in_the_pool) = (Reached::default(), Reached::default());
    let (seen_room, seen_pool) = (in_the_room.clone(), in_the_pool.clone());
    explore(
        "a_room_freed_on_one_thread_is_claimed_on_another",
        move || {
            let log = DropLog::new(2);
            let map = Arc::new(map());
            assert!(map.insert(entry(1), value(&log, 0)));
            assert!(map.remove(entry(1)));
            let inserter = {
                let (map, log) = (Arc::clone(&map), Arc::clone(&log));
                spawn_parked(move || assert!(map.insert(entry(2), value(&log, 1))))
            };
            map.flush();
            inserter.finished();
            match map.is_in_its_room(entry(2)) {
                Some(true) => seen_room.mark(),
                Some(false) => seen_pool.mark(),
                None => panic!("generation 2 is stored"),
            }
            assert_eq!(read(&map, entry(2)), Some(1));
            let map = Arc::into_inner(map).expect("the thread let go of the map");
            drop(map);
            log.assert_each_dropped_once();
            inserter.release();
        },
    );
    in_the_room.assert("the room freed before the insert claimed it");
    in_the_pool.assert("the insert found the room still retired");
}
