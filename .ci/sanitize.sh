#!/usr/bin/env bash
# The test suite (tests/: behaviour, drops, model and property tests, the
# multi-threaded stress tests) under AddressSanitizer (with LeakSanitizer)
# and ThreadSanitizer.
#
# Usage: .ci/sanitize.sh [asan|tsan|all]     (default: all)
#
# The stable toolchain ships the sanitizer runtimes; -Z flags need
# RUSTC_BOOTSTRAP=1. std is not rebuilt (there is no rust-src), so it is
# linked uninstrumented: fine for ASan; for TSan see .ci/tsan.supp.
# crossbeam-epoch: its build script turns on `crossbeam_sanitize_thread`
# by itself under TSan (loads instead of fences TSan cannot see); we add
# `--cfg crossbeam_sanitize` to both passes, as crossbeam's own CI does,
# which shrinks its garbage bags from 64 to 4 and collects without limit,
# so removed values are reclaimed and slots reused far more often.
#
# How long each pass takes (most of it the 16-thread `ownership_long`
# stress): docs/perf/0037.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
case $mode in
asan | tsan | all) ;;
*)
    echo "usage: $0 [asan|tsan|all]" >&2
    exit 2
    ;;
esac

# An explicit --target keeps the sanitizer flags off build scripts and
# proc-macros; the target dirs are separate so nobody else rebuilds.
target=$(rustc -vV | sed -n 's/^host: //p')
export RUSTC_BOOTSTRAP=1
export CARGO_INCREMENTAL=0
# The memory bounds under churn are properties of the uninstrumented build
# (checked by `cargo test`, and by the release step of .ci/run for the
# 32-thread one): instrumented code runs several times slower and
# `crossbeam_sanitize` shrinks crossbeam's bags to 4, so under a sanitizer
# the test would measure the sanitizer. The sanitizers still run the rest of
# tests/reclamation/reclamation.rs, and every other test.
skip_bound=capacity_after_churn_at_two_threads_stays_within_the_bound
skip_long_bound=churn_keeps_capacity_bounded_long

asan() {
    # No leak suppressions: every leak fails the pass.
    export RUSTFLAGS="-Zsanitizer=address --cfg crossbeam_sanitize"
    export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1"
    export CARGO_TARGET_DIR=target/asan
    cargo test --target "$target" --tests -- --skip "$skip_bound"
    # The multi-threaded stress tests' long variants.
    cargo test --target "$target" --test concurrency stress:: -- --ignored --skip "$skip_long_bound"
    unset RUSTFLAGS ASAN_OPTIONS LSAN_OPTIONS CARGO_TARGET_DIR
}

tsan() {
    # std (and libtest) are linked uninstrumented, so TSan sees none of the
    # synchronisation inside std's compiled code: not the end of
    # `thread::scope`, nor `Barrier`, nor `Mutex`. The tests hand data
    # between threads through tests/common's `scope`, `StartLine` and
    # `Lock` instead, built on atomics compiled (and instrumented) in the
    # test crate, or join their threads (`pthread_join` is intercepted);
    # rayon's tests run on a worker of its pool (`on_rayon_worker`), whose
    # latches are atomics in rayon's own, instrumented code. What is left
    # in std and rayon is in .ci/tsan.supp, each entry naming only
    # third-party frames.
    export RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer --cfg crossbeam_sanitize"
    export TSAN_OPTIONS="suppressions=$PWD/.ci/tsan.supp:halt_on_error=0:second_deadlock_stack=1"
    export CARGO_TARGET_DIR=target/tsan
    # No skips but the memory bounds. (The library's `par` unit test runs
    # its body on a worker of rayon's pool and takes the outcome back
    # through an atomic: called from outside a pool, rayon waits for the
    # work on an std Mutex and Condvar, which TSan cannot see.)
    local skip=(--skip "$skip_long_bound" --skip "$skip_bound")
    # One test at a time: reports then name one test, and 16-thread stress
    # tests do not run on top of each other.
    cargo test --target "$target" --tests -- --test-threads=1 "${skip[@]}"
    cargo test --target "$target" --test concurrency stress:: -- --ignored --test-threads=1 "${skip[@]}"
    unset RUSTFLAGS TSAN_OPTIONS CARGO_TARGET_DIR
}

run() {
    local start=$SECONDS
    echo "=== sanitize: $1"
    "$1"
    echo "=== sanitize: $1 passed in $((SECONDS - start)) s"
}

case $mode in
asan) run asan ;;
tsan) run tsan ;;
all)
    run asan
    run tsan
    ;;
esac
