#!/usr/bin/env bash
# The many-core check, run from inside the folder benches/scaling/pack.sh
# made (no Rust toolchain or network needed):
#
#   ./run.sh OUTDIR            # 1 to 3 minutes on 16 cores, never over BUDGET
#   QUICK=1 ./run.sh OUTDIR    # every step shrunk: a smoke test of the pack
#
# Environment: QUICK=1 (small steps), THREADS="1 2 4 8 16" (thread counts,
# default those up to nproc, and nproc), BUDGET=290 (seconds for the whole
# run: each step's timeout is cut to what is left, later steps are skipped).
# Writes each step's output to OUTDIR/<step>.txt and OUTDIR/summary.md.
set -u
out=${1:?usage: ./run.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")"
quick=${QUICK:-0}
budget=${BUDGET:-290}
start=$(date +%s)
nproc=$(nproc)

# Thread counts: those of LIST up to nproc, and nproc itself when it is
# below the largest.
counts() {
    local list=() t
    for t in "$@"; do [ "$t" -le "$nproc" ] && list+=("$t"); done
    [ "$nproc" -lt "${*: -1}" ] && [[ " ${list[*]} " != *" $nproc "* ]] && list+=("$nproc")
    echo "${list[@]}"
}
if [ "$quick" = 1 ]; then
    threads=${THREADS:-$(counts 1 2)}
    report_threads=$threads
else
    threads=${THREADS:-$(counts 1 2 4 8 16)}
    report_threads=${THREADS:-$(counts 1 4 8 16)}
fi
comma() { echo "$*" | tr ' ' ','; }
workers=${threads##* }

steps="$out/.steps"
: >"$steps"
# step NAME SECONDS COMMAND...: runs COMMAND under `timeout`, its output
# tee'd to OUTDIR/NAME.txt, and records a row of the summary.
step() {
    local name=$1 secs=$2 log="$out/$1.txt"
    shift 2
    local left=$((budget - ($(date +%s) - start)))
    if [ "$left" -lt 5 ]; then
        echo "== $name: skipped, the budget of ${budget}s is spent"
        echo "| $name | \`$*\` | skipped (budget) | 0 |" >>"$steps"
        return
    fi
    [ "$secs" -gt "$left" ] && secs=$left
    echo "== $name: $* (timeout ${secs}s)"
    echo "\$ $*" >"$log"
    local t0 t1 rc status
    t0=$(date +%s.%N)
    timeout -k 5 "$secs" "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s.%N)
    case $rc in
        0) status=ok ;;
        124 | 137) status="TIMEOUT (${secs}s)" ;;
        *) status="FAIL (exit $rc)" ;;
    esac
    echo "| $name | \`$*\` | $status | $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") |" >>"$steps"
}

{
    echo "date:  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "nproc: $nproc"
    echo "quick: $quick, threads: $threads, bench_report threads: $report_threads"
    cat MANIFEST 2>/dev/null
    echo
    lscpu 2>/dev/null | head -20
    echo
    echo "load:  $(cat /proc/loadavg 2>/dev/null)"
} | tee "$out/machine.txt"

# churn_scaling: a shared pool against a pool per thread, windows 1 and 64.
if [ "$quick" = 1 ]; then scale_args=(--rounds 1 --pairs 200000); else scale_args=(--rounds 3 --pairs 1000000); fi
for t in $threads; do
    step "churn_scaling-t$t" 25 bin/churn_scaling "${scale_args[@]}" --threads "$t"
done

# bench_report: the report's table, written into OUTDIR (never over BENCHES.md).
if [ "$quick" = 1 ]; then
    report_args=(--quick --reps 1 --only get_100k,churn --threads "$(comma $report_threads)")
else
    report_args=(--quick --reps 1 --threads "$(comma $report_threads)")
fi
if bin/bench_report --help 2>&1 | grep -q -- --out; then
    report_args+=(--out "$out/bench_report.md")
fi
step bench_report 120 bin/bench_report "${report_args[@]}"

# churn_capacity: memory under churn, without and with a held guard.
if [ "$quick" = 1 ]; then cap_args=(--runs 2 --pairs 20000); else cap_args=(--runs 5 --pairs 200000); fi
step churn_capacity 25 bin/churn_capacity "${cap_args[@]}" --threads "$(comma $threads)"
step churn_capacity-guard 25 bin/churn_capacity "${cap_args[@]}" --threads "$(comma $threads)" --guard

