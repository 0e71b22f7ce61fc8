# Sourced by scripts/provision-lcp.sh and scripts/provision-vllm.sh (not run on its own): the arguments both
# take, their log and failure lines, and the failure marker that repeats a cause at once instead of retrying
# for $SERVEGATE_PROVISION_RETRY_S seconds. The caller sets NAME (lcp, vllm), MARKS and FAILED first.

print=0
retry=0
ref_args=()   # passed to scripts/provision-reference.sh (--second-model: the matrix gates' second model)
for arg in "$@"; do
    case $arg in
        --print) print=1 ;;
        --retry) retry=1 ;;
        --second-model) ref_args+=(--second-model) ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "provision-$NAME: unknown argument: $arg" >&2; exit 2 ;;
    esac
done

log() { echo "provision-$NAME: $*" >&2; }
die() {
    echo "provision-$NAME: ERROR: $*" >&2
    mkdir -p "$MARKS"
    printf '%s\t%s\n' "$(date +%s)" "$*" >"$FAILED.tmp.$$" && mv -f "$FAILED.tmp.$$" "$FAILED"
    exit 1
}
