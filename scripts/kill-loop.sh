#!/usr/bin/env bash
# The random-kill loop (docs/reliability.md): start `servegate run` on a fast fake-serve gate, kill it with SIGKILL,
# SIGTERM or SIGINT at a random moment (during start-up, readiness, a request, the stop, or after), and check
# afterwards that
#   - no serve process remains (the serve's pid from run.json and its whole process group are gone),
#   - every evidence directory is either complete (run.json "status": "complete") or marked incomplete
#     ("status": "running"), and
#   - every .json file in it parses (no half-written file; writes are temp file + fsync + rename).
# Prints the figures: trials, leaked, incomplete dirs, complete dirs, bad files.
#
# With --mid-request N (kind 3 of docs/pass-is-proof.md: an interrupted run is interrupted), also N trials of each of three targets, each sent SIGTERM or SIGINT
# (alternately) at a random moment of a request (0-300 ms after the evidence shows request 0 ended, with 11
# requests of ~120 ms still to go): `servegate run --json`, the gates test binary run directly, and
# `cargo test --test gates` (the signal to cargo alone). Every such trial must end interrupted: a non-zero exit
# (exactly 128+signal for `servegate run` and the test binary), no `RESULT: PASS` / `test result: ok`, every
# run.json `interrupted` (never `complete`), no results JSON marking a gate passed, no serve left.
#
# Usage: scripts/kill-loop.sh [TRIALS] [--reference N] [--mid-request N]
#   TRIALS        trials with the fake serve (default 24; at least 20 are needed for the figure in docs/reliability.md)
#   --reference N also N trials with the real reference serve gate (gates/reference-smoke.toml; needs the
#                 reference serve provisioned, ~10-20 s each)
#   --mid-request N  N mid-request SIGTERM/SIGINT trials per target (CI: 50; about 1-2 s each). For cargo,
#                 in turn: SIGTERM to cargo alone, SIGINT to cargo alone, SIGINT to its process group (Ctrl-C).
# Environment: SERVEGATE_BIN (default: cargo build, then target/debug/servegate), KILL_LOOP_SEED (random seed).
# Exit 0 when nothing leaked and nothing is half-written, 1 otherwise. Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."

trials=24
reference=0
mid=0
while [ $# -gt 0 ]; do
    case "$1" in
        --reference) reference="$2"; shift 2 ;;
        --mid-request) mid="$2"; shift 2 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
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
# The fake serve: `servegate scripted-serve` (src/replay/scripted.rs) answering "Paris", ".", "" 150 ms
# apart (then the finish, usage and [DONE]; the body ended by closing), exiting 0 on SIGTERM.
cat > "$work/ok.json" <<'EOF'
{"reply": {"stream": true, "framing": "close", "role_chunk": false, "tokens": ["Paris", ".", ""],
           "first_token_ms": 150, "token_ms": 150, "prompt_tokens": 3},
 "term": {"exit": {"code": 0}}}
EOF

# The fast gate: the fake serve answers three chunks 150 ms apart, 6 requests: about 1-3 s a run.
cat > "$work/fast.toml" <<EOF
[gate]
name = "kill-loop"
[serve]
command = ["$SERVEGATE_BIN", "scripted-serve", "--script", "$work/ok.json", "--port", "{port}"]
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
        interrupted) incomplete=$((incomplete + 1)) ;;
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
dirs=$( (ls -d "$runs"/*/*/ 2>/dev/null || true) | wc -l)
no_run_json=$((dirs - complete - incomplete - bad_files))
[ "$no_run_json" -ge 0 ] || no_run_json=0

echo "kill-loop: trials $n (fake serve $trials, reference $reference); killed $killed (SIGKILL ${by_signal[KILL]:-0}, SIGTERM ${by_signal[TERM]:-0}, SIGINT ${by_signal[INT]:-0}), finished before the signal $finished; $(( $(date +%s) - t0 )) s"
echo "kill-loop: evidence dirs $dirs: complete $complete, incomplete (status running or interrupted) $incomplete, without run.json $no_run_json; serves started $serves"
echo "kill-loop: leaked: $leaked, half-written or bad files: $bad_files"
failed=0
if [ "$leaked" -ne 0 ] || [ "$bad_files" -ne 0 ]; then
    failed=1
fi

# ---- mid-request SIGTERM / SIGINT (kind 3 of docs/pass-is-proof.md) ----------------------------------------------------
if [ "$mid" -gt 0 ]; then
    mkdir -p "$work/midgates"
    # 12 requests of ~120 ms against the synthetic serve: ~1.5 s a run.
    cat > "$work/midgates/mid.toml" <<EOF
