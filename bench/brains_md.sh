#!/usr/bin/env bash
# Regenerates bench/results/brains.md's table from the before/after runs (see that file).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 bench/brains_table.py "${1:-target/debug/ksearch}" \
  results/2026-12-01-cpu-matmul-world-model-agent-before results/2026-12-01-cpu-matmul-world-model-agent \
  results/2026-12-01-cpu-ssm_scan-world-model-agent-before results/2026-12-01-cpu-ssm_scan-world-model-agent \
  --json bench/results/brains.json
