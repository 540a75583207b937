#!/usr/bin/env bash
# The importers over whole public suites: imports every KernelBench level 1-3 problem and every
# GPU MODE reference-kernels problem meant for NVIDIA GPUs or any device (the amd* folders are
# left out), evaluates each imported seed with `ksearch eval`, and prints a markdown table
# (problem, imported?, seed passes?, reason when not) with totals, plus a JSON file of the same.
#
# Usage: bench/importers_suite.sh KERNELBENCH_DIR REFERENCE_KERNELS_DIR KSEARCH_BIN [OUT_DIR]
#   KERNELBENCH_DIR        a checkout of ScalingIntelligence/KernelBench (holds KernelBench/level1 ...)
#   REFERENCE_KERNELS_DIR  a checkout of gpu-mode/reference-kernels (holds problems/...)
#   KSEARCH_BIN            the ksearch binary
#   OUT_DIR                where the tasks, table.md and results.json go (default: a temp dir)
# Environment:
#   EVAL=0          import only (no `ksearch eval`; "seed passes?" reads "not run")
#   STANDIN=1       find shapes with ksearch's stand-in for PyTorch (--stand-in)
#   DEVICE=cuda:0   the device `ksearch eval` runs on (cpu for a CPU-only PyTorch)
#   IMPORT_TIMEOUT=300, EVAL_TIMEOUT=600   seconds per import and per evaluation
#   ONLY=REGEX      only problems whose name matches
#   JOBS=N          problems imported and evaluated N at a time (default 1)
# The harness and the probe use $KSEARCH_PYTHON (else python3), which needs NumPy and PyTorch for
# the evaluations.
set -uo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
kb=$1
rk=$2
bin=$3
out=${4:-$(mktemp -d)}
mkdir -p "$out/tasks" "$out/logs"
[ -d "$kb/KernelBench" ] || { echo "$kb has no KernelBench/ folder (a KernelBench checkout)" >&2; exit 2; }
[ -d "$rk/problems" ] || { echo "$rk has no problems/ folder (a reference-kernels checkout)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin is not an executable ksearch binary" >&2; exit 2; }
eval_on=${EVAL:-1}
device=${DEVICE:-cuda:0}
import_timeout=${IMPORT_TIMEOUT:-300}
eval_timeout=${EVAL_TIMEOUT:-600}
standin=""
[ "${STANDIN:-0}" = 1 ] && standin=--stand-in
rows=$out/rows.tsv
: >"$rows"

# The last line a failed command printed that says what went wrong, on one line without tabs.
reason_of() {
  grep -v '^\s*$' "$1" | grep -iE 'error|refus|fail|uses|unsupported|cannot|not ' | tail -n 1 \
    | tr '\t' ' ' | cut -c1-300
}

