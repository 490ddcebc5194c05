#!/usr/bin/env bash
# Loom model checks of the pool (loom_tests/, built into the library's unit
# tests under --cfg handle_pool_loom, so loom is only a dev-dependency).
#
# Every model explores all interleavings of 2 or 3 threads within the
# preemption bound, on a tiny pool configuration, and checks each execution
# against ReferenceTable, value drop counts and loom's causality checks.
#
# LOOM_MAX_PREEMPTIONS is 3 by default, which the models afford since
# reclamation stopped deferring on crossbeam-epoch (whose pin and flush are
# dozens of atomics each under loom); before, 2 was the default. How long
# the models take, and how many more executions 3 explores: docs/perf/0037.
#
# Usage: .ci/loom.sh [test name filter] [other libtest arguments]
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
