# Sourced by scripts/provision-aiperf.sh, scripts/provision-locust.sh and scripts/provision-guidellm.sh (not
# run on its own), after scripts/provision-common.sh: one pinned Python tool in a venv of its own under the
# cache, stamped, built under a temporary name and renamed into place, under a lock, with the failure marker
# that repeats a recent cause at once instead of retrying.
#
# The caller sets, before `provision_venv`:
#   NAME      the tool's name (aiperf): the lock $CACHE/.lock-NAME, the temporary $CACHE/.NAME-tmp.*, messages
#   STAMP     what the venv holds (aiperf==0.13.0): its stamp $VENV/.servegate-ok and the marker's first line
#   VENV      the venv ($CACHE/venv-aiperf-0.13.0); CACHE, BASE_PYTHON, RETRY_S, MARKS, MARK, FAILED as
#             provision-common.sh's callers do
#   PRINT_VAR the variable --print sets to the venv's python (SERVEGATE_AIPERF_PYTHON)
#   USING     what the "python:" line says after the path ("-m aiperf (aiperf 0.13.0)")
# and defines:
#   install_tool PY TMP   installs the tool into the new venv whose python is PY (TMP: the temporary
#                         directory, for scratch files), checks it starts as servegate runs it; `die` on failure
#   tool_ok               (optional) a further check of a built venv (default: none)

VENV_STAMP=$VENV/.servegate-ok

if ! declare -F tool_ok >/dev/null; then tool_ok() { true; }; fi

venv_ok() { [[ -x $VENV/bin/python && -f $VENV_STAMP && $(<"$VENV_STAMP") == "$STAMP" ]] && tool_ok; }

finish() {
    log "python: $VENV/bin/python $USING"
    if ((print)); then echo "$PRINT_VAR=$VENV/bin/python"; fi
}

provision_venv() {
    if venv_ok && [[ -f $MARK ]]; then
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
        if venv_ok && [[ -f $MARK ]]; then finish; exit 0; fi
    fi
    rm -rf -- "$CACHE"/."$NAME"-tmp.*

    tmp=
    cleanup() { if [[ -n $tmp ]]; then rm -rf -- "$tmp"; fi; }
    trap cleanup EXIT
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

    if ! venv_ok; then
        rm -f -- "$MARK"
        command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
        t0=$SECONDS
        tmp=$(mktemp -d "$CACHE/.$NAME-tmp.XXXXXX")
        "$BASE_PYTHON" -m venv "$tmp/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
        py=$tmp/venv/bin/python
        # The network first, within seconds: one index query, no retries.
        if ! out=$("$py" -m pip download --quiet --no-deps --timeout 10 --retries 0 --dest "$tmp/probe" pip 2>&1); then
            die "no route to the package index (pip download pip: $(tail -n 1 <<<"$out"))"
        fi
        install_tool "$py" "$tmp"
        echo "$STAMP" >"$tmp/venv/.servegate-ok"
        rm -rf -- "$VENV"
        mv -T -- "$tmp/venv" "$VENV"
        log "venv ready in $((SECONDS - t0)) s ($(du -sm "$VENV" | cut -f1) MB)"
    fi

    venv_ok || die "provisioning finished but the venv does not check out"
    rm -f -- "$FAILED"
    printf '%s\n%s\n' "$STAMP" "$VENV/bin/python" >"$MARK.tmp.$$"
    mv -f -- "$MARK.tmp.$$" "$MARK"
    finish
}
