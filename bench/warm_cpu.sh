#!/usr/bin/env bash
# Warm vs fresh harness processes on the CPU (issue 16): `ksearch eval TASK --json --repeat N`
# with KSEARCH_WARM=0 (a fresh `python3 -m ksearch_harness` per evaluation) and KSEARCH_WARM=1
# (one warm server per process, forced on for a CPU backend), each in one ksearch process.
# Prints, per mode, the wall seconds of the first evaluation and the median of the later ones,
# with the harness's startup stage.
#
# Usage: bench/warm_cpu.sh KSEARCH_BIN [TASK] [SOLUTION] [N]   (defaults: the tiny softmax
#        fixture of the CLI tests, its seed, 8 evaluations)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1")
TASK=${2:-crates/cli/tests/fixtures/tiny_softmax}
SOLUTION=${3:-$TASK/seed.c}
N=${4:-8}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for mode in 0 1; do
  t0=$(date +%s%N)
  KSEARCH_WARM=$mode "$BIN" eval "$TASK" "$SOLUTION" --json --seed 1 --repeat "$N" \
    > "$WORK/warm$mode.jsonl" 2> "$WORK/warm$mode.log"
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 )) > "$WORK/warm$mode.ms"
done
python3 - "$WORK" "$N" <<'PY'
import json, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
print(f"| mode | evaluations | first wall s | later wall s (median) | first startup s | later startup s (median) | process total s |")
print("|---|---|---|---|---|---|---|")
for mode, name in (("0", "fresh (KSEARCH_WARM=0)"), ("1", "warm (KSEARCH_WARM=1)")):
    recs = []
    for line in open(f"{work}/warm{mode}.jsonl"):
        try:
            recs.append(json.loads(line))
        except ValueError:
            pass
    total = int(open(f"{work}/warm{mode}.ms").read()) / 1e3
    if not recs:
        print(f"| {name} | 0 | - | - | - | - | {total:.2f} |  (log: {open(f'{work}/warm{mode}.log').read()[-200:]!r})")
        continue
    walls = [r["wall_seconds"] for r in recs]
    starts = [r.get("stage_seconds", {}).get("startup", 0.0) for r in recs]
    statuses = {r["status"] for r in recs}
    later = lambda xs: statistics.median(xs[1:]) if len(xs) > 1 else float("nan")
    print(f"| {name} | {len(recs)} ({', '.join(sorted(statuses))}) | {walls[0]:.3f} | {later(walls):.3f} "
          f"| {starts[0]:.3f} | {later(starts):.3f} | {total:.2f} |")
PY
