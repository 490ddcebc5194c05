//! Criterion benches: `handle_pool` against the real alternatives.
//!
//! `cargo bench -p handle-pool-benches --bench pool` runs the whole matrix;
//! with `HANDLE_POOL_BENCH_QUICK=1` a reduced one (get 100k only, 1, 2 and 8
//! threads, short measurements). Criterion's usual filter works too:
//! `cargo bench -p handle-pool-benches --bench pool -- churn/`.
//!
//! Throughput is in operations: lookups, inserts, operations of the mixed
//! workload, or insert+remove pairs for the churn workloads. Capacity and
//! peak live count (churn, churn_window64, mixed) are printed after each
//! of those benches, from its last run. `cargo run --release -p
//! handle-pool-benches --bin bench_report` runs the same workloads without criterion and writes
//! `BENCHES.md`.

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};

mod workloads;

use workloads::{
    for_each_pool, GetFixture, Pool, PoolVisitor, Sample, Scale, Workload, HOT_KEYS, MIXED_ENTRIES,
};

/// What one `cargo bench` covers.
struct Matrix {
    workloads: Vec<Workload>,
    threads: Vec<usize>,
    scale: Scale,
    warm_up: Duration,
    measurement: Duration,
    resamples: usize,
}

impl Matrix {
    fn from_env() -> Self {
        let quick = std::env::var_os("HANDLE_POOL_BENCH_QUICK").is_some_and(|v| v != "0");
        if quick {
            Matrix {
                workloads: vec![
                    Workload::Get(100_000),
                    Workload::Churn,
                    Workload::ChurnWindow64,
                    Workload::Mixed,
                    Workload::Insert,
                    Workload::Hot,
                ],
                threads: vec![1, 2, 8],
                // Half the report's quick sizes: criterion runs each cell
                // at least 10 times plus its warm-up.
                scale: Scale {
                    get_ops: Scale::QUICK.get_ops / 2,
                    churn_pairs: Scale::QUICK.churn_pairs / 2,
                    mixed_ops: Scale::QUICK.mixed_ops / 2,
                    insert_total: Scale::QUICK.insert_total,
                },
                warm_up: Duration::from_millis(50),
                measurement: Duration::from_millis(250),
                resamples: 5_000,
            }
        } else {
            Matrix {
                workloads: vec![
                    Workload::Get(100_000),
                    Workload::Get(1_000_000),
                    Workload::Churn,
                    Workload::ChurnWindow64,
                    Workload::Mixed,
                    Workload::Insert,
                    Workload::Hot,
                ],
                threads: vec![1, 2, 4, 8],
                scale: Scale::FULL,
                warm_up: Duration::from_millis(500),
                measurement: Duration::from_secs(2),
                resamples: 100_000,
            }
        }
    }
}

struct Bench<'a, 'c> {
    group: &'a mut BenchmarkGroup<'c, WallTime>,
    matrix: &'a Matrix,
    workload: Workload,
}

impl PoolVisitor for Bench<'_, '_> {
    fn visit<P: Pool>(&mut self) {
        let workload = self.workload;
        let scale = self.matrix.scale;
        let group = &mut *self.group;
        // One iteration is a whole multi-millisecond run.
        group.sampling_mode(SamplingMode::Flat);
        for &threads in &self.matrix.threads {
            if P::SINGLE_THREAD && threads > 1 {
                continue;
            }
            let id = BenchmarkId::new(P::NAME, threads);
            // The last sample, for the memory figures printed below.
            let mut last: Option<Sample> = None;
            match workload {
                Workload::Get(_) | Workload::Hot => {
                    // Read-only: one fixture serves every iteration. It is
                    // built on first use, so a filtered-out bench costs nothing.
                    let (entries, distinct) = match workload {
                        Workload::Get(n) => (n, n),
                        _ => (MIXED_ENTRIES, HOT_KEYS),
                    };
                    let mut fixture = None;
                    let ops = workloads::ops_per_run(workload, threads, scale);
                    group.throughput(Throughput::Elements(ops));
                    group.bench_function(id, |b| {
                        let fixture = fixture.get_or_insert_with(|| {
                            GetFixture::<P>::new(entries, distinct, threads, scale.get_ops)
                        });
                        assert_eq!(fixture.ops(), ops);
                        b.iter_custom(|iters| (0..iters).map(|_| fixture.run().elapsed).sum())
                    });
                }
                _ => {
                    let ops = workloads::ops_per_run(workload, threads, scale);
                    group.throughput(Throughput::Elements(ops));
                    group.bench_function(id, |b| {
                        b.iter_custom(|iters| {
                            (0..iters)
                                .map(|_| {
                                    let sample = workloads::run_once::<P>(workload, threads, scale);
                                    last = Some(sample);
                                    sample.elapsed
                                })
                                .sum()
                        })
                    });
                }
            }
            if let (true, Some(sample)) = (workload.records_memory(), last) {
                println!(
                    "    memory {}/{}/{}: capacity {}, peak live {}",
                    workload.id(),
                    P::NAME,
                    threads,
                    sample
                        .capacity
                        .map_or_else(|| "n/a".to_string(), |c| c.to_string()),
                    sample
                        .peak_live
                        .map_or_else(|| "n/a".to_string(), |c| c.to_string()),
                );
            }
        }
    }
}

fn main() {
    let matrix = Matrix::from_env();
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(matrix.warm_up)
        .measurement_time(matrix.measurement)
        .nresamples(matrix.resamples)
        .configure_from_args();
    for &workload in &matrix.workloads {
        let mut group = c.benchmark_group(workload.id());
        for_each_pool(&mut Bench {
            group: &mut group,
            matrix: &matrix,
            workload,
        });
        group.finish();
    }
    c.final_summary();
}
