#!/usr/bin/env bash
# Provision AIPerf for `[load] driver = "aiperf"` (docs/load.md, "Drivers"):
#   - a venv with aiperf==0.13.0 from PyPI (the release the peers bench pins and tests/data/import/aiperf-c2
#     was written by), and a check that its `aiperf` command starts.
#
# Everything is cached OUTSIDE the checkout, in ${SERVEGATE_CACHE:-$HOME/.cache/servegate}: the venv
# $CACHE/venv-aiperf-0.13.0, whose python servegate runs AIPerf with (`python -m aiperf`, or
# $SERVEGATE_AIPERF_PYTHON; the venv's console scripts name the temporary path it was built under). Idempotent, safe to
# run concurrently (flock on $CACHE/.lock-aiperf; the venv is built under a temporary name and renamed into
# place). On success it writes the marker $CACHE/provisioned/aiperf.
#
# A failure is reported ONCE: its cause goes to $CACHE/provisioned/aiperf.failed, and a run within
# $SERVEGATE_PROVISION_RETRY_S seconds (default 900) repeats that cause at once; --retry tries again.
#
# Usage: scripts/provision-aiperf.sh [--print] [--retry]
#   --print   print SERVEGATE_AIPERF_PYTHON=... on stdout
#   --retry   ignore a recent failure marker
# Environment: SERVEGATE_CACHE, SERVEGATE_PYTHON (base interpreter, default python3, >= 3.10), PyPI access.
set -euo pipefail

AIPERF_VERSION=0.13.0   # servegate::io::aiperf::AIPERF_VERSION names the same release

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SERVEGATE_CACHE:-$HOME/.cache/servegate}
BASE_PYTHON=${SERVEGATE_PYTHON:-python3}
RETRY_S=${SERVEGATE_PROVISION_RETRY_S:-900}
VENV=$CACHE/venv-aiperf-$AIPERF_VERSION
VENV_STAMP=$VENV/.servegate-ok
MARKS=$CACHE/provisioned
MARK=$MARKS/aiperf
FAILED=$MARKS/aiperf.failed

NAME=aiperf
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

venv_ok() { [[ -x $VENV/bin/python && -f $VENV_STAMP && $(<"$VENV_STAMP") == "aiperf==$AIPERF_VERSION" ]]; }

finish() {
    log "python: $VENV/bin/python -m aiperf (aiperf $AIPERF_VERSION)"
    if ((print)); then echo "SERVEGATE_AIPERF_PYTHON=$VENV/bin/python"; fi
}

if venv_ok && [[ -f $MARK ]]; then
    log "already provisioned in $CACHE"
    finish
    exit 0
fi

if ((!retry)) && [[ -f $FAILED ]]; then
    IFS=$'\t' read -r when cause <"$FAILED" || true
    if [[ -n ${when:-} ]] && (($(date +%s) - when < RETRY_S)); then
        echo "provision-aiperf: ERROR (failed $(($(date +%s) - when)) s ago, not retried; --retry to try again): $cause" >&2
        exit 1
    fi
fi

mkdir -p "$CACHE" "$MARKS"
exec 9>"$CACHE/.lock-aiperf"
if ! flock -n 9; then
    log "waiting for another provisioning run to finish (lock $CACHE/.lock-aiperf)"
    flock 9
    if venv_ok && [[ -f $MARK ]]; then finish; exit 0; fi
fi
rm -rf -- "$CACHE"/.aiperf-tmp.*

tmp=
cleanup() { [[ -n $tmp ]] && rm -rf -- "$tmp"; }
trap cleanup EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

if ! venv_ok; then
    rm -f -- "$MARK"
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    t0=$SECONDS
    tmp=$(mktemp -d "$CACHE/.aiperf-tmp.XXXXXX")
    "$BASE_PYTHON" -m venv "$tmp/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    py=$tmp/venv/bin/python
    # The network first, within seconds: one index query, no retries.
    if ! out=$("$py" -m pip download --quiet --no-deps --timeout 10 --retries 0 --dest "$tmp/probe" pip 2>&1); then
        die "no route to the package index (pip download pip: $(tail -n 1 <<<"$out"))"
    fi
    "$py" -m pip install --quiet "aiperf==$AIPERF_VERSION" >&2 || die "pip install aiperf==$AIPERF_VERSION failed"
    # It must start as servegate runs it: python -m aiperf.
    HOME=$tmp "$py" -m aiperf --version >&2 || die "aiperf==$AIPERF_VERSION installed but python -m aiperf does not start"
    echo "aiperf==$AIPERF_VERSION" >"$tmp/venv/.servegate-ok"
    rm -rf -- "$VENV"
    mv -T -- "$tmp/venv" "$VENV"
    log "venv ready in $((SECONDS - t0)) s ($(du -sm "$VENV" | cut -f1) MB)"
fi

venv_ok || die "provisioning finished but the venv does not check out"
rm -f -- "$FAILED"
printf 'aiperf==%s\n%s\n' "$AIPERF_VERSION" "$VENV/bin/python" >"$MARK.tmp.$$"
mv -f -- "$MARK.tmp.$$" "$MARK"
finish
