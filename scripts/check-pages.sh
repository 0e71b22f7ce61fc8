#!/usr/bin/env bash
# Renders the committed HTML pages (docs/*.html) in headless Chromium (Debian's `chromium`), fails when a
# page logs anything to the console (the pages log nothing: any message is an error or an uncaught
# exception) or when a chart did not draw, and keeps a screenshot of each page under target/servegate/pages/.
#
# "Drew": each page runs a small check of its own (pages/templates/leaderboard.html, last <script>) that counts the
# <svg class="chart"> elements holding at least one mark (.mark) with a size on the page, and writes
# data-charts-drawn="N of M" on <html>; this script reads it from Chromium's --dump-dom and requires N = M > 0.
#
# usage: scripts/check-pages.sh [PAGE.html...]   (default: pages/leaderboard.html)
set -euo pipefail
cd "$(dirname "$0")/.."
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
    echo "check-pages: no chromium (Debian: apt-get install chromium)" >&2
    exit 2
fi
out=target/servegate/pages
mkdir -p "$out"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# --no-sandbox: CI containers run as root; --user-data-dir: a throwaway profile; --virtual-time-budget: let the
# page's scripts run to completion before the DOM is dumped or the screenshot taken.
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile"
       --virtual-time-budget=3000 --enable-logging=stderr --v=0)
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(pages/leaderboard.html)
status=0
for page in "${pages[@]}"; do
    name=$(basename "$page" .html)
    url="file://$(realpath "$page")"
    dom=$(timeout 120 "$CHROMIUM" "${flags[@]}" --dump-dom "$url" 2>"$out/$name.console.log") || {
        echo "check-pages: $page: chromium failed (see $out/$name.console.log)"; status=1; continue; }
    if grep -q ':CONSOLE' "$out/$name.console.log"; then
        echo "check-pages: $page: console messages:"
        grep ':CONSOLE' "$out/$name.console.log" | sed 's/^/  /'
        status=1
    fi
    drawn=$(printf '%s' "$dom" | grep -o 'data-charts-drawn="[0-9]* of [0-9]*"' | head -1 | grep -o '[0-9]* of [0-9]*' || true)
    if [ -z "$drawn" ]; then
        echo "check-pages: $page: the page's chart check did not run (no data-charts-drawn)"
        status=1
    else
        n=${drawn%% of *}; m=${drawn##* of }
        if [ "$m" -eq 0 ] || [ "$n" -ne "$m" ]; then
            empty=$(printf '%s' "$dom" | grep -o 'data-charts-empty="[^"]*"' | head -1)
            echo "check-pages: $page: $drawn charts drew marks ($empty)"
            status=1
        else
            echo "check-pages: $page: $drawn charts drew marks, no console message"
        fi
    fi
    timeout 120 "$CHROMIUM" "${flags[@]}" --window-size=1400,2400 --screenshot="$out/$name.png" "$url" \
        2>>"$out/$name.console.log" >/dev/null || { echo "check-pages: $page: no screenshot"; status=1; continue; }
    echo "check-pages: screenshot $out/$name.png"
done
exit $status
