#!/usr/bin/env bash
# Fuzzing (docs/reliability.md, "Fuzzing"): runs each cargo-fuzz (libFuzzer) target of fuzz/ for a bounded time.
#   sse_reply   the SSE framer and the reply parser (crates/core/src/analysis/sse.rs, crates/core/src/analysis/reply/) on bytes split into reads at
#               fuzzer-chosen points; framing must not depend on the split
#   spec_parse  the gate-spec loader (crates/core/src/spec/mod.rs parse)
# The committed corpus (fuzz/corpus/<target>/) seeds each run; inputs the fuzzer finds go to a scratch directory
# (not committed). A crash leaves its input in fuzz/artifacts/<target>/ and fails the script: turn it into a
# regression test in tests/pure (see docs/reliability.md) and commit the input to the corpus.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, both targets)
#        scripts/fuzz.sh --prepare [TARGET...]    install cargo-fuzz and build the targets, run nothing (.ci/run
#                                                 does this in the background, niced, while other stages run)
# Needs cargo-fuzz (installed here when missing, once, into $SERVEGATE_CACHE/cargo-fuzz: a few minutes) and a nightly
# compiler or RUSTC_BOOTSTRAP=1 on stable (set here: libFuzzer needs -Z sanitizer flags).
# Prints, per target, the executions, the corpus size and the outcome; exit 0 when no target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

prepare=0
if [ "${1:-}" = "--prepare" ]; then prepare=1; shift; fi
seconds=60
if [ $prepare -eq 0 ]; then seconds="${1:-60}"; shift || true; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sse_reply spec_parse)

# cargo-fuzz is installed once into the servegate cache ($SERVEGATE_CACHE, default ~/.cache/servegate), not the
# cargo home: a CI machine that keeps the cache builds it once (about 9 minutes on 2 cores), later runs reuse it.
fuzz_root="${SERVEGATE_CACHE:-$HOME/.cache/servegate}/cargo-fuzz"
export PATH="$fuzz_root/bin:$PATH"
if ! command -v cargo-fuzz > /dev/null; then
    echo "fuzz: installing cargo-fuzz into $fuzz_root (once)"
    cargo install cargo-fuzz --locked --quiet --root "$fuzz_root"
fi
export RUSTC_BOOTSTRAP=1

cd fuzz
for t in "${targets[@]}"; do cargo fuzz build -O "$t" 2>&1 | tail -n 1; done
if [ $prepare -eq 1 ]; then echo "fuzz: cargo-fuzz installed, targets built: ${targets[*]}"; exit 0; fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/servegate-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

failed=0
total=0
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t" "artifacts/$t"
    log="$scratch/$t.log"
    set +e
    cargo fuzz run -O "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" > "$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
    execs=${execs:-0}
    total=$((total + execs))
    found=$(ls "$scratch/$t" | wc -l)
    if [ "$rc" -eq 0 ]; then
        echo "fuzz: $t: ${seconds} s, $execs executions, $found new corpus inputs, no crash"
    else
        failed=1
        echo "fuzz: $t: FAILED (exit $rc) after $execs executions; the input is in fuzz/artifacts/$t/:"
        grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -n 20 || tail -n 40 "$log"
    fi
done
echo "fuzz: total executions $total; crashes: $failed"
exit "$failed"
