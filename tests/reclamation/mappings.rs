//! What pools take of the process's limits: memory mappings (Linux's
//! `vm.max_map_count`, 65,530 by default, which `thread::spawn` and the
//! allocator need too) and address space under `RLIMIT_AS`. A pool's first
//! 64 slots live in buckets, so a pool that stays that small holds no
//! mapping; one that outgrows them reserves a flat region (two mappings),
//! within a budget of a quarter of the mapping limit for all of them (see
//! `docs/storage.md`).
//!
//! Each test runs alone in a child process: it spends the process's limits
//! on purpose, and counts the mappings of the whole process.

use handle_pool::{Handle, HandlePool};

use crate::common::in_child_process;

/// The process's memory mappings now.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

/// The process's limit on memory mappings.
fn map_count_limit() -> usize {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .map_or(65_530, |limit| limit.trim().parse().unwrap())
}

/// Whether the tests run under a sanitizer whose runtime maps memory of
/// its own for what the process maps (`.ci/sanitize.sh` sets its options):
/// ThreadSanitizer maps shadow for every mapping, and AddressSanitizer's
/// allocator aborts where `try_reserve_exact` would return an error. The
/// checks of mappings and address space then step aside.
fn under(sanitizers: &[&str]) -> bool {
    let under = sanitizers
        .iter()
        .any(|options| std::env::var_os(options).is_some());
    if under {
        eprintln!("skipped under a sanitizer");
    }
    under
}

/// Spawns and joins `threads` threads, each its stack's mappings: what
/// failed once pools had spent the mapping limit.
fn spawn_threads(threads: usize) {
    let spawned: Vec<_> = (0..threads)
        .map(|i| {
            std::thread::Builder::new()
                .spawn(move || i)
                .expect("a thread could not be spawned: the mapping limit is spent")
        })
        .collect();
    for (i, thread) in spawned.into_iter().enumerate() {
        assert_eq!(thread.join().unwrap(), i);
    }
}

/// `count` pools of `values` values each, inserted one at a time, with the
/// handles of the first pool's values.
fn make_pools(count: usize, values: u64) -> (Vec<HandlePool<u64>>, Vec<Handle>) {
    let mut first = Vec::new();
    let pools: Vec<HandlePool<u64>> = (0..count)
        .map(|i| {
            let pool = HandlePool::new();
            for v in 0..values {
                let handle = pool.insert(v);
                if i == 0 {
                    first.push(handle);
                }
            }
            pool
        })
        .collect();
    (pools, first)
}

/// The regression of issue 45: 40,000 pools took every mapping the process
/// could have (two each), and `thread::spawn` failed in unrelated code.
#[cfg(target_os = "linux")]
#[test]
fn a_hundred_thousand_small_pools_take_no_memory_mappings() {
    in_child_process(
        module_path!(),
        "a_hundred_thousand_small_pools_take_no_memory_mappings",
        || {
            if under(&["TSAN_OPTIONS"]) {
                return;
            }
            const POOLS: usize = 100_000;
            let before = mappings();
            // 10 values each, within the first chunk of 64 slots.
            let (pools, handles) = make_pools(POOLS, 10);
            let held = mappings();
            eprintln!("{POOLS} pools of 10 values: {before} -> {held} mappings");
            // The allocator maps what the pools' memory needs (the vector of
            // pools is one mapping of its own), a handful in all.
            assert!(
                held <= before + 32,
                "{POOLS} small pools took {} mappings",
                held - before
            );
            spawn_threads(64);
            for (v, &h) in handles.iter().enumerate() {
                assert_eq!(pools[0].get_cloned(h), Some(v as u64));
            }
            assert!(pools.iter().all(|pool| pool.len() == 10));
        },
    );
}

/// Pools that outgrow their first chunk reserve flat regions until a
/// quarter of the mapping limit is spent, and buckets after that: the
/// rest of the process keeps three quarters.
#[cfg(target_os = "linux")]
#[test]
fn pools_past_their_first_chunk_leave_three_quarters_of_the_mapping_limit() {
    in_child_process(
        module_path!(),
        "pools_past_their_first_chunk_leave_three_quarters_of_the_mapping_limit",
        || {
            if under(&["TSAN_OPTIONS"]) {
                return;
            }
            let limit = map_count_limit();
            // Two mappings a region; more pools than regions allowed.
            let regions = limit / 8;
            let count = regions + 2_000;
            let before = mappings();
            let (pools, handles) = make_pools(count, 100);
            let held = mappings();
            eprintln!("{count} pools of 100 values: {before} -> {held} mappings (limit {limit})");
            assert!(
                held - before <= 2 * regions + 32,
                "{count} pools took {} mappings, past a quarter of {limit}",
                held - before
            );
            // Most of them got a region: the budget is there to be used.
            assert!(
                held - before >= regions,
                "{count} pools took only {} mappings",
                held - before
            );
            spawn_threads(256);
            // The threads leave mappings of their own behind (cached stacks,
            // allocator arenas): count the pools' from here.
            let with_threads = mappings();
            // Pools with regions and pools without answer alike.
            for pool in pools.iter().step_by(97).chain(pools.last()) {
                assert_eq!(pool.len(), 100);
                assert_eq!(pool.iter(&handle_pool::pin()).count(), 100);
            }
            for (v, &h) in handles.iter().enumerate() {
                assert_eq!(pools[0].get_cloned(h), Some(v as u64));
            }
            drop(pools);
            // Dropped pools give their regions back, to later pools too.
            let after = mappings();
            assert!(
                after + (held - before) <= with_threads + 32,
                "regions left mapped: {with_threads} -> {after} mappings"
            );
            let (again, _) = make_pools(100, 100);
            assert!(
                mappings() >= after + 100,
                "pools made after the others dropped got no regions"
            );
            drop(again);
        },
    );
}

/// The regression of issue 45: under `ulimit -v` of 3 GiB, two pools with
/// a few values (1 GiB of address space each) made a 1.5 GiB reservation
/// fail. Now a region takes at most a 64th of the limit.
#[cfg(target_os = "linux")]
#[test]
fn two_pools_under_an_address_space_limit_leave_room_for_a_large_allocation() {
    in_child_process(
        module_path!(),
        "two_pools_under_an_address_space_limit_leave_room_for_a_large_allocation",
        || {
            if under(&["ASAN_OPTIONS", "TSAN_OPTIONS"]) {
                return;
            }
            const GIB: u64 = 1 << 30;
            // What the process has reserved already (its stacks, libraries,
            // heap), plus 3 GiB.
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let size_kib: u64 = status
                .lines()
                .find_map(|line| line.strip_prefix("VmSize:"))
                .and_then(|size| size.trim().strip_suffix("kB"))
                .map(|size| size.trim().parse().unwrap())
                .unwrap();
            let limit = size_kib * 1024 + 3 * GIB;
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: a valid `rlimit` for the call to read.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) }, 0);
            let (pools, handles) = make_pools(2, 1_000);
            let mut large: Vec<u8> = Vec::new();
            large
                .try_reserve_exact((3 * GIB / 2) as usize)
                .expect("two pools left no room for 1.5 GiB under a 3 GiB limit");
            drop(large);
            for (v, &h) in handles.iter().enumerate() {
                assert_eq!(pools[0].get_cloned(h), Some(v as u64));
            }
            assert_eq!(pools[1].len(), 1_000);
        },
    );
}
