#!/usr/bin/env bash
# Loom model checks of the pool (loom_tests/, built into the library's unit
# tests under --cfg handle_pool_loom, so loom is only a dev-dependency).
#
# Every model explores all interleavings of 2 or 3 threads within the
# preemption bound, on a tiny pool configuration, and checks each execution
# against ReferenceTable, value drop counts and loom's causality checks.
#
# Measured on the 2-core development machine: LOOM_MAX_PREEMPTIONS=3, 2 min
# 10 s in all at commit d6db6cc (build cached: models ran in 130 s;
# 53 tests, 6 of them in the flat region: 5 twins of bucket models and
# inserts_racing_across_the_flat_regions_end), 2026-11-24, quiet machine.
# A 54th, the drop-free model's flat twin, adds about 8 s; a 55th, the
# refill model's flat twin, under 1 s; the 56th to 58th, a full pool's
# insert and a sweep racing a magazine's owner, about 10 s together (the
# longest, a_full_pool_pops_from_a_magazine_its_owner_flushes, 45,971
# executions, 2026-11-25). Before reclamation stopped deferring
# on crossbeam-epoch (whose pin and flush are dozens of atomics each under
# loom), the models took 8 to 13 min at LOOM_MAX_PREEMPTIONS=2, so 2 was the
# default; 3 explores 7 to 8 times as many executions per model.
#
# Usage: ci/loom.sh [test name filter] [other libtest arguments]
# Environment: LOOM_MAX_PREEMPTIONS (default 3), and for a
# failing model LOOM_LOG=trace, LOOM_LOCATION=1, LOOM_CHECKPOINT_FILE=f.json
# (see the loom crate's docs) to print and replay the failing interleaving.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg handle_pool_loom --cfg crossbeam_loom"
# Its own target dir: the cfg flags would otherwise rebuild everyone's target/.
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
# Some models take more than loom's default 1000 scheduling decisions per
# execution (a guard still pins crossbeam-epoch: dozens of atomics).
export LOOM_MAX_BRANCHES="${LOOM_MAX_BRANCHES:-20000}"

start=$SECONDS
cargo test --lib --release --no-run
built=$SECONDS
# --nocapture shows each model's execution count as it finishes.
cargo test --lib --release -- --nocapture "$@"
echo "loom: built in $((built - start)) s, models ran in $((SECONDS - built)) s" \
    "(LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS)"
