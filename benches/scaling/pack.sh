#!/usr/bin/env bash
# Packs the many-core check: builds in release the scaling tools of the
# benches package, the demo and the crate's own test binaries, strips them
# and copies them with run.sh into one folder, to be copied to a machine
# with no Rust toolchain and run there as `./run.sh OUTDIR`.
#
# Usage: benches/scaling/pack.sh [PACKDIR]   (default: target/scaling-pack)
# CARGO_TARGET_DIR is honoured (default: target/ at the repository root).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pack=${1:-$root/target/scaling-pack}
target=${CARGO_TARGET_DIR:-$root/target}
export CARGO_TARGET_DIR=$target
cd "$root"

# The tools: the three scaling ones, and any event-counting one there is
# (a bin of the benches package, or an example of the crate's).
tools=(churn_scaling bench_report churn_capacity)
for f in benches/src/bin/*event*.rs; do
    [ -e "$f" ] && tools+=("$(basename "$f" .rs)")
done
bin_args=()
for t in "${tools[@]}"; do bin_args+=(--bin "$t"); done

echo "pack: building ${tools[*]} and the demo (release)"
cargo build --release -p handle-pool-benches "${bin_args[@]}"
cargo build --release -p handle-pool-demo
examples=()
for f in examples/*event*.rs; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .rs)
    # Optional: an example that does not build is left out, not fatal.
    if cargo build --release --all-features --example "$name"; then
        examples+=("$name")
    else
        echo "pack: the example $name does not build: left out" >&2
    fi
done

echo "pack: building the crate's test binaries (release, all features)"
tests_json=$(mktemp)
trap 'rm -f "$tests_json"' EXIT
cargo test --release --all-features --no-run --message-format=json >"$tests_json"

rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/tests"
for t in "${tools[@]}"; do cp "$target/release/$t" "$pack/bin/"; done
for e in ${examples[@]+"${examples[@]}"}; do cp "$target/release/examples/$e" "$pack/bin/"; done
cp "$target/release/job_system" "$pack/bin/"
# One line per test executable: "<target name> <kind> <path>".
python3 - "$tests_json" <<'EOF' |
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["target"]["kind"][0], m["executable"])
EOF
while read -r name kind exe; do
    # The library's own unit tests are named after the crate: call them "lib".
    [ "$kind" = lib ] && name=lib
    cp "$exe" "$pack/tests/$name"
done
strip "$pack"/bin/* "$pack"/tests/*
cp "$here/run.sh" "$pack/run.sh"
chmod +x "$pack/run.sh"
{
    echo "revision: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git status --porcelain -- src Cargo.toml benches demo tests 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')"
    echo "packed:   $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -m)"
    echo "rustc:    $(rustc --version)"
    echo "tools:    ${tools[*]} ${examples[*]:-} job_system"
    echo "tests:    $(ls "$pack/tests" | tr '\n' ' ')"
} >"$pack/MANIFEST"

size_kib=$(du -sk "$pack" | cut -f1)
echo "pack: $pack, $((size_kib / 1024)) MiB ($size_kib KiB), $(find "$pack/bin" "$pack/tests" -type f | wc -l) binaries"
if [ "$size_kib" -gt $((64 * 1024)) ]; then
    echo "pack: over 64 MiB" >&2
    exit 1
fi
echo "pack: copy the folder over, then run it there: cd scaling-pack && ./run.sh OUTDIR"
