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
MARKS=$CACHE/provisioned
MARK=$MARKS/locust
FAILED=$MARKS/locust.failed

NAME=locust
STAMP="locust==$LOCUST_VERSION"
PRINT_VAR=SERVEGATE_LOCUST_PYTHON
USING="(locust $LOCUST_VERSION)"
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

install_tool() {
    local py=$1 tmp=$2
    "$py" -m pip install --quiet "locust==$LOCUST_VERSION" >&2 || die "pip install locust==$LOCUST_VERSION failed"
    # The locustfile must import under this Locust (its events, runners and message API).
    (cd "$tmp" && "$py" -c "import importlib.util as u, sys; s = u.spec_from_file_location('lf', sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); import locust; sys.stderr.write('provision-locust: locust %s imports the locustfile\n' % locust.__version__)" \
        "$here/locust/servegate_locustfile.py") || die "servegate's locustfile does not import under locust==$LOCUST_VERSION"
}

# shellcheck source=lib/provision-venv.sh
source "$here/lib/provision-venv.sh"
provision_venv
