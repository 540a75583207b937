#!/usr/bin/env bash
# The dashboard's comparison chart (best-so-far per run against rounds) of the given runs, as a
# standalone SVG: serves `ksearch dashboard RUN...` on a free port, fetches its page, keeps the
# first comparison chart's <svg> element.
# Usage: bench/strategies_chart.sh KSEARCH_BIN OUT.svg RUN_DIR...
set -euo pipefail
bin=$1; out=$2; shift 2
log=$(mktemp)
"$bin" dashboard "$@" --port 0 > "$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do
  addr=$(grep -o 'http://[0-9.:]*' "$log" | head -1 || true)
  [ -n "$addr" ] && break
  sleep 0.2
done
[ -n "${addr:-}" ] || { echo "the dashboard did not start:"; cat "$log"; exit 1; }
curl -s "$addr/" | python3 -c '
import re, sys
page = sys.stdin.read()
start = page.find("<svg", max(page.find("compar"), 0))
if start < 0:
    sys.exit("no chart in the dashboard page")
# The chart may nest an <svg> in its <svg>: take the element up to its own closing tag.
depth, i = 0, start
for m in re.finditer(r"<svg\b|</svg>", page[start:]):
    depth += 1 if m.group(0) == "<svg" else -1
    if depth == 0:
        i = start + m.end()
        break
svg = page[start:i]
if "xmlns=" not in svg[:300]:
    svg = svg.replace("<svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"", 1)
sys.stdout.write(svg)
' > "$out"
echo "$out: $(wc -c < "$out") bytes"
