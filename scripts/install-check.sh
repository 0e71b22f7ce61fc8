#!/usr/bin/env bash
# The install from a clean clone (issue 32; docs/getting-started.md step 1), as CI can afford it.
#
# Clones this checkout's HEAD commit (committed work only) into a temporary directory, runs the documented
# `cargo install --locked --path .` there, and checks what was installed:
#   * `servegate --version` is `servegate VERSION (commit C)` with C the clone's commit (build.rs);
#   * `servegate completions bash|zsh|fish` each generate (bash's parses with `bash -n`), and `servegate man`
#     is a roff page (`.TH servegate 1`) carrying the same version line.
# Cheap by default: `--debug` (the dev profile CI has already built), into a temporary `--root`, with
# CARGO_TARGET_DIR the workspace's own target/ (the dependencies are not built again; only the two workspace
# crates are, because their sources are new files in a new place). `--release` installs exactly as the docs
# say (a full release build: minutes). `--git` also installs with the documented `--git` form, from the clone
# as a file:// URL (GitHub is not reachable from every machine that runs this); the entries it adds under
# $CARGO_HOME/git are removed afterwards (cargo names them after the URL's last part: the clone is `servegate`).
#
# The two workspace crates the install builds have the same artifact names as the workspace's own dev build
# (cargo names a path package's artifacts by its place in its workspace, which is the same in the clone), and
# cargo judges them fresh by modification times: left as they are, the workspace's next build could take the
# clone's (HEAD's) build for its own, uncommitted edits older than the install missing from it. So the script
# ends by deleting those crates' fingerprints (target/debug/.fingerprint/servegate-*): the workspace's next
# `cargo build`/`cargo test` compiles them again from its own sources (measured: 68 s). Run it last in CI.
# The clone lives at a fixed place, $CARGO_TARGET_DIR/install-check/servegate, so that `--git` (its URL names
# its artifacts) replaces its previous build instead of adding one per run.
#
# Measured on the shared 2-core machine, 2026-12-07, load average 12-16, CARGO_BUILD_JOBS=1, the workspace's
# debug build done: clone 5.5 s, `--path` install 108.9 s, `--git` install 75.6 s, the checks under 1 s
# each; 198.7 s in all with --git (a full dev build of the workspace took 528 s on the same machine).
#
# Usage: scripts/install-check.sh [--release] [--git]
# Prints one line per step with its seconds; exits non-zero naming the first check that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

profile=(--debug)
with_git=0
for a in "$@"; do
    case "$a" in
        --release) profile=() ;;
        --git) with_git=1 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "install-check: unknown argument '$a' (--release, --git)" >&2; exit 2 ;;
    esac
done

fail() { echo "install-check: FAILED: $*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

head=$(git rev-parse HEAD) || fail "not a git checkout"
short=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "install-check: note: uncommitted changes are not in the clone (it is HEAD, $short)"
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$src/target}
tmp=$CARGO_TARGET_DIR/install-check
rm -rf "$tmp"
mkdir -p "$tmp"
cargo_home=${CARGO_HOME:-$HOME/.cargo}
git_before=$(ls -d "$cargo_home"/git/db/servegate-* "$cargo_home"/git/checkouts/servegate-* 2>/dev/null || true)
cleanup() {
    rm -rf "$tmp"
    # The workspace's own crates are built again from its own sources next time (header).
    rm -rf "$CARGO_TARGET_DIR"/debug/.fingerprint/servegate-* "$CARGO_TARGET_DIR"/release/.fingerprint/servegate-*
    if [ "$with_git" = 1 ]; then   # only the entries this run added
        for d in "$cargo_home"/git/db/servegate-* "$cargo_home"/git/checkouts/servegate-*; do
            [ -e "$d" ] || continue
            grep -qxF "$d" <<<"$git_before" || rm -rf "$d"
        done
    fi
}
trap cleanup EXIT

mode=${profile[*]:-release}
mode=${mode#--}

t=$(now)
git init -q "$tmp/servegate"
git -C "$tmp/servegate" fetch -q "$src" HEAD
git -C "$tmp/servegate" checkout -q --detach FETCH_HEAD
[ "$(git -C "$tmp/servegate" rev-parse HEAD)" = "$head" ] || fail "the clone is not at $head"
echo "install-check: clean clone of $short: $(secs "$t") s"

# check BIN LABEL: the installed binary names the commit and generates completions and the man page.
check() {
    local bin=$1 label=$2
    [ -x "$bin" ] || fail "$label: no $bin after cargo install"
    local want="servegate $(grep -m1 '^version' "$tmp/servegate/Cargo.toml" | cut -d'"' -f2) (commit $short)"
    local got
    got=$("$bin" --version) || fail "$label: servegate --version exited non-zero"
    [ "$got" = "$want" ] || fail "$label: --version says '$got', expected '$want'"
    for shell in bash zsh fish; do
        "$bin" completions "$shell" > "$tmp/completions.$shell" || fail "$label: completions $shell"
        grep -q 'servegate' "$tmp/completions.$shell" || fail "$label: completions $shell name no servegate"
    done
    bash -n "$tmp/completions.bash" || fail "$label: bash -n refuses the bash completions"
    "$bin" man > "$tmp/servegate.1" || fail "$label: servegate man"
    grep -q '^\.TH servegate 1' "$tmp/servegate.1" || fail "$label: the man page has no .TH line"
    grep -qF "(commit $short)" "$tmp/servegate.1" || fail "$label: the man page lacks the version line"
    echo "install-check: $label: '$got'; completions bash, zsh, fish and the man page generate"
}

t=$(now)
(cd "$tmp/servegate" && cargo install --locked "${profile[@]}" --quiet --root "$tmp/root" --path .) \
    || fail "cargo install --locked --path . (from the clone)"
echo "install-check: cargo install --locked ${profile[*]} --path . (CARGO_TARGET_DIR=$CARGO_TARGET_DIR): $(secs "$t") s"
check "$tmp/root/bin/servegate" "--path"

if [ "$with_git" = 1 ]; then
    t=$(now)
    cargo install --locked "${profile[@]}" --quiet --root "$tmp/root-git" --git "file://$tmp/servegate" --rev "$head" servegate \
        || fail "cargo install --locked --git file://CLONE servegate"
    echo "install-check: cargo install --locked ${profile[*]} --git file://CLONE --rev $short servegate: $(secs "$t") s"
    check "$tmp/root-git/bin/servegate" "--git"
fi
echo "install-check: ok ($mode)"
