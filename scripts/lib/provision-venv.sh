# Sourced by scripts/provision-aiperf.sh, scripts/provision-locust.sh, scripts/provision-guidellm.sh and
# scripts/provision-vllm.sh (not run on its own), after scripts/provision-common.sh: one pinned Python tool in
# a venv of its own under the cache, stamped, built under a temporary name and renamed into place, under a
# lock, with the failure marker that repeats a recent cause at once instead of retrying.
#
# The caller sets, before `provision_venv`:
#   NAME      the tool's name (aiperf): the lock $CACHE/.lock-NAME, the temporary $CACHE/.NAME-tmp.*, messages
#   STAMP     what the venv holds (aiperf==0.13.0): its stamp $VENV/.servegate-ok and the marker's first line
#   VENV      the venv ($CACHE/venv-aiperf-0.13.0); CACHE, BASE_PYTHON, RETRY_S, MARKS, MARK, FAILED as
#             provision-common.sh's callers do
#   PRINT_VAR the variable --print sets to the venv's python (SERVEGATE_AIPERF_PYTHON), for the default finish
#   USING     what the "python:" line says after the path ("-m aiperf (aiperf 0.13.0)"), for the default finish
# and defines:
#   install_tool PY TMP   installs the tool into the new venv whose python is PY (TMP: the temporary
#                         directory, for scratch files), checks it starts as servegate runs it; `die` on failure
#   tool_ok               (optional) a further check of a built venv (default: none)
#   finish                (optional) what a run that ends provisioned says (default: the "python:" line, and
#                         PRINT_VAR=... on stdout with --print)
#
# `provision_venv` is three steps, which a caller with more to provision than the venv runs itself, its own
# steps between them (scripts/provision-vllm.sh: the source model before the venv, float32 copies after):
#   provision_begin READY   exit 0 when READY (a command) holds and the marker is there; the failure window;
#                           the lock (waited for); the EXIT trap removing every directory in `tmpdirs`
#   build_venv              the venv, when `venv_ok` does not hold (the index probe first, unless
#                           `probe_index` already ran)
#   provision_done READY WHAT LINE...   READY must hold (else "WHAT does not check out"); the failure
#                           marker removed, the marker written (one LINE a line), finish

VENV_STAMP=$VENV/.servegate-ok

if ! declare -F tool_ok >/dev/null; then tool_ok() { true; }; fi

venv_ok() { [[ -x $VENV/bin/python && -f $VENV_STAMP && $(<"$VENV_STAMP") == "$STAMP" ]] && tool_ok; }

if ! declare -F finish >/dev/null; then
    finish() {
        log "python: $VENV/bin/python $USING"
        if ((print)); then echo "$PRINT_VAR=$VENV/bin/python"; fi
    }
fi

# The network first, within seconds: one index query with PY (pip download into DEST), no retries; `die`
# naming the cause when there is no route.
index_probed=0
probe_index() {
    local out
    if ! out=$("$1" -m pip download --quiet --no-deps --timeout 10 --retries 0 --dest "$2" pip 2>&1); then
        die "no route to the package index (pip download pip: $(tail -n 1 <<<"$out"))"
    fi
    index_probed=1
}

provision_begin() {
    local ready=$1
    if "$ready" && [[ -f $MARK ]]; then
        log "already provisioned in $CACHE"
        finish
        exit 0
    fi

    if ((!retry)) && [[ -f $FAILED ]]; then
        IFS=$'\t' read -r when cause <"$FAILED" || true
        if [[ -n ${when:-} ]] && (($(date +%s) - when < RETRY_S)); then
            echo "provision-$NAME: ERROR (failed $(($(date +%s) - when)) s ago, not retried; --retry to try again): $cause" >&2
            exit 1
        fi
    fi

    mkdir -p "$CACHE" "$MARKS"
    exec 9>"$CACHE/.lock-$NAME"
    if ! flock -n 9; then
        log "waiting for another provisioning run to finish (lock $CACHE/.lock-$NAME)"
        flock 9
        if "$ready" && [[ -f $MARK ]]; then finish; exit 0; fi
        if ((!retry)) && [[ -f $FAILED && ! -f $MARK ]]; then
            IFS=$'\t' read -r _ cause <"$FAILED" || true
            echo "provision-$NAME: ERROR (the concurrent run failed): ${cause:-see its output}" >&2
            exit 1
        fi
    fi
    # The lock is held: any temporary left here was abandoned by a run that was killed.
    rm -rf -- "$CACHE"/."$NAME"-tmp.*

    tmpdirs=()
    # if/then, not `[[ ]] && ...`: the trap's last status is the script's, and set -e (commit 0a92b32).
    cleanup() { local d; for d in "${tmpdirs[@]:-}"; do if [[ -n $d ]]; then rm -rf -- "$d"; fi; done; }
    trap cleanup EXIT
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off
}

build_venv() {
    if venv_ok; then return 0; fi
    rm -f -- "$MARK"
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    local t0=$SECONDS tmp py
    tmp=$(mktemp -d "$CACHE/.$NAME-tmp.XXXXXX")
    tmpdirs+=("$tmp")
    "$BASE_PYTHON" -m venv "$tmp/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    py=$tmp/venv/bin/python
    if ((!index_probed)); then probe_index "$py" "$tmp/probe"; fi
    install_tool "$py" "$tmp"
    echo "$STAMP" >"$tmp/venv/.servegate-ok"
    rm -rf -- "$VENV"
    mv -T -- "$tmp/venv" "$VENV"
    log "venv ready in $((SECONDS - t0)) s ($(du -sm "$VENV" | cut -f1) MB)"
}

provision_done() {
    local ready=$1 what=$2
    shift 2
    "$ready" || die "provisioning finished but $what does not check out"
    rm -f -- "$FAILED"
    printf '%s\n' "$@" >"$MARK.tmp.$$"
    mv -f -- "$MARK.tmp.$$" "$MARK"
    finish
}

provision_venv() {
    provision_begin venv_ok
    build_venv
    provision_done venv_ok "the venv" "$STAMP" "$VENV/bin/python"
}
