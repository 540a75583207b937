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
here=$(cd "$(dirname "$0")" && pwd)  # bench/, absolute: the script may be run as ./tuner.sh
# Paths given on the command line are the caller's: resolve them before leaving for the repo root.
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
if [ -e "$task" ]; then task=$(realpath "$task"); fi  # a task folder: the tuner runs from the output folder
cd "$here/.."
if [ -z "$bin" ]; then
  cargo build --release -q -p ksearch-cli
  bin=$PWD/target/release/ksearch
fi
tmp=""
if [ -n "$keep" ]; then
  out=$keep
else
  tmp=$(mktemp -d)
  out=$tmp
  trap 'rm -rf "$tmp"' EXIT  # the temporary folder only, on success or failure; never a --keep folder
fi
mkdir -p "$out"
started=$(date +%s)
tune() {  # tune SEED: the tuner's run; its seed (the all-defaults assignment) is its first evaluation
  (cd "$out" && XDG_CONFIG_HOME="$out" "$bin" run "$task" --brain tuner --rounds $((budget - 1)) --seed "$1" \
      --out "$out/tuner-$1" --json >/dev/null)
  "$bin" show "$out/tuner-$1" --json >"$out/tuner-$1.json"
}
if [ -n "$grid_size" ]; then
  budget=$(( (grid_size + 2) / 3 ))
  pids=() names=()
  KSEARCH_DEVICE_LOCK_DIR="$out/locks-grid" "$bin" sweep "$task" --grid --json --seed 1 >"$out/grid.json" &
  pids+=($!) names+=(grid)
  for r in $(seq 1 "$repeats"); do
    KSEARCH_DEVICE_LOCK_DIR="$out/locks-random-$r" "$bin" sweep "$task" --random "$budget" --json --seed "$r" \
      >"$out/random-$r.json" &
    pids+=($!) names+=("random seed $r")
    (export KSEARCH_DEVICE_LOCK_DIR="$out/locks-tuner-$r"; tune "$r") &
    pids+=($!) names+=("tuner seed $r")
  done
  # Wait for every job (a failing `wait` under set -e would exit and leave the others running).
  failed=()
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done
  if [ ${#failed[@]} -gt 0 ]; then
    msg=$(printf ', %s' "${failed[@]}")
    echo "$task: failed: ${msg:2} (the other jobs finished)" >&2
    exit 1
  fi
  grid_n=$(python3 -c 'import json,sys;print(len(json.load(open(sys.argv[1]))["evaluations"]))' "$out/grid.json")
  [ "$grid_n" = "$grid_size" ] || { echo "$task: the grid has $grid_n valid assignments, not $grid_size" >&2; exit 1; }
else
  "$bin" sweep "$task" --grid --json --seed 1 >"$out/grid.json"
  grid_n=$(python3 -c 'import json,sys;print(len(json.load(open(sys.argv[1]))["evaluations"]))' "$out/grid.json")
  budget=$(( (grid_n + 2) / 3 ))
  echo "$task: grid of $grid_n valid assignments in $(( $(date +%s) - started )) s; budget for the others: $budget evaluations" >&2
  for r in $(seq 1 "$repeats"); do
    "$bin" sweep "$task" --random "$budget" --json --seed "$r" >"$out/random-$r.json"
    tune "$r"
  done
fi
python3 "$here/tuner_table.py" "$out" "$task" "$repeats" "$budget"
echo "$task: done in $(( $(date +%s) - started )) s" >&2
