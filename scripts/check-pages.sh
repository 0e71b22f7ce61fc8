#!/usr/bin/env bash
# Renders the committed HTML pages (docs/*.html) in headless Chromium (Debian's `chromium`), fails when a
# page logs anything to the console (the pages log nothing: any message is an error or an uncaught
# exception) or when a chart did not draw, and keeps a screenshot of each page under target/servegate/pages/.
#
# "Drew" (the leaderboard): the page runs a small check of its own (pages/templates/leaderboard.html, last
# <script>) that counts the <svg class="chart"> elements holding at least one mark (.mark) with a size on the
# page, and writes data-charts-drawn="N of M" on <html>; this script reads it from Chromium's --dump-dom and
# requires N = M > 0.
#
# "A state readable as text" (the conformance and coverage pages, issue 30): every table cell whose class is a
# state's (pass, fail, indeterminate, unsupported, not-run, expired..., verified, partial, not-loading,
# unknown) must say its state as a word (PASS, FAIL, INDETERMINATE, UNSUPPORTED, NOT RUN, EXPIRED, VERIFIED,
# PARTIAL, NOT-LOADING, UNKNOWN) in the DOM Chromium rendered, and hold no emoji or other pictograph
# (U+2190-U+2BFF arrows, symbols and dingbats, U+1F000 and up): Debian's Chromium has no emoji font and draws
# those as empty boxes, so a state shown by a glyph alone is no state at all (the ✅ the coverage page once
# showed). A page with no state cell fails too (nothing was checked).
#
# usage: scripts/check-pages.sh [PAGE.html...]
#        (default: pages/leaderboard.html pages/conformance.html pages/coverage.html)
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
[ ${#pages[@]} -gt 0 ] || pages=(pages/leaderboard.html pages/conformance.html pages/coverage.html)
# The state cells of a rendered page (stdin: Chromium's --dump-dom), each required to say its state as a word
# and to hold no pictograph. Prints "N state cells, each a word" or one line per bad cell; exit 1 on any.
STATES_CHECK=$(cat <<'PY'
import html.parser, re, sys
CLASSES = {"pass", "fail", "indeterminate", "unsupported", "not-run", "verified", "partial", "not-loading",
           "unknown"}
WORDS = re.compile(r"\b(PASS|FAIL|INDETERMINATE|UNSUPPORTED|NOT RUN|EXPIRED|VERIFIED|PARTIAL|NOT-LOADING|UNKNOWN)\b")
GLYPH = re.compile("[\u2190-\u2bff\U0001f000-\U0010ffff]")
class Cells(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.cur = [], None
    def handle_starttag(self, tag, attrs):
        cls = set((dict(attrs).get("class") or "").split())
        if tag == "td" and (cls & CLASSES or any(c.startswith("expired") for c in cls)):
            self.cur = [" ".join(sorted(cls)), ""]
    def handle_endtag(self, tag):
        if tag == "td" and self.cur is not None:
            self.cells.append(self.cur)
            self.cur = None
    def handle_data(self, data):
        if self.cur is not None:
            self.cur[1] += data
p = Cells()
p.feed(sys.stdin.read())
bad = []
for cls, text in p.cells:
    t = " ".join(text.split())
    if not WORDS.search(t):
        bad.append(f'a cell of class "{cls}" says no state word: {t!r}')
    elif GLYPH.search(t):
        bad.append(f'a cell of class "{cls}" holds a pictograph (an empty box without an emoji font): {t!r}')
if not p.cells:
    bad.append("no state cell on the page (no <td> with a state's class): nothing to check")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"{len(p.cells)} state cells, each a word")
PY
)
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
    if [ "$name" != leaderboard ]; then
        if states=$(printf '%s' "$dom" | python3 -c "$STATES_CHECK" 2>&1); then
            echo "check-pages: $page: $states"
        else
            echo "check-pages: $page: a state not readable as text:"
            printf '%s\n' "$states" | sed 's/^/  /'
            status=1
        fi
    fi
    drawn=$(printf '%s' "$dom" | grep -o 'data-charts-drawn="[0-9]* of [0-9]*"' | head -1 | grep -o '[0-9]* of [0-9]*' || true)
    if [ "$name" != leaderboard ]; then
        :
    elif [ -z "$drawn" ]; then
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
