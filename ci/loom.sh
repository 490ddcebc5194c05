#!/usr/bin/env bash
# Loom model checks of the pool (loom_tests/, built into the library's unit
# tests under --cfg handle_pool_loom, so loom is only a dev-dependency).
#
# Every model explores all interleavings of 2 or 3 threads within the
# preemption bound, on a tiny pool configuration, and checks each execution
# against ReferenceTable, value drop counts and loom's causality checks.
#
# Measured on the 2-core development machine, LOOM_MAX_PREEMPTIONS=2:
# 8 min 28 s in all at commit 770bc96 (build cached: built in 5 s, models
# ran in 503 s; 28 tests, 21 of them models), 2026-11-23, quiet machine.
# Before, 9 min 53 s in all at commit db3f06a (build cached: built in 1 s, models
# ran in 592 s; 28 tests, 21 of them models, 2.85 million executions),
# 2026-11-22, on a machine shared with other sessions' builds. Before,
# 11 min 33 s in all at commit 09f9a09, the first run as the library's unit
# tests (from an empty target dir: built in 66 s, models ran in 627 s; 23
# tests, 17 of them models, 3.1 million executions), 2026-11-22, while
# other builds ran on the machine. Before, at commit f1948d1: 5 min 47 s
# (build cached, idle machine); earlier still, 3 min 14 s from an empty
# target dir under other load: the time depends on the load and the models.
#
# Usage: ci/loom.sh [test name filter] [other libtest arguments]
# Environment: LOOM_MAX_PREEMPTIONS (default 2; 3 explores 7 to 8 times as
# many executions per model, so roughly 20 min in all), and for a
# failing model LOOM_LOG=trace, LOOM_LOCATION=1, LOOM_CHECKPOINT_FILE=f.json
# (see the loom crate's docs) to print and replay the failing interleaving.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg handle_pool_loom --cfg crossbeam_loom"
# Its own target dir: the cfg flags would otherwise rebuild everyone's target/.
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
# Some models take more than loom's default 1000 scheduling decisions per
# execution (crossbeam-epoch's pin and flush are dozens of atomics each).
export LOOM_MAX_BRANCHES="${LOOM_MAX_BRANCHES:-20000}"

start=$SECONDS
cargo test --lib --release --no-run
built=$SECONDS
# --nocapture shows each model's execution count as it finishes.
cargo test --lib --release -- --nocapture "$@"
echo "loom: built in $((built - start)) s, models ran in $((SECONDS - built)) s" \
    "(LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS)"
