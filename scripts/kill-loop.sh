#!/usr/bin/env bash
# The random-kill loop (issue 6, item 2): start `servegate run` on a fast fake-serve gate, kill it with SIGKILL,
# SIGTERM or SIGINT at a random moment (during start-up, readiness, a request, the stop, or after), and check
# afterwards that
#   - no serve process remains (the serve's pid from run.json and its whole process group are gone),
#   - every evidence directory is either complete (run.json "status": "complete") or marked incomplete
#     ("status": "running"), and
#   - every .json file in it parses (no half-written file; writes are temp file + fsync + rename).
# Prints the figures: trials, leaked, incomplete dirs, complete dirs, bad files.
#
# Usage: scripts/kill-loop.sh [TRIALS] [--reference N]
#   TRIALS        trials with the fake serve (default 24; at least 20 are needed for the issue's figure)
#   --reference N also N trials with the real reference serve gate (gates/reference-smoke.toml; needs the
#                 reference serve provisioned, ~10-20 s each)
# Environment: SERVEGATE_BIN (default: cargo build, then target/debug/servegate), KILL_LOOP_SEED (random seed).
# Exit 0 when nothing leaked and nothing is half-written, 1 otherwise. Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."

trials=24
reference=0
while [ $# -gt 0 ]; do
    case "$1" in
        --reference) reference="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) trials="$1"; shift ;;
    esac
done

if [ -z "${SERVEGATE_BIN:-}" ]; then
    cargo build --quiet --bin servegate
    SERVEGATE_BIN="$PWD/target/debug/servegate"
fi
RANDOM=${KILL_LOOP_SEED:-$$}
work=$(mktemp -d "${TMPDIR:-/tmp}/servegate-kill-loop.XXXXXX")
trap 'rm -rf "$work"' EXIT
runs="$work/runs"
serve_py="$PWD/tests/data/hostile/serves/hostile_serve.py"

# The fast gate: the fake serve answers three chunks 150 ms apart, 6 requests: about 1-3 s a run.
cat > "$work/fast.toml" <<EOF
[gate]
name = "kill-loop"
[serve]
command = ["python3", "-u", "$serve_py", "--port", "{port}", "--mode", "ok", "--delay-ms", "150"]
ready_timeout_s = 30
stop_grace_s = 2
[request]
model = "fake"
max_tokens = 8
timeout_s = 10
repeats = 6
prompts = ["What is the capital of France?"]
[assert.content]
[assert.known_answer]
matches = "(?i)paris"
EOF
sed "s#{gate_dir}/..#$PWD#g" gates/reference-smoke.toml > "$work/reference.toml"

alive() { # pid alive and not a zombie
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    [ "${s:0:1}" != "Z" ]
}

group_alive() { # any live process in process group $1
    python3 - "$1" <<'PY'
import os, sys
g = sys.argv[1]
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        s = open(f"/proc/{p}/stat").read()
    except OSError:
        continue
    f = s[s.rfind(")") + 2:].split()
    if f[2] == g and f[0] not in "ZX":
        sys.exit(0)
sys.exit(1)
PY
}

signals=(KILL TERM INT)
n=0; leaked=0; killed=0; finished=0
declare -A by_signal=()

one_trial() { # $1 gate file, $2 max delay in ms before the kill
    local gate="$1" max_ms="$2" sig delay pid
    sig=${signals[$((RANDOM % 3))]}
    delay=$((RANDOM % max_ms))
    "$SERVEGATE_BIN" run --quiet --runs "$runs" "$gate" > /dev/null 2>&1 &
    pid=$!
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    if kill -s "$sig" "$pid" 2>/dev/null; then
        killed=$((killed + 1))
        by_signal[$sig]=$(( ${by_signal[$sig]:-0} + 1 ))
    else
        finished=$((finished + 1))
    fi
    wait "$pid" 2>/dev/null || true
    n=$((n + 1))
}

t0=$(date +%s)
for _ in $(seq "$trials"); do one_trial "$work/fast.toml" 3500; done
for _ in $(seq "$reference"); do one_trial "$work/reference.toml" 15000; done

# Let PDEATHSIG and the watchdogs act, then look for anything left.
complete=0; incomplete=0; bad_files=0; serves=0
for run_json in "$runs"/*/*/run.json; do
    [ -e "$run_json" ] || continue
    dir=$(dirname "$run_json")
    status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$run_json" 2>/dev/null || echo unreadable)
    case "$status" in
        complete) complete=$((complete + 1)) ;;
        running) incomplete=$((incomplete + 1)) ;;
        *) echo "BAD: $run_json: status $status"; bad_files=$((bad_files + 1)) ;;
    esac
    for f in "$dir"/*.json; do
        python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null || { echo "BAD: half-written $f"; bad_files=$((bad_files + 1)); }
    done
    for f in "$dir"/*.jsonl; do
        [ -e "$f" ] || continue
        python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$f" 2>/dev/null || { echo "BAD: half-written $f"; bad_files=$((bad_files + 1)); }
    done
    spid=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["serve"].get("pid"); print(p or "")' "$run_json" 2>/dev/null || true)
    [ -n "$spid" ] || continue
    serves=$((serves + 1))
    gone=0
    for _ in $(seq 100); do # up to 10 s
        if ! alive "$spid" && ! group_alive "$spid"; then gone=1; break; fi
        sleep 0.1
    done
    if [ "$gone" = 0 ]; then
        echo "LEAKED: serve $spid of $dir is still running"
        leaked=$((leaked + 1))
        kill -s KILL -- "-$spid" 2>/dev/null || true
    fi
done
dirs=$(ls -d "$runs"/*/*/ 2>/dev/null | wc -l)
no_run_json=$((dirs - complete - incomplete - bad_files))
[ "$no_run_json" -ge 0 ] || no_run_json=0

echo "kill-loop: trials $n (fake serve $trials, reference $reference); killed $killed (SIGKILL ${by_signal[KILL]:-0}, SIGTERM ${by_signal[TERM]:-0}, SIGINT ${by_signal[INT]:-0}), finished before the signal $finished; $(( $(date +%s) - t0 )) s"
echo "kill-loop: evidence dirs $dirs: complete $complete, incomplete (status running) $incomplete, without run.json $no_run_json; serves started $serves"
echo "kill-loop: leaked: $leaked, half-written or bad files: $bad_files"
if [ "$leaked" -ne 0 ] || [ "$bad_files" -ne 0 ]; then
    exit 1
fi
