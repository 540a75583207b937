#!/usr/bin/env bash
# The found kernels beside their tasks' baselines, in one device call (issue "The searches"):
# every line of SPEC is `TASK_DIR LABEL WHAT`, WHAT being a kernel source file, `seed`,
# `baseline:NAME` (a [[baselines]] entry of the task) or `run:RUN_DIR:ID` (candidate ID of a run,
# or `best`: the engine's best as the store holds it when this line is reached, so a spec written
# before the call's evaluations names their outcome; the source is written out of the store by
# bench/candidate_files.py into OUTDIR/kernels/LABEL and the label gets the candidate's id).
# Each is evaluated with `ksearch eval TASK_DIR ... --json --seed SEED` (the same input seed for all, so every row sees the same
# workloads and draws), one after the other on the one GPU; prints per task a table of
# per-workload medians in us (with each callee's gate state: `gated` times exclude the host's
# launch path) and writes OUTDIR/side_by_side.json plus every raw record.
#
# Usage: bench/searches_side_by_side.sh KSEARCH_BIN SPEC OUTDIR [SEED]
set -uo pipefail
bin=$(realpath "$1"); spec=$(realpath "$2"); out=$(realpath -m "$3"); seed=${4:-7}
mkdir -p "$out/raw"
here="$(cd "$(dirname "$0")" && pwd)"
export KSEARCH_PYTHON=${KSEARCH_PYTHON:-$(command -v python3)}
echo "# bench/searches_side_by_side.sh $* ; date: $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
"$bin" --version
i=0
while read -r task label what; do
  [ -z "${task:-}" ] && continue
  case "$task" in \#*) continue;; esac
  i=$((i + 1))
  case "$what" in
    seed) args=();;
    baseline:*) args=(--baseline "${what#baseline:}");;
    run:*)
      spec_run=${what#run:}; spec_id=${spec_run##*:}; spec_run=${spec_run%:*}
      written=$(KSEARCH="$bin" python3 "$here/candidate_files.py" "$spec_run" "$spec_id" "$out/kernels/$label") \
        || { echo "$i $task $label $what: cannot write the candidate out of its store"; continue; }
      # "candidate N -> DEST: FILE..." (one source file per candidate in these tasks)
      set -- ${written#*: }
      if [ $# -ne 1 ]; then echo "$i $task $label $what: $# source files ($*); give the file instead"; continue; fi
      what="$out/kernels/$label/$1"
      label="$label-c$(echo "$written" | awk '{print $2}')"
      args=("$what");;
    *) args=("$what");;
  esac
  t0=$(date +%s.%N)
  "$bin" eval "$task" "${args[@]}" --json --seed "$seed" > "$out/raw/$i.json" 2> "$out/raw/$i.log" < /dev/null
  rc=$?
  echo "$i $task $label $what rc=$rc $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
  printf '%s\t%s\t%s\t%s\n' "$i" "$task" "$label" "$what" >> "$out/index.tsv"
done < "$spec"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "index.tsv"))]
tasks = {}
for i, task, label, what in rows:
    try:
        r = json.load(open(os.path.join(out, "raw", f"{i}.json")))
    except Exception as e:  # an evaluation that printed no JSON
        r = {"status": f"no record ({e})", "workloads": []}
    ws = {}
    for w in r.get("workloads", []):
        t = w.get("timing") or {}
        med = (t.get("candidate") or {}).get("median_ns")
        ws[w["uuid"]] = {"us": med / 1e3 if med else None, "status": w.get("status"),
                         "gate": (t.get("gate") or {}).get("candidate"),
                         "reference_us": ((t.get("reference") or {}).get("median_ns") or 0) / 1e3 or None}
    tasks.setdefault(os.path.basename(task.rstrip("/")), []).append(
        {"label": label, "what": what, "status": r.get("status"), "workloads": ws})
json.dump(tasks, open(os.path.join(out, "side_by_side.json"), "w"), indent=1)
for task, entries in tasks.items():
    names = []
    for e in entries:
        for u in e["workloads"]:
            if u not in names:
                names.append(u)
    print(f"\n## {task}\n")
    print("| kernel | status | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for e in entries:
        cells = []
        for u in names:
            w = e["workloads"].get(u)
            if not w or w["us"] is None:
                cells.append(w["status"] if w else "-")
            else:
                g = "" if w["gate"] in (None, "gated") else " (ungated)"
                cells.append(f"{w['us']:.1f}{g}")
        print(f"| {e['label']} | {e['status']} | " + " | ".join(cells) + " |")
PY
