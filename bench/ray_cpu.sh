#!/usr/bin/env bash
# Evaluations per minute of a CPU task (the built-in softmax, knob tuner) with --executor local
# and with --executor ray over the same cores: a local Ray head with one CPU slot per core,
# started here in its own process group and ended on exit.
# Usage: bench/ray_cpu.sh [ROUNDS]   (from the repository root, after `cargo build --release`)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-6}
KS=${KSEARCH:-$PWD/target/release/ksearch}
CORES=$(nproc)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
AGENT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TMP=$(mktemp -d /tmp/ksrb.XXXX)
setsid ray start --head --block --node-ip-address=127.0.0.1 --port="$PORT" --num-cpus="$CORES" --num-gpus=0 \
  --temp-dir="$TMP/ray" --dashboard-agent-listen-port="$AGENT" --include-dashboard=false --disable-usage-stats \
  >"$TMP/head.log" 2>&1 &
HEAD=$!
trap 'kill -TERM -- -$HEAD 2>/dev/null; sleep 2; kill -KILL -- -$HEAD 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 60); do
  python3 -c "import ray; ray.init(address='127.0.0.1:$PORT', logging_level='ERROR')" 2>/dev/null && break
  sleep 1
done
evals() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from evaluations').fetchone()[0])" "$1/run.sqlite"; }
echo "date: $(date -u +%FT%TZ)  cores: $CORES  $($KS --version)  ray $(python3 -c 'import ray; print(ray.__version__)')  rounds: $ROUNDS"
for ex in local ray; do
  extra=(--parallel "$CORES" --devices "cpu:$CORES")
  [ "$ex" = ray ] && extra=(--executor ray --ray-address "127.0.0.1:$PORT" --ray-ksearch "$KS" --parallel auto)
  start=$(date +%s.%N)
  "$KS" run softmax --brain tuner --rounds "$ROUNDS" --seed 3 --json --out "$TMP/$ex" "${extra[@]}" >/dev/null
  end=$(date +%s.%N)
  n=$(evals "$TMP/$ex")
  python3 -c "import sys; n,s=int(sys.argv[2]),float(sys.argv[3]); print(f'{sys.argv[1]:5s}: {n} evaluations in {s:.1f} s = {60*n/s:.1f} evaluations/min')" "$ex" "$n" "$(python3 -c "print($end - $start)")"
done
