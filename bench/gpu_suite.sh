#!/usr/bin/env bash
# The GPU task suite: every GPU task's seed kernel and baselines evaluated with ksearch on this
# machine's GPU, one Markdown table per task (median, IQR, GB/s and TFLOP/s against the H200's
# measured ceilings, ratio to each baseline). Details: bench/gpu_suite.py.
#
# Usage: bench/gpu_suite.sh KSEARCH_BIN [--tasks a,b] [--seed N] [--solution TASK=FILE]...
#                           [--out DIR] [--md bench/results/gpu-suite.md]
#        bench/gpu_suite.sh --from DIR [--md FILE]      (render earlier records, run nothing)
# Needs: the ksearch binary, python3 with PyTorch (for the references and baselines), this repo.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec python3 "$here/gpu_suite.py" "$@"
