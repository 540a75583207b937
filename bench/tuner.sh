#!/usr/bin/env bash
# The knob tuner (world model) against random search and the exhaustive grid, at equal
# evaluation budgets: best speedup found vs evaluations spent, on a task's kernel template.
# Target (matmul): the tuner reaches 90% of the grid's best speedup with a third of the grid's
# evaluations.
#
# Usage: bench/tuner.sh [TASK] [RANDOM_REPEATS]    (defaults: matmul, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
task=${1:-matmul}
repeats=${2:-3}
cargo build --release -q -p ksearch-cli
bin=$PWD/target/release/ksearch
out=$(mktemp -d)
"$bin" sweep "$task" --grid --json --seed 1 >"$out/grid.json"
grid_n=$(python3 -c "import json;print(len(json.load(open('$out/grid.json'))['evaluations']))")
budget=$(( (grid_n + 2) / 3 ))
echo "grid: $grid_n valid assignments; equal budget for the others: $budget evaluations" >&2
for r in $(seq 1 "$repeats"); do
  "$bin" sweep "$task" --random "$budget" --json --seed "$r" >"$out/random-$r.json"
  # The tuner's seed (the all-defaults assignment) is its first evaluation: budget-1 rounds.
  (cd "$out" && XDG_CONFIG_HOME="$out" "$bin" run "$task" --brain tuner --rounds $((budget - 1)) --seed "$r" \
      --out "$out/tuner-$r" --json >/dev/null)
  "$bin" show "$out/tuner-$r" --json >"$out/tuner-$r.json"
done
python3 - "$out" "$repeats" "$task" "$budget" <<'PY'
import json, sys, statistics
out, repeats, task, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
grid = json.load(open(f"{out}/grid.json"))
def curve(speedups):
    best, c = None, []
    for s in speedups:
        if s is not None:
            best = s if best is None else max(best, s)
        c.append(best)
    return c
grid_curve = curve([e["speedup"] for e in grid["evaluations"]])
grid_best = grid_curve[-1]
def to90(c):
    for i, b in enumerate(c):
        if b is not None and b >= 0.9 * grid_best:
            return i + 1
    return None
rows = [("grid (exhaustive)", len(grid_curve), grid_best, to90(grid_curve))]
for name, load in [("random", lambda r: [e["speedup"] for e in json.load(open(f"{out}/random-{r}.json"))["evaluations"]]),
                   ("tuner (world model)", lambda r: [c["speedup"] for c in json.load(open(f"{out}/tuner-{r}.json"))["candidates"]])]:
    for r in range(1, repeats + 1):
        c = curve(load(r))[:budget]
        rows.append((f"{name}, seed {r}", len(c), c[-1], to90(c)))
print(f"task {task}: grid best {grid_best:.3f}x over the NumPy reference; budget {budget} evaluations (a third of the grid)")
print()
print("| method | evaluations | best speedup | % of grid best | evaluations to reach 90% of grid best |")
print("|---|---|---|---|---|")
for name, n, best, t90 in rows:
    pct = 100 * best / grid_best if best else 0
    print(f"| {name} | {n} | {best:.3f}x | {pct:.0f}% | {t90 if t90 else 'not reached'} |")
PY
rm -rf "$out"
