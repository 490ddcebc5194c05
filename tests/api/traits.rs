//! The collection traits (`FromIterator`, `Extend`, `IntoIterator`) and
//! `get_disjoint_mut` (serde has its own file, `serde.rs`).

use handle_pool::{pin, Handle, HandlePool};

use crate::common::{Alive, Counted};

#[test]
fn collect_extend_into_iter_and_get_disjoint_mut() {
    let mut pool: HandlePool<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    pool.extend(["d".to_string()]);
    assert_eq!(pool.len(), 4);
    let handles: Vec<Handle> = pool.iter(&pin()).map(|(h, _)| h).collect();
    {
        let [x, y] = pool.get_disjoint_mut([handles[0], handles[3]]).unwrap();
        x.push('!');
        y.push('?');
    }
    assert!(pool.get_disjoint_mut([handles[1], handles[1]]).is_none());
    let stale = pool.insert("e".into());
    pool.remove(stale);
    assert!(pool.get_disjoint_mut([handles[1], stale]).is_none());
    for (_, v) in &mut pool {
        v.make_ascii_uppercase();
    }
    let mut all: Vec<(Handle, String)> = pool.into_iter().collect();
    all.sort();
    let values: Vec<&str> = all.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(values, ["A!", "B", "C", "D?"]);
}

#[test]
fn into_iter_drops_what_it_does_not_yield() {
    let alive = Alive::new();
    let pool: HandlePool<Counted> = alive.values(10).collect();
    let mut it = pool.into_iter();
    let first = it.next();
    assert!(first.is_some());
    drop(it);
    drop(first);
    assert_eq!(alive.count(), 0);
}
