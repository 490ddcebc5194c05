//! Many pools alive at once, each used. A pool within its first 64 slots
//! reserves no address space (the README's "Cost per slot"); the limits
//! of the process a pool's reservation counts against, and 100,000 pools
//! held at once, are tested in `tests/reclamation/mappings.rs`.

use handle_pool::{Handle, HandlePool};

/// How many pools the README promises may live at once.
const POOLS: usize = 10_000;

#[test]
fn ten_thousand_pools_alive_at_once_all_work() {
    let pools: Vec<HandlePool<u64>> = (0..POOLS).map(|_| HandlePool::new()).collect();
    let first: Vec<Handle> = pools
        .iter()
        .zip(0..)
        .map(|(pool, i)| pool.insert(i))
        .collect();
    // Every pool is its own: the same handle in each, a value of its own.
    assert!(first.iter().all(|&h| h == first[0]));
    for ((pool, &h), i) in pools.iter().zip(&first).zip(0..) {
        assert_eq!(pool.get_cloned(h), Some(i));
        let second = pool.insert(i + 1);
        assert!(pool.remove(h));
        assert_eq!(pool.reader().get(second), Some(&(i + 1)));
        assert_eq!(pool.len(), 1);
    }
    drop(pools);
    // And again, once they are gone: their address space came back.
    let again: Vec<HandlePool<u8>> = (0..POOLS).map(|_| HandlePool::new()).collect();
    for pool in &again {
        let h = pool.insert(7);
        assert_eq!(pool.get_cloned(h), Some(7));
    }
}
