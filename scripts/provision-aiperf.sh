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
MARKS=$CACHE/provisioned
MARK=$MARKS/aiperf
FAILED=$MARKS/aiperf.failed

NAME=aiperf
STAMP="aiperf==$AIPERF_VERSION"
PRINT_VAR=SERVEGATE_AIPERF_PYTHON
USING="-m aiperf (aiperf $AIPERF_VERSION)"
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

install_tool() {
    local py=$1 tmp=$2
    "$py" -m pip install --quiet "aiperf==$AIPERF_VERSION" >&2 || die "pip install aiperf==$AIPERF_VERSION failed"
    # It must start as servegate runs it: python -m aiperf.
    HOME=$tmp "$py" -m aiperf --version >&2 || die "aiperf==$AIPERF_VERSION installed but python -m aiperf does not start"
}

# shellcheck source=lib/provision-venv.sh
source "$here/lib/provision-venv.sh"
provision_venv
