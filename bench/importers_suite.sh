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
#   KEEP=1          keep OUT_DIR's rows.tsv and replace only the rows of the problems run now
#                   (with ONLY: rerun some problems into an earlier, perhaps cut-off, run)
#   TABLE_ONLY=1    run nothing: remake table.md and results.json from OUT_DIR's rows.tsv
#                   (`TABLE_ONLY=1 bench/importers_suite.sh OUT_DIR`)
# An import or evaluation that fails for lack of memory (CUDA out of memory, "more than the N GiB
# free of the device", the host allocator) is retried once alone: every import and evaluation
# holds a shared lock on OUT_DIR/device.lock, and the retry takes it exclusively, so with JOBS>1 it
# runs once the others in flight have finished (and none starts meanwhile). The table's note says
# "passed on a retry alone" or "failed again on a retry alone".
# The harness and the probe use $KSEARCH_PYTHON (else python3), which needs NumPy and PyTorch for
# the evaluations.
set -uo pipefail
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
if [ "${TABLE_ONLY:-0}" = 1 ] && [ $# -eq 1 ]; then
  out=$1
elif [ $# -lt 3 ]; then
  usage
else
  kb=$1
  rk=$2
  bin=$3
  out=${4:-$(mktemp -d)}
fi
rows=$out/rows.tsv
if [ "${TABLE_ONLY:-0}" = 1 ]; then
  [ -f "$rows" ] || { echo "$rows does not exist: nothing to make a table of" >&2; exit 2; }
else
mkdir -p "$out/tasks" "$out/logs"
[ -d "$kb/KernelBench" ] || { echo "$kb has no KernelBench/ folder (a KernelBench checkout)" >&2; exit 2; }
[ -d "$rk/problems" ] || { echo "$rk has no problems/ folder (a reference-kernels checkout)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin is not an executable ksearch binary" >&2; exit 2; }
command -v flock >/dev/null || { echo "flock (util-linux) is needed for the device lock" >&2; exit 2; }
eval_on=${EVAL:-1}
device=${DEVICE:-cuda:0}
import_timeout=${IMPORT_TIMEOUT:-300}
eval_timeout=${EVAL_TIMEOUT:-600}
standin=""
[ "${STANDIN:-0}" = 1 ] && standin=--stand-in
lock=$out/device.lock
gate=$out/device.gate
: >>"$lock"
: >>"$gate"

# The line a failed command printed that says what went wrong, on one line without tabs: its
# last `error: ...` line (ksearch's own, which a hint such as "(the task cannot be used as it is
# ...)" may follow), else the last line that reads like a failure.
reason_of() {
  local line
  line=$(grep -E '^error: ' "$1" | tail -n 1)
  [ -n "$line" ] || line=$(grep -v '^\s*$' "$1" | grep -iE 'error|refus|fail|uses|unsupported|cannot|not ' | tail -n 1)
  printf '%s' "$line" | tr '\t' ' ' | cut -c1-300
}

# Whether the files name a lack of memory: the GPU's (torch's OutOfMemoryError, the harness's
# "needs N GiB for one copy ... more than the N GiB free of the device", cuBLAS failing to create
# its handle on a full device: CUBLAS_STATUS_ALLOC_FAILED, level1-33_BatchNorm beside 11 jobs)
# or the host's.
oom_re="MemoryError|out of memory|GiB free of the device|can't allocate memory|CUBLAS_STATUS_ALLOC_FAILED"
out_of_memory() {
  grep -qE "$oom_re" "$@" 2>/dev/null
}

# locked shared|alone COMMAND...: runs COMMAND holding the device lock, shared with the other
# jobs' imports and evaluations, or alone. A job that wants it alone first closes the gate, so no
# new shared holder starts while it waits for those in flight (flock alone would let shared
# holders overtake it for as long as there are any). The command gets neither descriptor: a
# process it leaves behind must not hold the lock.
locked() {
  local mode=$1
  shift
  (
    flock -x 8 || exit 125
    if [ "$mode" = alone ]; then
      flock -x 9 || exit 125
    else
      flock -s 9 || exit 125
      flock -u 8
    fi
    "$@" 8>&- 9>&-
  ) 8>>"$gate" 9>>"$lock"
}

# evaluate MODE LOG TASK: one `ksearch eval` of the task's seed, its JSON in LOG.eval.json.
evaluate() {
  locked "$1" timeout "$eval_timeout" "$bin" eval "$3" "$3/seed.py" --device "$device" --json \
    >"$2.eval.json" 2>"$2.eval.err"
}

# import_task MODE KIND PATH TASK LOG [ARG...]: the ARGs go to `ksearch import` (--entry F).
import_task() {
  locked "$1" timeout "$import_timeout" "$bin" import "$2" "$3" --out "$4" --force \
    --timeout "$import_timeout" ${standin:+"$standin"} "${@:6}" >"$5.import" 2>&1
}

one() {  # one SUITE NAME KIND PATH: one row of the table
  local suite=$1 name=$2 kind=$3 path=$4
  local task="$out/tasks/$suite/$name" log="$out/logs/$suite-$name"
  mkdir -p "$(dirname "$task")"
  local imported=no passes="not run" reason="" note=""
  one_task "$kind" "$path" "$task" "$log"
  # A GPU MODE problem with several reference functions and no ref_kernel (princeton's
  # cross_entropy): the import says to import each with --entry; the problem is one row, imported
  # and passing when every one of its tasks is.
  local entries=()
  if [ "$imported" = no ] && [ "$kind" = gpumode ]; then
    mapfile -t entries < <(grep -oE 'ksearch import gpumode FOLDER --entry [A-Za-z_][A-Za-z0-9_]*' "$log.import" \
      | awk '{ print $NF }' | awk '!seen[$0]++')
  fi
  if [ "${#entries[@]}" -gt 0 ]; then
    local all_imported=yes all_pass=yes first_reason="" notes="" e
    for e in "${entries[@]}"; do
      imported=no passes="not run" reason="" note=""
      one_task "$kind" "$path" "$task-$e" "$log-$e" --entry "$e"
      [ "$imported" = yes ] || all_imported=no
      [ "$passes" = yes ] || all_pass=no
      [ -n "$first_reason" ] || first_reason=${reason:+--entry $e: $reason}
      [ -z "$note" ] || notes="${notes:+$notes; }--entry $e: $note"
    done
    imported=$all_imported
    passes=$all_pass
    [ "$all_imported" = yes ] || passes="not run"
    [ "$eval_on" = 1 ] || passes="not run"
    reason=$first_reason
    note="imported as ${#entries[@]} tasks, one per reference function (--entry ${entries[*]})${notes:+; $notes}"
  fi
  # One short line per problem, appended: jobs write at once, and a run cut off keeps whole rows.
  # A reason of several lines (an evaluation's compile error) stays on its row.
  reason=${reason//$'\n'/ }
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$suite" "$name" "$imported" "$passes" "${reason//$'\t'/ }" "$note" >>"$rows"
  echo "$suite/$name: imported $imported, seed passes $passes${reason:+ ($reason)}${note:+ [$note]}" >&2
}

# one_task KIND PATH TASK LOG [ARG...]: imports and evaluates one task, setting the caller's
# imported, passes, reason and note.
one_task() {
  local kind=$1 path=$2 task=$3 log=$4
  shift 4
  local ok=0
  import_task shared "$kind" "$path" "$task" "$log" "$@" && ok=1
  # The probe runs the model on the GPU to measure its outputs. Beside other jobs that can run out
  # of memory, which does not fail the import but leaves a note: the import's checks that need
  # the measurement (zero outputs, random forwards, computed inputs' ranges) did not run.
  local measured_oom=0
  grep 'to measure its outputs failed' "$log.import" 2>/dev/null | grep -qE "$oom_re" && measured_oom=1
  if { [ "$ok" = 0 ] && out_of_memory "$log.import"; } || [ "$measured_oom" = 1 ]; then
    mv "$log.import" "$log.first.import"
    ok=0
    import_task alone "$kind" "$path" "$task" "$log" "$@" && ok=1
    note="imported on a retry alone (the first attempt ran out of memory beside other jobs)"
  fi
  if [ "$ok" = 1 ]; then
    imported=yes
    if [ "$eval_on" = 1 ]; then
      local passed=0
      evaluate shared "$log" "$task" && passed=1
      if [ "$passed" = 0 ] && out_of_memory "$log.eval.json" "$log.eval.err"; then
        mv "$log.eval.json" "$log.first.eval.json"
        mv "$log.eval.err" "$log.first.eval.err"
        evaluate alone "$log" "$task" && passed=1
        if [ "$passed" = 1 ]; then
          note="${note:+$note; }passed on a retry alone (the first evaluation ran out of device memory beside other jobs)"
        else
          note="${note:+$note; }failed again on a retry alone (the first evaluation ran out of device memory beside other jobs)"
        fi
      fi
      if [ "$passed" = 1 ]; then
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
}

jobs_file=$out/jobs.tsv
: >"$jobs_file"
job() {  # job SUITE NAME KIND PATH: one line of the jobs file, when ONLY lets it through
  if [ -z "${ONLY:-}" ] || [[ $2 =~ $ONLY ]]; then
    printf '%s\t%s\t%s\t%s\n' "$@" >>"$jobs_file"
  fi
}
for level in 1 2 3; do
  for f in "$kb"/KernelBench/level$level/*.py; do
    [ -e "$f" ] || continue
    base=$(basename "$f" .py)
    job kernelbench "level$level-$base" kernelbench "$f"
  done
done
while IFS= read -r yml; do
  folder=$(dirname "$yml")
  group=$(basename "$(dirname "$folder")")
  case $group in amd*) continue ;; esac  # AMD GPUs only
  job gpumode "$group-$(basename "$folder")" gpumode "$folder"
done < <(find "$rk/problems" -name task.yml | sort)
if [ "${KEEP:-0}" = 1 ] && [ -f "$rows" ]; then
  # The earlier rows of the problems about to run go; every other row stays.
  awk -F'\t' 'NR == FNR { run[$1 "\t" $2] = 1; next } !(($1 "\t" $2) in run)' "$jobs_file" "$rows" \
    >"$rows.kept" && mv "$rows.kept" "$rows"
else
  : >"$rows"
fi
if [ "${JOBS:-1}" -gt 1 ] 2>/dev/null; then
  # N imports at once each start a thread per core for their CPU work (draws without a meta
  # kernel): share the cores instead of oversubscribing them N times.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
  # Problems at once (pass/fail is what is measured here, not time): each row is one line
  # appended to the rows file; the table is sorted afterwards. Each job gets device locks of its
  # own, so evaluations share the GPU instead of waiting for each other (their times, which
  # the table does not report, are not the GPU's alone then); the device.lock above is what a
  # retry alone waits on.
  export -f one one_task reason_of out_of_memory locked evaluate import_task
  export out bin eval_on device import_timeout eval_timeout rows standin lock gate oom_re
  tr '\n' '\0' <"$jobs_file" | xargs -0 -P "$JOBS" -n 1 bash -c \
    'IFS=$'"'"'\t'"'"' read -r s n k p <<<"$1"; KSEARCH_DEVICE_LOCK_DIR=$(mktemp -d) one "$s" "$n" "$k" "$p"' _
else
  while IFS=$'\t' read -r s n k p; do one "$s" "$n" "$k" "$p"; done <"$jobs_file"
fi
fi  # TABLE_ONLY
sort -o "$rows" "$rows"

python3 - "$rows" "$out" <<'EOF'
import collections, json, sys
rows_path, out = sys.argv[1], sys.argv[2]
rows = []
for line in open(rows_path, encoding="utf-8"):
    if not line.strip():
        continue
    # Rows of runs before the note column have five fields.
    suite, name, imported, passes, reason, note = (line.rstrip("\n").split("\t") + [""] * 6)[:6]
    rows.append({"suite": suite, "problem": name, "imported": imported == "yes",
                 "seed_passes": {"yes": True, "no": False}.get(passes), "reason": reason,
                 "note": note, "retried_alone": "retry alone" in note})
lines = ["| suite | problem | imported? | seed passes? | reason when not | note |",
         "| --- | --- | --- | --- | --- | --- |"]
for r in rows:
    passes = {True: "yes", False: "no", None: "not run"}[r["seed_passes"]]
    lines.append(f"| {r['suite']} | {r['problem']} | {'yes' if r['imported'] else 'no'} | {passes} | "
                 f"{r['reason'].replace('|', '/')} | {r['note'].replace('|', '/')} |")
totals = {}
for suite in sorted({r["suite"] for r in rows}):
    mine = [r for r in rows if r["suite"] == suite]
    totals[suite] = {"problems": len(mine), "imported": sum(r["imported"] for r in mine),
                     "seed_passes": sum(r["seed_passes"] is True for r in mine),
                     "passed_on_a_retry_alone": sum(r["seed_passes"] is True and r["retried_alone"]
                                                    for r in mine)}
lines.append("")
lines.append("| suite | problems | imported | seed passes | of which on a retry alone |")
lines.append("| --- | --- | --- | --- | --- |")
for suite, t in totals.items():
    lines.append(f"| {suite} | {t['problems']} | {t['imported']} | {t['seed_passes']} | "
                 f"{t['passed_on_a_retry_alone']} |")
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
