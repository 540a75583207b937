#!/usr/bin/env bash
# The knob tuner (world model) against random search and the exhaustive grid, at equal
# evaluation budgets: best speedup found vs evaluations spent, on a task's kernel template.
# Target (matmul): the tuner reaches 90% of the grid's best speedup with a third of the grid's
# evaluations.
#
# Usage: bench/tuner.sh [--bin KSEARCH] [--keep DIR] [--parallel GRID_SIZE] [TASK] [REPEATS]
#        (defaults: matmul, 3)
#   --bin       a ksearch binary (default: build the release binary with cargo)
#   --keep      keep the raw records (grid, random and tuner JSON, the tuner's run directories) in DIR
#   --parallel  run the grid, the random searches and the tuner runs at once, each on its own
#               device lock (for a machine with cores to spare); GRID_SIZE is the number of valid
#               assignments (crates/search/tests/cpu_templates_build.rs prints it), which fixes
#               the budget before the grid has run. Timings then share the machine's memory
#               system; each speedup is still candidate against reference within one evaluation.
# Every method is scored by the best speedup over the task's reference among the candidates it
# evaluated; the grid evaluates every valid assignment, random search and the tuner a third of
# that. The table gives each method's best so far after 10%, 25%, 50% and 100% of that budget,
# as a share of the grid's best, and how many evaluations it needed to reach 90% of it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="" keep="" grid_size=""
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$(realpath "$2"); shift 2 ;;
    --keep) keep=$(realpath -m "$2"); shift 2 ;;
    --parallel) grid_size=$2; shift 2 ;;
    *) break ;;
  esac
done
task=${1:-matmul}
repeats=${2:-3}
[ -e "$task" ] && task=$(realpath "$task")  # a task folder: the tuner runs from the output folder
if [ -z "$bin" ]; then
  cargo build --release -q -p ksearch-cli
  bin=$PWD/target/release/ksearch
fi
out=${keep:-$(mktemp -d)}
mkdir -p "$out"
started=$(date +%s)
tune() {  # tune SEED: the tuner's run; its seed (the all-defaults assignment) is its first evaluation
  (cd "$out" && XDG_CONFIG_HOME="$out" "$bin" run "$task" --brain tuner --rounds $((budget - 1)) --seed "$1" \
      --out "$out/tuner-$1" --json >/dev/null)
  "$bin" show "$out/tuner-$1" --json >"$out/tuner-$1.json"
}
if [ -n "$grid_size" ]; then
  budget=$(( (grid_size + 2) / 3 ))
  pids=()
  KSEARCH_DEVICE_LOCK_DIR="$out/locks-grid" "$bin" sweep "$task" --grid --json --seed 1 >"$out/grid.json" & pids+=($!)
  for r in $(seq 1 "$repeats"); do
    KSEARCH_DEVICE_LOCK_DIR="$out/locks-random-$r" "$bin" sweep "$task" --random "$budget" --json --seed "$r" \
      >"$out/random-$r.json" & pids+=($!)
    (export KSEARCH_DEVICE_LOCK_DIR="$out/locks-tuner-$r"; tune "$r") & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  grid_n=$(python3 -c "import json;print(len(json.load(open('$out/grid.json'))['evaluations']))")
  [ "$grid_n" = "$grid_size" ] || { echo "$task: the grid has $grid_n valid assignments, not $grid_size" >&2; exit 1; }
else
  "$bin" sweep "$task" --grid --json --seed 1 >"$out/grid.json"
  grid_n=$(python3 -c "import json;print(len(json.load(open('$out/grid.json'))['evaluations']))")
  budget=$(( (grid_n + 2) / 3 ))
  echo "$task: grid of $grid_n valid assignments in $(( $(date +%s) - started )) s; budget for the others: $budget evaluations" >&2
  for r in $(seq 1 "$repeats"); do
    "$bin" sweep "$task" --random "$budget" --json --seed "$r" >"$out/random-$r.json"
    tune "$r"
  done
fi
python3 - "$out" "$repeats" "$task" "$budget" <<'PY'
import json, sys
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
marks = [max(1, round(budget * f)) for f in (0.1, 0.25, 0.5, 1.0)]


def to90(c):
    for i, b in enumerate(c):
        if b is not None and b >= 0.9 * grid_best:
            return i + 1
    return None


def pct(c, n):
    b = c[min(n, len(c)) - 1] if c else None
    return f"{100 * b / grid_best:.0f}%" if b else "-"


rows = [("grid (exhaustive, enumeration order)", grid_curve)]
loaders = [("random", lambda r: [e["speedup"] for e in json.load(open(f"{out}/random-{r}.json"))["evaluations"]]),
           ("tuner (world model)", lambda r: [c["speedup"] for c in json.load(open(f"{out}/tuner-{r}.json"))["candidates"]])]
for name, load in loaders:
    for r in range(1, repeats + 1):
        rows.append((f"{name}, seed {r}", curve(load(r))[:budget]))
print(f"task {task}: grid best {grid_best:.3f}x over the reference ({len(grid_curve)} valid assignments); "
      f"budget {budget} evaluations (a third of the grid)")
print()
print("| method | evaluations | best speedup | best so far after " + " / ".join(str(m) for m in marks)
      + " evaluations (% of grid best) | evaluations to 90% of grid best |")
print("|---|---|---|---|---|")
for name, c in rows:
    t90 = to90(c)
    print(f"| {name} | {len(c)} | {c[-1]:.3f}x | " + " / ".join(pct(c, m) for m in marks)
          + f" | {t90 if t90 else 'not reached'} |")
PY
echo "$task: done in $(( $(date +%s) - started )) s" >&2
[ -n "$keep" ] || rm -rf "$out"
