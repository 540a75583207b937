#!/usr/bin/env bash
# Where the time of `ksearch eval softmax` goes: wall time of the whole command, split into the
# harness's stages (startup, compile, correctness, timing) and the time spent inside kernels
# (the raw timing samples of candidate and reference), over several runs.
#
# Usage: bench/eval_overhead.sh [RUNS] [TASK]     (defaults: 7 runs, softmax)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
task=${2:-softmax}
cargo build --release -q -p ksearch-cli
bin=target/release/ksearch
"$bin" eval "$task" --seed 0 >/dev/null 2>&1 || true   # first use unpacks the harness; not measured
out=$(mktemp -d)
for i in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  "$bin" eval "$task" --json --seed "$i" >"$out/$i.json"
  end=$(date +%s%N)
  echo $(( (end - start) / 1000 )) >"$out/$i.wall_us"
done
python3 - "$out" "$runs" "$task" <<'PY'
import json, statistics, sys, os
out, runs, task = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = []
for i in range(1, runs + 1):
    j = json.load(open(os.path.join(out, f"{i}.json")))
    wall = int(open(os.path.join(out, f"{i}.wall_us")).read()) / 1e6
    st = j["stage_seconds"]
    kernel = sum(sum(w["timing"]["candidate_ns"]) + sum(w["timing"]["reference_ns"])
                 for w in j["workloads"] if w.get("timing")) / 1e9
    rows.append(dict(wall=wall, startup=st.get("startup", 0), reference=st.get("reference", 0),
                     compile=st.get("compile", 0), load=st.get("load", 0),
                     correctness=st.get("correctness", 0), timing=st.get("timing", 0),
                     kernel=kernel, status=j["status"]))
med = lambda k: statistics.median(r[k] for r in rows)
wall = med("wall")
harness = sum(med(k) for k in ["startup", "reference", "compile", "load", "correctness", "timing"])
fixed = wall - med("correctness") - med("timing")
print(f"task {task}, {runs} runs, statuses: {sorted(set(r['status'] for r in rows))}")
print()
print("| part | median seconds | share of wall |")
print("|---|---|---|")
for name, v in [("whole command (wall)", wall),
                ("process start, Rust side, outside the harness", wall - harness),
                ("harness startup (Python, NumPy import, request)", med("startup")),
                ("reference vetted on workload 0", med("reference")),
                ("compile (cc -O3)", med("compile")),
                ("load (dlopen, symbol lookup)", med("load")),
                ("correctness trials (inputs, candidate, reference, compare)", med("correctness")),
                ("timing stage", med("timing")),
                ("  of which inside timed kernel calls (candidate + reference)", med("kernel"))]:
    print(f"| {name} | {v:.3f} | {100 * v / wall:.0f}% |")
print()
print(f"fixed overhead (everything but correctness and timing): {fixed:.3f} s ({100 * fixed / wall:.0f}%)")
print(f"min / max wall over runs: {min(r['wall'] for r in rows):.3f} / {max(r['wall'] for r in rows):.3f} s")
PY
rm -rf "$out"
