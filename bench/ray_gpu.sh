#!/usr/bin/env bash
# One GPU-task batch with --executor local and with --executor ray on a single-node Ray cluster
# (a head started here over this machine's GPUs, in its own process group, ended on exit), in
# the same call: evaluations per minute and each record's node provenance.
# Usage: bench/ray_gpu.sh [TASK] [ROUNDS]   (repository root; needs target/release/ksearch,
#   python3 with numpy, torch/triton or nvcc for TASK's backend, and `pip install ray==2.60.0`)
set -euo pipefail
cd "$(dirname "$0")/.."
TASK=${1:-mamba_scan}  # a CUDA task with knobs, so the tuner has a batch to run
ROUNDS=${2:-8}
KS=${KSEARCH:-$PWD/target/release/ksearch}
GPUS=$(nvidia-smi -L | wc -l)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
AGENT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TMP=$(mktemp -d /tmp/ksrg.XXXX)
setsid ray start --head --block --node-ip-address=127.0.0.1 --port="$PORT" --num-gpus="$GPUS" \
  --temp-dir="$TMP/ray" --dashboard-agent-listen-port="$AGENT" --include-dashboard=false --disable-usage-stats \
  >"$TMP/head.log" 2>&1 &
HEAD=$!
trap 'kill -TERM -- -$HEAD 2>/dev/null; sleep 2; kill -KILL -- -$HEAD 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 60); do
  python3 -c "import ray; ray.init(address='127.0.0.1:$PORT', logging_level='ERROR')" 2>/dev/null && break
  sleep 1
done
echo "date: $(date -u +%FT%TZ)  $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$GPUS  $($KS --version)  ray $(python3 -c 'import ray; print(ray.__version__)')  task: $TASK  rounds: $ROUNDS"
for ex in local ray; do
  extra=(--parallel "$GPUS" --devices all)
  [ "$ex" = ray ] && extra=(--executor ray --ray-address "127.0.0.1:$PORT" --ray-ksearch "$KS" --parallel auto)
  start=$(date +%s.%N)
  "$KS" run "$TASK" --brain tuner --rounds "$ROUNDS" --seed 3 --json --out "$TMP/$ex" "${extra[@]}"
  end=$(date +%s.%N)
  python3 - "$ex" "$TMP/$ex/run.sqlite" "$(python3 -c "print($end - $start)")" <<'PY'
import json, sqlite3, sys
ex, db, s = sys.argv[1], sqlite3.connect(sys.argv[2]), float(sys.argv[3])
rows = [json.loads(r[0]) for r in db.execute("select record from evaluations")]
print(f"{ex:5s}: {len(rows)} evaluations in {s:.1f} s = {60 * len(rows) / s:.1f} evaluations/min")
nodes = sorted({json.dumps([(r.get("node") or {}).get(k) for k in ("node_id", "ip", "gpu")]) for r in rows})
print("       devices:", sorted({r.get("leased_device") for r in rows}), "nodes (id, ip, gpu):", nodes)
PY
done
