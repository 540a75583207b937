#!/usr/bin/env bash
# End-to-end check of the importers on a machine with PyTorch (the GPU machine): imports the sample
# problems of crates/import/tests/fixtures twice (with PyTorch, and with ksearch's stand-in for
# PyTorch) and requires identical task folders; runs each imported reference and seed with PyTorch
# on the CPU and requires equal outputs; then evaluates each seed with `ksearch eval` (which needs
# the Python harness backend for the task's device) and requires it to pass.
#
# Usage: bench/import_check.sh [PYTHON]     (default: $KSEARCH_PYTHON, else python3; it must
#                                            import torch)
# Prints one line per step and "N passed, M failed" at the end; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${1:-${KSEARCH_PYTHON:-python3}}
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "$python cannot import torch; give an interpreter that can: bench/import_check.sh PATH" >&2
  exit 2
fi
# The harness runs with the same interpreter (it needs NumPy and PyTorch for Python tasks).
export KSEARCH_PYTHON=$python
cargo build --release -q -p ksearch-cli || exit 2
bin=$PWD/target/release/ksearch
fixtures=crates/import/tests/fixtures
out=$(mktemp -d)
passed=0
failed=0
step() {  # step NAME COMMAND...: run, report, count
  local name=$1
  shift
  if "$@" >"$out/log" 2>&1; then
    echo "ok      $name"
    passed=$((passed + 1))
  else
    echo "FAILED  $name"
    sed 's/^/        /' "$out/log" | tail -n 25
    failed=$((failed + 1))
  fi
}
same_task() {  # the files of two imports agree, apart from task.toml's first comment lines
  diff <(sed '1,3{/^#/d}' "$1/task.toml") <(sed '1,3{/^#/d}' "$2/task.toml") &&
    diff "$1/definition.json" "$2/definition.json" && diff "$1/workloads.jsonl" "$2/workloads.jsonl" &&
    diff "$1/seed.py" "$2/seed.py"
}
imports=(
  "kernelbench $fixtures/kernelbench/12_Gemm_ReLU.py gemm_relu"
  "kernelbench $fixtures/kernelbench/23_Softmax.py softmax"
  "gpumode $fixtures/gpumode/grayscale_py grayscale"
  "gpumode $fixtures/gpumode/grouped_matmul_py grouped_matmul"
)
for entry in "${imports[@]}"; do
  read -r kind source name <<<"$entry"
  step "$name: import with PyTorch" "$bin" import "$kind" "$source" --out "$out/$name" --python "$python"
  step "$name: import with the stand-in gives the same task" \
    bash -c "'$bin' import $kind '$source' --out '$out/$name.standin' --python '$python' --stand-in && \
             $(declare -f same_task); same_task '$out/$name' '$out/$name.standin'"
  step "$name: seed equals reference on the CPU" \
    "$python" crates/import/tests/run_generated.py "$out/$name" torch
  step "$name: ksearch eval of the seed passes" \
    bash -c "'$bin' eval '$out/$name' --json --seed 1 | '$python' -c 'import json,sys; j=json.load(sys.stdin); print(j[\"status\"], j.get(\"reason\")); sys.exit(j[\"status\"] != \"passed\")'"
done
# FlashInfer-Bench-like task without its safetensors blobs (C seed on the CPU).
step "paged_decode: absent blobs synthesised, C seed passes" \
  bash -c "'$bin' eval $fixtures/flashinfer/paged_decode --json --seed 1 | '$python' -c 'import json,sys; j=json.load(sys.stdin); print(j[\"status\"]); sys.exit(j[\"status\"] != \"passed\")'"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
