#!/usr/bin/env bash
# One batch of a deferred run, evaluated on the GPU machine: every pending candidate of RUN_DIR
# (a copy carried there) is evaluated with `ksearch evaluate`, and the run directory comes back
# as OUTDIR/RUN.tgz with what the call printed. Here, `ksearch sync` takes the copy back:
#
#   tar xzf OUTDIR/RUN.tgz -C /tmp/back && ksearch sync /tmp/back/RUN RUN_DIR
#
# Usage: bench/h200_evaluate.sh KSEARCH_BIN RUN_DIR OUTDIR [ksearch evaluate options...]
# With HARNESS_FROM_TREE=1 the harness is this checkout's (KSEARCH_HARNESS_DIR) instead of the
# one embedded in the binary. With TIMEOUT=S the evaluate is stopped after S seconds (TERM, then
# KILL 10 s later; exit 124 or 137): what it finished stays in the store, the rest pending.
# Prints the device, the versions and the exact command.
set -u
args="$*"
bin=$(realpath "$1"); run=$(realpath "$2"); out=$(realpath -m "$3"); shift 3
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
echo "# bench/h200_evaluate.sh $args ; date: $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'numpy', numpy.__version__)" 2>&1
"$bin" --version
export KSEARCH_PYTHON=${KSEARCH_PYTHON:-$(command -v python3)}
if [ "${HARNESS_FROM_TREE:-0}" = 1 ]; then
  export KSEARCH_HARNESS_DIR="$here/../harness"
fi
t0=$(date +%s.%N)
echo "\$ ksearch evaluate $run --json $*"
limit=()
if [ -n "${TIMEOUT:-}" ]; then limit=(timeout --kill-after=10 "$TIMEOUT"); fi
"${limit[@]}" "$bin" evaluate "$run" --json "$@" > "$out/evaluate.json" 2> "$out/evaluate.log"
rc=$?
t1=$(date +%s.%N)
echo "exit $rc after $(python3 -c "print(round($t1 - $t0, 1))") s"
cat "$out/evaluate.json"; echo
tail -40 "$out/evaluate.log"
"$bin" show "$run" > "$out/show.txt" 2>&1
tail -30 "$out/show.txt"
name=$(basename "$run")
tar czf "$out/$name.tgz" -C "$(dirname "$run")" "$name"
exit $rc
