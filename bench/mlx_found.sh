#!/usr/bin/env bash
# The MLX runs' found kernels in bench/mlx_attention.py (against mx.fast.scaled_dot_product_attention)
# and bench/mlx_mamba.py (mlx-lm's Mamba with the found scan and step patched in), in one device
# call with MLX's CUDA backend installed. Those benches time single calls on inputs made once per
# case, outside the harness's timed interval, so the ratios against the native kernels are theirs.
#
# Usage: bench/mlx_found.sh KSEARCH OUTDIR SCAN_RUN[:ID] STEP_RUN[:ID] [ATTENTION_RUN[:ID]...]
# ID is a candidate id, default the run's best (`ksearch show --json`). Each candidate is written
# out of its store (bench/candidate_files.py) into OUTDIR/kernels/; every bench writes its table
# (markdown) and JSON into OUTDIR; one failing bench does not stop the next.
set -u
if [ $# -lt 4 ]; then
  echo "usage: $0 KSEARCH OUTDIR SCAN_RUN[:ID] STEP_RUN[:ID] [ATTENTION_RUN[:ID]...]" >&2; exit 2
fi
bin=$(realpath "$1"); out=$(realpath -m "$2"); scan=$3; step=$4; shift 4
here="$(cd "$(dirname "$0")" && pwd)"
export KSEARCH="$bin"
mkdir -p "$out/kernels"
echo "# bench/mlx_found.sh ; date: $(date -u +%FT%TZ)"
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())"
# out_kernel RUN[:ID] NAME: write the candidate into OUTDIR/kernels/NAME, print that folder
out_kernel() {
  local run=${1%%:*} id=best
  case "$1" in *:*) id=${1##*:};; esac
  python3 "$here/candidate_files.py" "$run" "$id" "$out/kernels/$2" >&2 && echo "$out/kernels/$2"
}
rc=0
for spec in "$@"; do
  name=$(basename "${spec%%:*}")
  dir=$(out_kernel "$spec" "$name") || { rc=1; continue; }
  echo; echo "=== bench/mlx_attention.py --kernel $dir ($name)"
  timeout -k 10 240 python3 "$here/mlx_attention.py" --kernel "$dir" \
    --json "$out/attention-$name.json" --md "$out/attention-$name.md" || { echo "exit $?"; rc=1; }
done
scan_dir=$(out_kernel "$scan" scan) && step_dir=$(out_kernel "$step" step) || exit 1
echo; echo "=== bench/mlx_mamba.py --scan $scan_dir --step $step_dir"
timeout -k 10 300 python3 "$here/mlx_mamba.py" --scan "$scan_dir" --step "$step_dir" \
  --json "$out/mamba.json" --md "$out/mamba.md" || { echo "exit $?"; rc=1; }
exit $rc