[gate]
name = "mid"
[serve]
command = ["servegate", "replay", "--synthetic", "--tokens", "10", "--ttft-ms", "20", "--tok-s", "100", "--port", "{port}"]
ready_timeout_s = 30
stop_grace_s = 2
[request]
model = "synthetic"
max_tokens = 10
prompts = ["hi"]
repeats = 12
[assert.rate]
floor_tok_s = 1.0
EOF
    export PATH="$(dirname "$SERVEGATE_BIN"):$PATH"
    gates_bin=$(cargo test --no-run --test gates --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gates":
        print(m["executable"])')
    [ -x "$gates_bin" ] || { echo "kill-loop: cannot find the gates test binary"; exit 1; }
    mid_false=0
    declare -A mid_tries=() mid_codes=()
    mid_trial() { # $1 target (run|bin|cargo), $2 signal (TERM|INT)
        local target="$1" sig="$2" t="$work/mid-$1-$mid_n" pid rc want status delay_ms
        mkdir -p "$t"
        case "$target" in
            run) "$SERVEGATE_BIN" run --quiet --runs "$t/runs" --json "$t/results.json" "$work/midgates/mid.toml" > "$t/out" 2>&1 & ;;
            bin) SERVEGATE_GATES="$work/midgates" SERVEGATE_RUNS="$t/runs" SERVEGATE_JSON="$t/results.json" \
                    "$gates_bin" > "$t/out" 2>&1 & ;;
            # cargo in its own session with SIGINT at its default (a background job of a script inherits
            # it ignored), so that a group SIGINT is what a Ctrl-C in a terminal does.
            cargo*) SERVEGATE_GATES="$work/midgates" SERVEGATE_RUNS="$t/runs" SERVEGATE_JSON="$t/results.json" \
                    python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
                    cargo test -q --test gates > "$t/out" 2>&1 & ;;
        esac
        pid=$!
        for _ in $(seq 1200); do # up to 60 s for request 0 to end
            [ -s "$(ls "$t"/runs/mid/*/requests.jsonl 2>/dev/null | head -1)" ] && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        delay_ms=$((RANDOM % 300))
        sleep "0.$(printf '%03d' "$delay_ms")"
        if [ "$target" = cargo-ctrl-c ]; then
            kill -s "$sig" -- "-$pid" 2>/dev/null || true # the whole group: cargo and its test binary
        else
            kill -s "$sig" "$pid" 2>/dev/null || true
        fi
        set +e; wait "$pid"; rc=$?; set -e
        [ "$sig" = TERM ] && want=143 || want=130
        mid_codes[$target-$sig-$rc]=$(( ${mid_codes[$target-$sig-$rc]:-0} + 1 ))
        local bad=""
        if [ "$rc" -eq 0 ]; then bad="$bad exit 0;"; fi
        if [ "$rc" -ne "$want" ]; then bad="$bad exit $rc, not $want;"; fi
        if grep -q -e 'RESULT: PASS' -e 'test result: ok' "$t/out"; then bad="$bad printed a pass;"; fi
        # With cargo alone signalled, its test binary notices and ends: give it time to write run.json.
        local run_json=""
        for _ in $(seq 200); do
            run_json=$(ls "$t"/runs/mid/*/run.json 2>/dev/null | head -1)
            status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$run_json" 2>/dev/null || echo none)
            [ "$status" = running ] || break
            sleep 0.05
        done
        [ "$status" = interrupted ] || bad="$bad run.json status $status;"
        if [ -e "$t/results.json" ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if any(g.get("status")=="passed" for g in d.get("gates",[])) else 1)' "$t/results.json"; then
            bad="$bad results.json marks a gate passed;"
        fi
        local spid
        spid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serve"].get("pid") or "")' "$run_json" 2>/dev/null || true)
        if [ -n "$spid" ]; then
            for _ in $(seq 100); do alive "$spid" || break; sleep 0.1; done
            if alive "$spid"; then bad="$bad serve $spid left running;"; kill -s KILL -- "-$spid" 2>/dev/null || true; fi
        fi
        if [ -n "$bad" ]; then
            echo "FALSE PASS or LEAK ($target, SIG$sig, try $mid_n):$bad"; sed 's/^/    /' "$t/out" | tail -5
            mid_false=$((mid_false + 1))
            cp -r "$t" "${KILL_LOOP_KEEP:-/tmp}/servegate-kill-loop-failed-$target-$mid_n-$$" 2>/dev/null || true
        fi
        mid_tries[${target%-ctrl-c}]=$(( ${mid_tries[${target%-ctrl-c}]:-0} + 1 ))
        rm -rf "$t"
    }
    # cargo: SIGTERM to cargo alone, SIGINT to cargo alone, SIGINT to its process group (Ctrl-C), in turn.
    for target in ${KILL_LOOP_TARGETS:-run bin cargo}; do
        t1=$(date +%s%N)
        for mid_n in $(seq "$mid"); do
            case "$target-$((mid_n % 3))-$((mid_n % 2))" in
                cargo-0-*) mid_trial cargo TERM ;;
                cargo-1-*) mid_trial cargo INT ;;
                cargo-2-*) mid_trial cargo-ctrl-c INT ;;
                *-0) mid_trial "$target" TERM ;;
                *) mid_trial "$target" INT ;;
            esac
        done
        t2=$(date +%s%N)
        echo "kill-loop: mid-request $target: ${mid_tries[$target]} tries in $(( (t2 - t1) / 1000000000 )) s"
    done
    codes=""
    for k in $(printf '%s\n' "${!mid_codes[@]}" | sort); do codes="$codes $k:${mid_codes[$k]}"; done
    echo "kill-loop: mid-request exit codes (target-signal-code:count):$codes"
    echo "kill-loop: mid-request false passes or leaks: $mid_false"
    [ "$mid_false" -eq 0 ] || failed=1
fi
exit "$failed"
