#!/usr/bin/env bash
# Times the test tiers as a newcomer meets them (issue 29's targets; docs/ci.md "The tiers from a fresh clone"):
# a fresh clone of this checkout's HEAD in a temporary directory (its own empty target/; cargo's registry as
# this machine has it), then each command of the README, one after the other, timed with bash's SECONDS. A
# benchmark, not a test: it judges nothing, it prints what it measured beside the load average.
#
# Usage: scripts/bench-tiers.sh [--busy N] [--keep] [STEP...]
#   --busy N  N busy loops (`while :; do :; done`) beside it the whole time (a busy machine; 0 by default)
#   --keep    keep the clone (its evidence in target/servegate/runs) and print its path
#   STEP      which commands, in order (default: pure pure cli live gates):
#               pure   cargo test --lib --test pure    (the first one builds)
#               cli    cargo test --test cli
#               live   cargo test --test live
#               gates  cargo test --test gates
#               all    cargo test --no-fail-fast       (the README's test command, every tier)
# Prints one line per step (`bench-tiers: STEP N s exit E load A..B tests T`) and a total.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
busy=0 keep=0 steps=()
while [ $# -gt 0 ]; do
    case $1 in
        --busy) busy=${2:?--busy needs a count}; shift 2 ;;
        --keep) keep=1; shift ;;
        pure|cli|live|gates|all) steps+=("$1"); shift ;;
        *) echo "bench-tiers: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
[ ${#steps[@]} -gt 0 ] || steps=(pure pure cli live gates)

work=$(mktemp -d "${TMPDIR:-/tmp}/servegate-bench-tiers.XXXXXX")
loops=()
cleanup() {
    for p in "${loops[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
    if [ $keep -eq 0 ]; then rm -rf "$work"; else echo "bench-tiers: kept $work/clone"; fi
}
trap cleanup EXIT
git clone -q "$here" "$work/clone" || { echo "bench-tiers: git clone failed" >&2; exit 1; }
cd "$work/clone" || exit 1
echo "bench-tiers: $(git rev-parse --short HEAD) in $work/clone, $(nproc) CPUs, $busy busy loop(s)"
for _ in $(seq 1 "$busy"); do ( while :; do :; done ) & loops+=($!); done

load() { cut -d' ' -f1 /proc/loadavg; }
total=0 failed=0
for step in "${steps[@]}"; do
    case $step in
        pure) cmd=(cargo test --lib --test pure) ;;
        cli) cmd=(cargo test --test cli) ;;
        live) cmd=(cargo test --test live) ;;
        gates) cmd=(cargo test --test gates) ;;
        all) cmd=(cargo test --no-fail-fast) ;;
    esac
    l0=$(load) t0=$SECONDS
    "${cmd[@]}" > "$work/$step.log" 2>&1
    rc=$?
    dt=$((SECONDS - t0)) total=$((total + dt))
    [ $rc -eq 0 ] || failed=1
    tests=$(grep -oE '^test result: [a-z]+\. [0-9]+ passed; [0-9]+ failed; [0-9]+ ignored' "$work/$step.log" \
        | awk '{p+=$4; f+=$6; i+=$8} END {printf "%d passed %d failed %d ignored", p, f, i}')
    echo "bench-tiers: $step ${dt} s exit $rc load $l0..$(load) tests $tests (${cmd[*]})"
    [ $rc -eq 0 ] || tail -n 30 "$work/$step.log"
done
echo "bench-tiers: total ${total} s"
exit $failed
