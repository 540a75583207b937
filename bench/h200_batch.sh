#!/usr/bin/env bash
# One device call for several deferred runs: each run directory's pending candidates are
# evaluated in turn (bench/h200_evaluate.sh), and each run comes back as OUTDIR/NAME.tgz (its
# evaluate.json, evaluate.log, show.txt and the run directory as NAME/NAME.tgz) as soon as that
# run is done, so that a call cut off by the device's time limit still returns the runs before.
#
# Usage: bench/h200_batch.sh KSEARCH_BIN OUTDIR RUN_DIR...
#
# DEADLINE (seconds from the start, default 540: the device allows 600 per call and the files
# still have to be written) bounds the call: each `ksearch evaluate` runs under `timeout` with the
# time left, less RESERVE (default 20 s) for packing; a run is skipped, and said so, when less
# than MIN_RUN (default 45 s) is left. A cut-off evaluate keeps what it finished (the store
# records each evaluation as it ends; crates/cli/tests/deferred.rs kills one with -9), and the
# rest stays pending for the next call. At most 7 runs per call: the device returns 8 files and
# OUTDIR also holds what this script prints, if the caller sends it there.
#
# The harness embedded in the binary is used unless a smoke evaluation of a GPU seed (SMOKE_TASK,
# default rmsnorm_llm; mlx_mamba_step for the MLX runs) fails with it; then HARNESS_FALLBACK (a
# folder holding a ksearch_harness package) is used and said so, and without one no run is
# evaluated (a broken harness would record every candidate as failed): they all stay pending.
set -u
args="$*"
if [ $# -lt 3 ]; then
  echo "usage: $0 KSEARCH_BIN OUTDIR RUN_DIR..." >&2; exit 2
fi
bin=$(realpath "$1"); out=$(realpath -m "$2"); shift 2
if [ $# -gt 7 ]; then
  echo "$0: $# runs given; at most 7 per call (the device returns 8 files)" >&2; exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
deadline=${DEADLINE:-540}; reserve=${RESERVE:-20}; min_run=${MIN_RUN:-45}
stage=$(mktemp -d)
mkdir -p "$out"
export KSEARCH_PYTHON=${KSEARCH_PYTHON:-$(command -v python3)}
echo "# bench/h200_batch.sh $args ; date: $(date -u +%FT%TZ); deadline ${deadline} s"
t0=$(date +%s)
left() { echo $(( deadline - ($(date +%s) - t0) )); }
smoke_task=${SMOKE_TASK:-rmsnorm_llm}
if timeout 120 "$bin" eval "$smoke_task" --json --seed 1 > "$stage/smoke.json" 2> "$stage/smoke.log" \
   && grep -q '"status": *"passed"' "$stage/smoke.json"; then
  echo "smoke: the embedded harness evaluates $smoke_task's seed ($(( $(date +%s) - t0 )) s)"
elif [ -n "${HARNESS_FALLBACK:-}" ]; then
  export KSEARCH_HARNESS_DIR=$(realpath "$HARNESS_FALLBACK")
  echo "smoke: the embedded harness failed ($(head -c 600 "$stage/smoke.json"; tail -5 "$stage/smoke.log")); using $KSEARCH_HARNESS_DIR"
else
  echo "smoke: the embedded harness failed on $smoke_task's seed and no HARNESS_FALLBACK is set;" \
    "no run evaluated, their candidates stay pending"
  head -c 1500 "$stage/smoke.json"; echo; tail -20 "$stage/smoke.log"
  exit 3
fi
rc=0
for run in "$@"; do
  name=$(basename "$run")
  echo; echo "=== $name ($(left) s left)"
  budget=$(( $(left) - reserve ))
  if [ "$budget" -lt "$min_run" ]; then
    echo "skipped: ${budget} s left for it (MIN_RUN ${min_run}); its candidates stay pending"
    rc=1; continue
  fi
  # timeout sends TERM, then KILL 10 s later; its 124 says the run was cut off, not failed.
  TIMEOUT="$budget" "$here/h200_evaluate.sh" "$bin" "$run" "$stage/$name"
  r=$?
  if [ "$r" = 124 ] || [ "$r" = 137 ]; then
    echo "cut off after ${budget} s: what it finished is in the store, the rest stays pending"
  fi
  [ "$r" = 0 ] || rc=$r
  tar czf "$out/$name.tgz" -C "$stage" "$name"
done
echo "total $(( $(date +%s) - t0 )) s"
exit $rc
