#!/usr/bin/env bash
# Provision Locust for `[load] driver = "locust"` (docs/load.md, "Drivers"):
#   - a venv with locust==2.47.0 from PyPI (and its dependencies: gevent, pyzmq, ...), the release
#     servegate's locustfile (scripts/locust/servegate_locustfile.py) is written and tested against;
#   - a check that the locustfile imports under it.
#
# Everything is cached OUTSIDE the checkout, in ${SERVEGATE_CACHE:-$HOME/.cache/servegate}: the venv
# $CACHE/venv-locust-2.47.0, whose python servegate runs (or $SERVEGATE_LOCUST_PYTHON). Idempotent (a second
# run finds its stamp and returns at once), safe to run concurrently (flock on $CACHE/.lock-locust; the venv
# is built under a temporary name and renamed into place). On success it writes the marker
# $CACHE/provisioned/locust. Measured: 48 s and 85 MB from a cold cache on this project's shared 2-core VM.
#
# A failure is reported ONCE: its cause goes to $CACHE/provisioned/locust.failed, and a run within
# $SERVEGATE_PROVISION_RETRY_S seconds (default 900) repeats that cause at once; --retry tries again.
#
# Usage: scripts/provision-locust.sh [--print] [--retry]
#   --print   print SERVEGATE_LOCUST_PYTHON=... on stdout
#   --retry   ignore a recent failure marker
# Environment: SERVEGATE_CACHE, SERVEGATE_PYTHON (base interpreter, default python3, >= 3.10), PyPI access.
set -euo pipefail

LOCUST_VERSION=2.47.0   # servegate_core::evidence::locust::LOCUST_VERSION names the same release

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SERVEGATE_CACHE:-$HOME/.cache/servegate}
BASE_PYTHON=${SERVEGATE_PYTHON:-python3}
RETRY_S=${SERVEGATE_PROVISION_RETRY_S:-900}
VENV=$CACHE/venv-locust-$LOCUST_VERSION
VENV_STAMP=$VENV/.servegate-ok
MARKS=$CACHE/provisioned
MARK=$MARKS/locust
FAILED=$MARKS/locust.failed

NAME=locust
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

venv_ok() { [[ -x $VENV/bin/python && -f $VENV_STAMP && $(<"$VENV_STAMP") == "locust==$LOCUST_VERSION" ]]; }

finish() {
    log "python: $VENV/bin/python (locust $LOCUST_VERSION)"
    if ((print)); then echo "SERVEGATE_LOCUST_PYTHON=$VENV/bin/python"; fi
}

if venv_ok && [[ -f $MARK ]]; then
    log "already provisioned in $CACHE"
    finish
    exit 0
fi

if ((!retry)) && [[ -f $FAILED ]]; then
    IFS=$'\t' read -r when cause <"$FAILED" || true
    if [[ -n ${when:-} ]] && (($(date +%s) - when < RETRY_S)); then
        echo "provision-locust: ERROR (failed $(($(date +%s) - when)) s ago, not retried; --retry to try again): $cause" >&2
        exit 1
    fi
fi

mkdir -p "$CACHE" "$MARKS"
exec 9>"$CACHE/.lock-locust"
if ! flock -n 9; then
    log "waiting for another provisioning run to finish (lock $CACHE/.lock-locust)"
    flock 9
    if venv_ok && [[ -f $MARK ]]; then finish; exit 0; fi
fi
rm -rf -- "$CACHE"/.locust-tmp.*

tmp=
cleanup() { [[ -n $tmp ]] && rm -rf -- "$tmp"; }
trap cleanup EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

if ! venv_ok; then
    rm -f -- "$MARK"
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    t0=$SECONDS
    tmp=$(mktemp -d "$CACHE/.locust-tmp.XXXXXX")
    "$BASE_PYTHON" -m venv "$tmp/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    py=$tmp/venv/bin/python
    # The network first, within seconds: one index query, no retries.
    if ! out=$("$py" -m pip download --quiet --no-deps --timeout 10 --retries 0 --dest "$tmp/probe" pip 2>&1); then
        die "no route to the package index (pip download pip: $(tail -n 1 <<<"$out"))"
    fi
    "$py" -m pip install --quiet "locust==$LOCUST_VERSION" >&2 || die "pip install locust==$LOCUST_VERSION failed"
    # The locustfile must import under this Locust (its events, runners and message API).
    (cd "$tmp" && "$py" -c "import importlib.util as u, sys; s = u.spec_from_file_location('lf', sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); import locust; sys.stderr.write('provision-locust: locust %s imports the locustfile\n' % locust.__version__)" \
        "$here/locust/servegate_locustfile.py") || die "servegate's locustfile does not import under locust==$LOCUST_VERSION"
    echo "locust==$LOCUST_VERSION" >"$tmp/venv/.servegate-ok"
    rm -rf -- "$VENV"
    mv -T -- "$tmp/venv" "$VENV"
    log "venv ready in $((SECONDS - t0)) s ($(du -sm "$VENV" | cut -f1) MB)"
fi

venv_ok || die "provisioning finished but the venv does not check out"
rm -f -- "$FAILED"
printf 'locust==%s\n%s\n' "$LOCUST_VERSION" "$VENV/bin/python" >"$MARK.tmp.$$"
mv -f -- "$MARK.tmp.$$" "$MARK"
finish
