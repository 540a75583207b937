#!/usr/bin/env bash
# A run's best candidates beside its task's seed and baselines, in one device call: the N
# candidates of RUN_DIR with the highest search speedup (passed) are written out of its store and
# evaluated with bench/searches_side_by_side.sh, together with the seed and each BASELINE (a
# [[baselines]] entry of the task), all with the same input seed.
#
# Usage: bench/run_best_side_by_side.sh KSEARCH_BIN RUN_DIR TASK OUTDIR N BASELINE...
set -uo pipefail
bin=$1; run=$2; task=$3; out=$(realpath -m "$4"); n=$5; shift 5
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out/best"
python3 - "$run/run.sqlite" "$out/best" "$n" > "$out/best/list.txt" <<'PY'
import json, os, sqlite3, sys
db, dest, n = sqlite3.connect(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rows = db.execute(
    "SELECT e.candidate_id, MAX(e.speedup) FROM evaluations e WHERE e.purpose = 'search' "
    "AND e.status = 'passed' GROUP BY e.candidate_id ORDER BY MAX(e.speedup) DESC LIMIT ?", (n,))
for cid, speedup in rows.fetchall():
    (sources,) = db.execute("SELECT sources FROM candidates WHERE id = ?", (cid,)).fetchone()
    files = json.loads(sources)
    if len(files) != 1:
        continue
    ext = os.path.splitext(files[0]["path"])[1]
    path = os.path.join(dest, f"candidate{cid}{ext}")
    with open(path, "w") as f:
        f.write(files[0]["content"])
    print(f"candidate{cid} {path} {speedup:.2f}")
PY
cat "$out/best/list.txt"
spec="$out/spec.txt"
: > "$spec"
while read -r label path _; do echo "$task $label $path" >> "$spec"; done < "$out/best/list.txt"
echo "$task seed seed" >> "$spec"
for b in "$@"; do echo "$task $b baseline:$b" >> "$spec"; done
"$here/searches_side_by_side.sh" "$bin" "$spec" "$out/side" 7
