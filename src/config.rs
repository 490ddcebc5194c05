//! Tuning knobs, fixed when a pool is made. Tests shrink them so that bucket
//! growth, slot reuse and generation retirement happen within a few operations.

use crate::handle::{MAX_GENERATION, MAX_INDEX};

/// Pool parameters. The defaults are what [`HandlePool::new`](crate::HandlePool::new) uses;
/// smaller values exist for tests and model checks.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// log2 of the first bucket's slot count (default 6: 64 slots).
    pub first_bucket_shift: u32,
    /// The generation after which a slot is retired for good (default [`MAX_GENERATION`]).
    pub max_generation: u32,
    /// How many slots the pool may ever hand out (default `MAX_INDEX + 1`).
    pub max_slots: u32,
    /// At most this many slots live in the flat region, reserved once the
    /// pool outgrows its first 64 slots (default `MAX_INDEX + 1`: as many as
    /// 1 GiB of address space holds); 0 puts every slot in buckets. A
    /// `DensePool` also holds at most this many values in its values'
    /// region (past its first segment); 0 gives each segment's values an
    /// allocation of their own.
    pub flat_slots: u32,
    /// Number of stripes, a power of two; 0 picks four per core, at most 64.
    pub stripes: usize,
    /// Fresh slots an insert reserves at once when nothing is reusable (default 16).
    pub fresh_block: u32,
    /// Removed slots retired through one deferred reclamation (default 128).
    pub batch: u32,
    /// Whether a thread numbered below the stripe count keeps its free
    /// slots and removals in a magazine of its own (default `true`; used
    /// only where the asymmetric fence exists, see `magazine`).
    pub magazines: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            first_bucket_shift: 6,
            max_generation: MAX_GENERATION,
            max_slots: MAX_INDEX + 1,
            flat_slots: MAX_INDEX + 1,
            stripes: 0,
            fresh_block: 16,
            batch: 128,
            magazines: true,
        }
    }
}

impl Config {
    /// A tiny configuration for model checks: no flat region, buckets of 1, 2, 4… slots, one
    /// fresh slot at a time, batches of `batch`, generation limit `max_generation`, no
    /// magazines (their models turn them on).
    #[cfg(any(test, feature = "testing"))]
    pub fn tiny(max_generation: u32, batch: u32) -> Self {
        Config {
            first_bucket_shift: 0,
            max_generation,
            max_slots: MAX_INDEX + 1,
            flat_slots: 0,
            stripes: 1,
            fresh_block: 1,
            batch,
            magazines: false,
        }
    }

    /// Checks the values and fills in the automatic ones.
    pub(crate) fn resolved(mut self) -> Self {
        assert!(
            self.first_bucket_shift < 31,
            "Config::first_bucket_shift must be below 31"
        );
        assert!(
            (1..=MAX_GENERATION).contains(&self.max_generation),
            "Config::max_generation must be in 1..=MAX_GENERATION"
        );
        assert!(
            (1..=MAX_INDEX + 1).contains(&self.max_slots),
            "Config::max_slots must be in 1..=MAX_INDEX + 1"
        );
        assert!(
            self.fresh_block >= 1,
            "Config::fresh_block must be at least 1"
        );
        assert!(self.batch >= 1, "Config::batch must be at least 1");
        if self.stripes == 0 {
            self.stripes = automatic_stripes();
        }
        assert!(
            self.stripes.is_power_of_two() && self.stripes <= 1024,
            "Config::stripes must be a power of two, at most 1024"
        );
        self
    }
}

/// Four stripes per core, at most 64: the stripe count `Config::stripes`
/// 0 asks for. The cores are counted once per process: std's
/// `available_parallelism` reads the cgroup's CPU quota from the file
/// system on every call (about 200 µs on a 2-core Linux VM), which was
/// most of what making a pool cost (docs/perf/0041).
fn automatic_stripes() -> usize {
    static STRIPES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *STRIPES.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores * 4).next_power_of_two().min(64)
    })
}