# Any event-counting tool the pack holds: given the thread counts (and
# fewer pairs in QUICK mode) when its usage names those flags.
for tool in bin/*event*; do
    [ -x "$tool" ] || continue
    usage=$("$tool" --help 2>&1 | head -20)
    event_args=()
    [[ $usage == *--threads* ]] && event_args+=(--threads "$(comma $threads)")
    [[ $usage == *--pairs* && $quick == 1 ]] && event_args+=(--pairs 20000)
    step "$(basename "$tool")" 40 "$tool" ${event_args[@]+"${event_args[@]}"}
done

# The demo: one worker, then all (each run also plays the world on one).
if [ "$quick" = 1 ]; then demo_args=(--frames 30 --entities 20000); else demo_args=(--frames 100); fi
step demo-w1 20 bin/job_system "${demo_args[@]}" --workers 1
step "demo-w$workers" 60 bin/job_system "${demo_args[@]}" --workers "$workers"

# The crate's own tests.
for test in tests/*; do
    step "test-$(basename "$test")" 30 "$test" -q
done

# ------------------------------------------------------------ the summary
{
    echo "# Many-core check: $nproc CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')$([ "$quick" = 1 ] && echo ', QUICK')"
    echo
    grep -m1 'Model name' "$out/machine.txt" | sed 's/  */ /g'
    grep -m1 '^revision' "$out/machine.txt"
    echo
    echo "## Steps"
    echo
    echo "| step | command | status | seconds |"
    echo "|---|---|---|---:|"
    cat "$steps"
    echo
    echo "## churn_scaling: million insert+remove pairs per second, medians over the rounds"
    echo
    echo "| threads | window | shared pool | a pool per thread | shared / separate |"
    echo "|---:|---:|---:|---:|---:|"
    for t in $threads; do
        for w in 1 64; do
            awk -F'|' -v t="$t" -v w="$w" '
                function median(a, n,   i, j, x) {
                    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
                    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
                }
                $3 + 0 == w && $2 ~ /^ *[0-9]+ *$/ { n++; s[n] = $4 + 0; p[n] = $5 + 0; r[n] = $6 + 0 }
                END { if (n) printf "| %d | %d | %.1f | %.1f | %.2f |\n", t, w, median(s, n), median(p, n), median(r, n) }
            ' "$out/churn_scaling-t$t.txt" 2>/dev/null
        done
    done
    echo
    echo "## churn_capacity: capacity under churn (window 64), bound 4 x peak live + 1024"
    echo
    grep -h '^|' "$out/churn_capacity.txt" 2>/dev/null
    echo
    echo "With a guard held, re-pinned every 256 operations:"
    echo
    grep -h '^|' "$out/churn_capacity-guard.txt" 2>/dev/null
    echo
    echo "## bench_report: headline ratios (full table: bench_report.md)"
    echo
    echo '```'
    sed -n '/headline ratios/,$p' "$out/bench_report.txt" 2>/dev/null | grep -v '^wrote'
    echo '```'
    echo
    for tool in bin/*event*; do
        [ -x "$tool" ] || continue
        echo "## $(basename "$tool"): slow-path events (its output)"
        echo
        tail -n +2 "$out/$(basename "$tool").txt" | sed 's/^## /### /'
        echo
    done
    echo "## The demo: one world played on 1 worker, then on N"
    echo
    echo '```'
    for f in "$out"/demo-w*.txt; do
        grep -h -e '^\$' -e ' workers\?: ' -e 'speed-up' "$f"
    done
    echo '```'
    echo
    echo "## Tests"
    echo
    echo "| binary | result |"
    echo "|---|---|"
    for test in tests/*; do
        name=$(basename "$test")
        result=$(grep -h '^test result' "$out/test-$name.txt" 2>/dev/null | tail -1)
        echo "| $name | ${result:-no result (see test-$name.txt)} |"
    done
} >"$out/summary.md"
rm -f "$steps"

echo
cat "$out/summary.md"
echo
echo "run.sh: $(($(date +%s) - start)) s; outputs in $out"
