#!/usr/bin/env bash
# Everything that waits for the H200 and needs no MLX, in one device call (a machine start costs
# a minute or more of the session's device time, so the checks share one): the GPU part of the
# adversarial suite, the GPU suite on the tasks never measured on a GPU, the importers' end-to-end
# check, and the harness's GPU unit tests. Each step's output lands in OUTDIR as its own file;
# a step that fails does not stop the next.
#
# Usage (on the device machine, from the repository root):
#   bench/h200_pending.sh KSEARCH_BIN OUTDIR
# e.g. run command: bash bench/h200_pending.sh .gpu-transfer/bin/ksearch $OUT
# with .gpu-transfer (a stripped release binary built here: cargo build --release -p ksearch-cli;
# strip -o .gpu-transfer/bin/ksearch target/release/ksearch) named in carry.
# Then copy OUTDIR/adversarial-gpu.md to bench/results/, merge OUTDIR/gpu-suite-rest.md into
# bench/results/gpu-suite.md, and record the rest in the issue's note.
# import_check.sh builds its own release binary with cargo, which needs Rust on that machine; it
# is skipped (saying so) where cargo is missing.
set -u
bin=$(realpath "$1"); out=$(realpath -m "$2")
mkdir -p "$out"
cd "$(dirname "$0")/.."
step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, log to OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  echo "[$(date -u +%H:%M:%S)] $name (limit ${limit}s)"
  timeout -k 10 "$limit" "$@" > "$out/$name.log" 2>&1
  echo "[$(date -u +%H:%M:%S)] $name: exit $?"
  tail -5 "$out/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
step adversarial-gpu 240 bash bench/adversarial_gpu.sh "$bin"
cp "$out/adversarial-gpu.log" "$out/adversarial-gpu.md"
step gpu-suite-rest 300 bash bench/gpu_suite.sh "$bin" --tasks gqa_paged_decode,rmsnorm_llm,softmax_llm \
  --out "$out/suite-runs" --md "$out/gpu-suite-rest.md"
tar czf "$out/suite-runs.tgz" -C "$out" suite-runs 2>/dev/null && rm -rf "$out/suite-runs"
if command -v cargo > /dev/null; then
  step import-check 240 bash bench/import_check.sh
else
  echo "import-check: skipped, no cargo on this machine (bench/import_check.sh builds ksearch)" \
    | tee "$out/import-check.log"
fi
step harness-gpu-tests 180 bash -c "cd harness && python3 -m unittest tests.test_gpu tests.test_gpu_task_references -v"
ls -la "$out"
