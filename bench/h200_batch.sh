#!/usr/bin/env bash
# One device call for several deferred runs: each run directory's pending candidates are
# evaluated in turn (bench/h200_evaluate.sh), and everything comes back as OUTDIR/batch.tgz
# (per run: evaluate.json, evaluate.log, show.txt and the run directory as RUN.tgz).
#
# Usage: bench/h200_batch.sh KSEARCH_BIN OUTDIR RUN_DIR...
# The harness embedded in the binary is used unless a smoke evaluation of a GPU seed fails with
# it; then HARNESS_FALLBACK (a folder holding a ksearch_harness package) is used and said so.
set -u
args="$*"
bin=$(realpath "$1"); out=$(realpath -m "$2"); shift 2
here="$(cd "$(dirname "$0")" && pwd)"
stage=$(mktemp -d)
export KSEARCH_PYTHON=${KSEARCH_PYTHON:-$(command -v python3)}
echo "# bench/h200_batch.sh $args ; date: $(date -u +%FT%TZ)"
t0=$(date +%s)
if "$bin" eval rmsnorm_llm --json --seed 1 > "$stage/smoke.json" 2> "$stage/smoke.log" \
   && grep -q '"status": *"passed"' "$stage/smoke.json"; then
  echo "smoke: the embedded harness evaluates rmsnorm_llm's seed ($(( $(date +%s) - t0 )) s)"
elif [ -n "${HARNESS_FALLBACK:-}" ]; then
  export KSEARCH_HARNESS_DIR=$(realpath "$HARNESS_FALLBACK")
  echo "smoke: the embedded harness failed ($(head -c 600 "$stage/smoke.json"; tail -5 "$stage/smoke.log")); using $KSEARCH_HARNESS_DIR"
else
  echo "smoke: the embedded harness failed and no HARNESS_FALLBACK is set"; tail -20 "$stage/smoke.log"
fi
rc=0
for run in "$@"; do
  name=$(basename "$run")
  echo; echo "=== $name"
  "$here/h200_evaluate.sh" "$bin" "$run" "$stage/$name" || rc=$?
done
mkdir -p "$out"
tar czf "$out/batch.tgz" -C "$stage" .
echo "total $(( $(date +%s) - t0 )) s"
exit $rc
