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
python3 "$(dirname "$0")/tuner_table.py" "$out" "$task" "$repeats" "$budget"
echo "$task: done in $(( $(date +%s) - started )) s" >&2
[ -n "$keep" ] || rm -rf "$out"
