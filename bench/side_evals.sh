#!/usr/bin/env bash
# Evaluates solution files against one task outside any run (`ksearch eval TASK FILE --json`)
# and prints one line per file: status, reason, and the candidate's median per workload (us).
# Usage: bench/side_evals.sh KSEARCH_BIN TASK OUTDIR FILE...
set -u
bin=$1; task=$2; out=$3; shift 3
mkdir -p "$out"
echo "# bench/side_evals.sh $bin $task $out $* ; date: $(date -u +%FT%TZ)"
for f in "$@"; do
  name=$(basename "$f"); name=${name%.*}
  "$bin" eval "$task" "$f" --json --seed 1 > "$out/$name.json" 2> "$out/$name.log"
  python3 - "$out/$name.json" "$name" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    print(f"{sys.argv[2]}: no JSON"); sys.exit()
times = []
for w in r.get("workloads") or []:
    t = w.get("timing") or {}
    med = (t.get("candidate") or {}).get("median_ns")
    times.append(f"{w['uuid'].split('-', 1)[-1]} {med / 1e3:.1f}" if med else f"{w['uuid']}: {w.get('status')}")
reason = (r.get("reason") or "").replace("\n", " ")[:300]
print(f"{sys.argv[2]}: {r.get('status')} {reason} | wall {r.get('wall_seconds', 0):.1f} s | " + "; ".join(times))
PY
done