one() {  # one SUITE NAME KIND PATH
  local suite=$1 name=$2 kind=$3 path=$4
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then
    return
  fi
  local task="$out/tasks/$suite/$name" log="$out/logs/$suite-$name"
  mkdir -p "$(dirname "$task")"
  local imported=no passes="not run" reason=""
  if timeout "$import_timeout" "$bin" import "$kind" "$path" --out "$task" --force \
      --timeout "$import_timeout" ${standin:+"$standin"} >"$log.import" 2>&1; then
    imported=yes
    if [ "$eval_on" = 1 ]; then
      if timeout "$eval_timeout" "$bin" eval "$task" "$task/seed.py" --device "$device" --json \
          >"$log.eval.json" 2>"$log.eval.err"; then
        passes=yes
      else
        passes=no
        reason=$(python3 -c 'import json,sys
try:
    j = json.load(open(sys.argv[1]))
    print((j.get("status") or "") + ": " + (j.get("reason") or "")[:300])
except Exception:
    pass' "$log.eval.json")
        [ -n "$reason" ] || reason=$(reason_of "$log.eval.err")
        [ -n "$reason" ] || reason="ksearch eval failed (no reason printed; see $log.eval.err)"
      fi
    fi
  else
    reason=$(reason_of "$log.import")
    [ -n "$reason" ] || reason="import failed or timed out after ${import_timeout}s (see $log.import)"
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$suite" "$name" "$imported" "$passes" "${reason//$'\t'/ }" >>"$rows"
  echo "$suite/$name: imported $imported, seed passes $passes${reason:+ ($reason)}" >&2
}

jobs_file=$out/jobs.tsv
: >"$jobs_file"
for level in 1 2 3; do
  for f in "$kb"/KernelBench/level$level/*.py; do
    [ -e "$f" ] || continue
    base=$(basename "$f" .py)
    printf '%s\t%s\t%s\t%s\n' kernelbench "level$level-$base" kernelbench "$f" >>"$jobs_file"
  done
done
while IFS= read -r yml; do
  folder=$(dirname "$yml")
  group=$(basename "$(dirname "$folder")")
  case $group in amd*) continue ;; esac  # AMD GPUs only
  printf '%s\t%s\t%s\t%s\n' gpumode "$group-$(basename "$folder")" gpumode "$folder" >>"$jobs_file"
done < <(find "$rk/problems" -name task.yml | sort)
if [ "${JOBS:-1}" -gt 1 ] 2>/dev/null; then
  # Problems at once (pass/fail is what is measured here, not time): each row is one line
  # appended to the rows file; the table is sorted afterwards. Each job gets device locks of its
  # own, so evaluations share the GPU instead of waiting for each other (their times, which
  # the table does not report, are not the GPU's alone then).
  export -f one reason_of
  export out bin eval_on device import_timeout eval_timeout rows ONLY standin
  tr '\n' '\0' <"$jobs_file" | xargs -0 -P "$JOBS" -n 1 bash -c \
    'IFS=$'"'"'\t'"'"' read -r s n k p <<<"$1"; KSEARCH_DEVICE_LOCK_DIR=$(mktemp -d) one "$s" "$n" "$k" "$p"' _
else
  while IFS=$'\t' read -r s n k p; do one "$s" "$n" "$k" "$p"; done <"$jobs_file"
fi
sort -o "$rows" "$rows"

python3 - "$rows" "$out" <<'EOF'
import collections, json, sys
rows_path, out = sys.argv[1], sys.argv[2]
rows = []
for line in open(rows_path, encoding="utf-8"):
    suite, name, imported, passes, reason = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    rows.append({"suite": suite, "problem": name, "imported": imported == "yes",
                 "seed_passes": {"yes": True, "no": False}.get(passes), "reason": reason})
lines = ["| suite | problem | imported? | seed passes? | reason when not |", "| --- | --- | --- | --- | --- |"]
for r in rows:
    passes = {True: "yes", False: "no", None: "not run"}[r["seed_passes"]]
    lines.append(f"| {r['suite']} | {r['problem']} | {'yes' if r['imported'] else 'no'} | {passes} | "
                 f"{r['reason'].replace('|', '/')} |")
totals = {}
for suite in sorted({r["suite"] for r in rows}):
    mine = [r for r in rows if r["suite"] == suite]
    totals[suite] = {"problems": len(mine), "imported": sum(r["imported"] for r in mine),
                     "seed_passes": sum(r["seed_passes"] is True for r in mine)}
lines.append("")
lines.append("| suite | problems | imported | seed passes |")
lines.append("| --- | --- | --- | --- |")
for suite, t in totals.items():
    lines.append(f"| {suite} | {t['problems']} | {t['imported']} | {t['seed_passes']} |")
# The most common reasons, with numbers and paths blurred so that alike failures count together.
import re
def key(reason):
    reason = re.sub(r"^error: \S+?: ", "", reason)  # the problem's own path
    reason = re.sub(r"\(\*\*\{[^}]*\}\)", "(...)", reason)  # generate_input's arguments
    return re.sub(r"\d+(\.\d+)?", "N", reason)[:140]
common = collections.Counter(key(r["reason"]) for r in rows if r["reason"])
lines.append("")
lines.append("Most common reasons:")
lines.append("")
for reason, n in common.most_common(15):
    lines.append(f"- {n} x {reason}")
table = "\n".join(lines) + "\n"
open(f"{out}/table.md", "w", encoding="utf-8").write(table)
json.dump({"totals": totals, "problems": rows}, open(f"{out}/results.json", "w", encoding="utf-8"), indent=1)
print(table)
print(f"table: {out}/table.md, JSON: {out}/results.json")
EOF
