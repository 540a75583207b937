#!/usr/bin/env bash
# Knob-tuner searches on the GPU tasks attention_prefill and mamba_scan, then the GPU suite on
# those tasks with the best kernel of each run beside the seed and the native baselines, so the
# ratios to cuDNN / FlashAttention / PyTorch come from one session on one GPU.
#
# Usage: bench/h200_search.sh KSEARCH_BIN OUTDIR [SEARCH_SECONDS]
# Each search gets about SEARCH_SECONDS (default 200) of wall time: the script first times one
# evaluation of the task (a random knob assignment, `ksearch sweep --random 1`) and sizes the
# round budget from it, keeping room for the seed and the final re-measurement of the top 3.
# Run directories (with their SQLite transcripts) are packed into OUTDIR as TASK-tuner.tgz.
set -u
bin=$(realpath "$1"); out=$(realpath -m "$2"); budget=${3:-200}
mkdir -p "$out" runs
here="$(cd "$(dirname "$0")" && pwd)"
stamp() { date -u +%H:%M:%S; }
echo "# command: bench/h200_search.sh $* ; date: $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'numpy', numpy.__version__)"
"$bin" --version 2>/dev/null || true
for task in mamba_scan attention_prefill; do
  t0=$(date +%s.%N)
  timeout 150 "$bin" sweep "$task" --random 1 --seed 3 --json > "runs/$task-probe.json" 2> "runs/$task-probe.log"
  probe_rc=$?
  w=$(python3 -c "import time; print(max(5.0, time.time() - $t0))")
  rounds=$(python3 -c "print(max(3, min(40, int(($budget - 4 * $w) / $w))))")
  echo "[$(stamp)] $task: one evaluation took ${w%.*} s (sweep exit $probe_rc): $rounds rounds"
  python3 - "runs/$task-probe.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    for e in j.get("evaluations", j.get("results", [])):
        print("  probe:", e.get("assignment") or e.get("knobs"), e.get("status"), e.get("speedup"), (e.get("reason") or "")[:300])
except Exception as err:
    print("  probe output unreadable:", err, open(sys.argv[1]).read()[:500])
PY
  timeout -s INT -k 60 $((budget + 60)) "$bin" run "$task" --brain tuner --rounds "$rounds" --seed 7 \
      --out "runs/$task-tuner" --json > "runs/$task-run.json" 2> "runs/$task-tuner.log"
  echo "[$(stamp)] $task: ksearch run exit $?"; cat "runs/$task-run.json"; echo
  "$bin" show "runs/$task-tuner" 2>&1 | tee "runs/$task-show.txt" | tail -25
  tar czf "$out/$task-tuner.tgz" -C runs "$task-tuner" "$task-tuner.log" "$task-run.json" "$task-show.txt" "$task-probe.json" "$task-probe.log"
done
sols=()
for task in mamba_scan attention_prefill; do
  best=$(ls runs/$task-tuner/best/* 2>/dev/null | head -1)
  [ -n "$best" ] && sols+=(--solution "$task=$best")
done
echo "[$(stamp)] suite: ${sols[*]}"
timeout 240 "$here/gpu_suite.sh" "$bin" --tasks mamba_scan,attention_prefill "${sols[@]}" --out runs/suite --md "$out/gpu-suite.md"
echo "[$(stamp)] suite exit $?"
tar czf "$out/suite.tgz" -C runs suite
