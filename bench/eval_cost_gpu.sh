#!/usr/bin/env bash
# What one GPU evaluation costs, and whether its times are the kernels' (issue 16): every
# built-in GPU task's seed evaluated once with `ksearch eval TASK --json` (wall time, the
# harness's stage seconds, timed calls per workload), then the timing check: ksearch's median
# for small kernels against their duration measured independently by Nsight Compute
# (gpu__time_duration, caches flushed before each kernel as ksearch flushes the L2 before each
# timed call, clocks left alone).
#
# Usage: bench/eval_cost_gpu.sh KSEARCH_BIN [--label NAME] [--harness DIR] [--tasks DIR]
#                                [--json FILE] [--keep DIR] [--no-ncu] [--no-warmup]
#                                [--no-baseline] [--only TASK,TASK] [--warm N] [--no-warm]
#   --harness DIR  KSEARCH_HARNESS_DIR for every evaluation (the folder holding
#                  ksearch_harness/); default: the harness embedded in the binary
#   --tasks DIR    evaluate DIR/TASK (a task folder) instead of the built-in TASK
#   --json FILE    the figures as JSON: {"TASK": {"wall_s", "timed_calls_min", ...}, ...,
#                  "fidelity": [{"kernel", "ksearch_us", "independent_us"}, ...]}
#   --no-ncu       no independent measurement (the fidelity rows keep ksearch's medians)
#   --no-warmup    no untimed first evaluation (when the file cache is already warm)
#   --no-baseline  no evaluation of rmsnorm_llm's torch_rms_norm baseline
#   --only A,B     evaluate only these tasks (default: all five)
#   --warm N       per task, also N evaluations in ONE ksearch process (`ksearch eval --repeat
#                  N`) in each of --warm-modes: auto (KSEARCH_WARM unset: the first evaluation
#                  in a fresh process while the warm server starts, the later ones on it), warm
#                  (KSEARCH_WARM=1: the first waits for the server) and fresh (KSEARCH_WARM=0, 2
#                  evaluations): the first (cold) one's wall and startup seconds against the
#                  later ones' (default 4; the table "Warm server"). The N share one empty
#                  build cache, so later ones hit it in every mode alike: compare the modes on
#                  the later evaluations, and startup above all
#   --warm-modes L modes of --warm, comma-separated (default auto,fresh)
#   --no-warm      skip that
# Every evaluation gets an empty ksearch build cache (KSEARCH_CACHE_DIR), so the seed is compiled
# as a new candidate would be; ksearch's bytecode cache (python-bytecode/, used where the
# interpreter has no bytecode of torch beside its sources) is shared by all and primed by the
# warm-up, as it is on a machine where ksearch ran once; one untimed evaluation first warms the OS's file cache (torch's
# libraries), as in a search where evaluations follow each other. Needs: python3 with torch,
# nvcc, ncu (unless --no-ncu) on PATH or in /usr/local/cuda/bin.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1"); shift
LABEL=run; HARNESS=""; TASKS=""; JSON=""; KEEP=""; NCU=1; WARMUP=1; BASELINE=1; WARM=4
WARM_MODES="auto fresh"
ONLY="mamba_scan,attention_prefill,gqa_paged_decode,rmsnorm_llm,softmax_llm"
while [ $# -gt 0 ]; do
  case "$1" in
    --label) LABEL=$2; shift 2;;
    --harness) HARNESS=$(realpath "$2"); shift 2;;
    --tasks) TASKS=$(realpath "$2"); shift 2;;
    --json) JSON=$(realpath -m "$2"); shift 2;;
    --keep) KEEP=$(realpath -m "$2"); shift 2;;
    --no-ncu) NCU=0; shift;;
    --no-warmup) WARMUP=0; shift;;
    --no-baseline) BASELINE=0; shift;;
    --only) ONLY=$2; shift 2;;
    --warm) WARM=$2; shift 2;;
    --no-warm) WARM=0; shift;;
    --warm-modes) WARM_MODES=${2//,/ }; shift 2;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
export PATH="$PATH:/usr/local/cuda/bin" KSEARCH_PYTHON=${KSEARCH_PYTHON:-$(command -v python3)}
[ -n "$HARNESS" ] && export KSEARCH_HARNESS_DIR="$HARNESS"

echo "# eval-cost-gpu ($LABEL)"
echo "- command: bench/eval_cost_gpu.sh $BIN --label $LABEL${HARNESS:+ --harness $HARNESS}${TASKS:+ --tasks $TASKS} (tasks $ONLY; ncu $NCU, warm-up $WARMUP, baseline $BASELINE)"
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | sed 's/^/- gpu: /'
python3 -c 'import sys, torch, triton, numpy; print(f"- python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}, numpy {numpy.__version__}")'
echo "- nvcc: $(nvcc --version | tail -1)"
echo "- ksearch: $("$BIN" --version 2>&1 | head -1); harness: ${HARNESS:-embedded}; tasks: ${TASKS:-built-in}"

task_arg() { if [ -n "$TASKS" ]; then echo "$TASKS/$1"; else echo "$1"; fi; }
evaluate() {  # evaluate NAME TASK [extra args]: WORK/NAME.json and WORK/NAME.wall
  local name=$1 task=$2; shift 2
  local cache="$WORK/cache-$name"; rm -rf "$cache"; mkdir -p "$cache"
  ln -s "$WORK/python-bytecode" "$cache/python-bytecode"   # shared: see above
  local t0 t1
  t0=$(date +%s%N)
  KSEARCH_CACHE_DIR="$cache" "$BIN" eval "$(task_arg "$task")" "$@" --json --seed 1 \
    > "$WORK/$name.json" 2> "$WORK/$name.log"
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 )) > "$WORK/$name.wall_ms"
}

mkdir -p "$WORK/python-bytecode"
# Not measured: the OS's file cache, and ksearch's bytecode cache where the interpreter has none
# of its own (two evaluations in one process, so the warm server that writes it gets ready).
[ "$WARMUP" = 1 ] && evaluate warmup softmax_llm --repeat 2
for task in ${ONLY//,/ }; do
  evaluate "$task" "$task"
done
[ "$BASELINE" = 1 ] && evaluate baseline-torch_rms_norm rmsnorm_llm --baseline torch_rms_norm

repeat() {  # repeat NAME TASK MODE N: WORK/NAME.jsonl, one JSON line per evaluation
  local name=$1 task=$2 mode=$3 n=$4
  local cache="$WORK/cache-$name"; rm -rf "$cache"; mkdir -p "$cache"
  ln -s "$WORK/python-bytecode" "$cache/python-bytecode"
  local t0 t1
  t0=$(date +%s%N)
  if [ "$mode" = auto ]; then unset KSEARCH_WARM; else export KSEARCH_WARM=$mode; fi
  KSEARCH_CACHE_DIR="$cache" timeout 590 "$BIN" eval "$(task_arg "$task")" \
    --json --seed 1 --repeat "$n" > "$WORK/$name.jsonl" 2> "$WORK/$name.log"
  echo "rc $?" >> "$WORK/$name.log"
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 )) > "$WORK/$name.wall_ms"
}
if [ "$WARM" -gt 0 ] 2>/dev/null; then
  for task in ${ONLY//,/ }; do
    for m in $WARM_MODES; do
      case $m in
        auto) repeat "auto-$task" "$task" auto "$WARM";;
        warm) repeat "warm-$task" "$task" 1 "$WARM";;
        fresh) repeat "fresh-$task" "$task" 0 2;;
      esac
    done
  done
fi

if [ "$NCU" = 1 ]; then
  # The seeds built as the harness builds them, called by a small driver under ncu.
  for task in rmsnorm_llm softmax_llm; do
    src=$(task_arg "$task"); [ -d "$src" ] || src=tasks/$task
    nvcc -O3 -gencode 'arch=compute_90a,code=[sm_90a,compute_90a]' -Xcompiler -fPIC -lineinfo -c -o "$WORK/$task.o" "$src/seed.cu" &&
      nvcc -gencode 'arch=compute_90a,code=[sm_90a,compute_90a]' -Xcompiler -fPIC -shared -o "$WORK/$task.so" "$WORK/$task.o" ||
      echo "nvcc failed for $task" >&2
  done
  cat > "$WORK/ncu_driver.py" <<'PY'
import ctypes, sys, torch
work = sys.argv[1]
dev = torch.device("cuda", 0)
rms = ctypes.CDLL(f"{work}/rmsnorm_llm.so").rmsnorm_llm
rms.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2
smax = ctypes.CDLL(f"{work}/softmax_llm.so").softmax_llm
smax.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 2
calls = []
for m, n in ((1, 4096), (16, 8192)):
    x, w = torch.randn(m, n, device=dev).bfloat16(), torch.randn(n, device=dev).bfloat16()
    y = torch.empty_like(x)
    calls.append(lambda x=x, w=w, y=y, m=m, n=n: rms(x.data_ptr(), w.data_ptr(), y.data_ptr(), m, n))
for m, n in ((64, 32000), (7, 50257)):
    x = torch.randn(m, n, device=dev).bfloat16()
    y = torch.empty_like(x)
    calls.append(lambda x=x, y=y, m=m, n=n: smax(x.data_ptr(), y.data_ptr(), m, n))
x1, w1 = torch.randn(1, 4096, device=dev).bfloat16(), torch.randn(4096, device=dev).bfloat16()
calls.append(lambda: torch.nn.functional.rms_norm(x1, (4096,), w1, eps=1e-5))
torch.cuda.synchronize()
for call in calls:
    torch.cuda._sleep(1000)  # a separator between the configurations in ncu's list
    for _ in range(12):
        call()
torch.cuda._sleep(1000)
torch.cuda.synchronize()
PY
  ncu --clock-control none --cache-control all --csv --print-units base \
      --metrics gpu__time_duration.sum python3 "$WORK/ncu_driver.py" "$WORK" \
      > "$WORK/ncu.csv" 2> "$WORK/ncu.log" || echo "ncu failed: $(tail -3 "$WORK/ncu.log")" >&2
fi

python3 - "$WORK" "$LABEL" "$JSON" "$NCU" <<'PY'
import csv, json, os, statistics, sys
work, label, out, ncu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
tasks = ["mamba_scan", "attention_prefill", "gqa_paged_decode", "rmsnorm_llm", "softmax_llm"]
stages = ["startup", "reference", "compile", "load", "correctness", "timing"]
figures, records = {}, {}
print()
print("| task | status | wall s | " + " | ".join(stages) + " | timed calls per workload (min) |")
print("|---|---|---|" + "---|" * len(stages) + "---|")
for name in tasks + ["baseline-torch_rms_norm"]:
    if not os.path.exists(os.path.join(work, f"{name}.wall_ms")):
        continue
    wall = int(open(os.path.join(work, f"{name}.wall_ms")).read()) / 1e3
    try:
        j = json.load(open(os.path.join(work, f"{name}.json")))
    except ValueError:
        tail = open(os.path.join(work, f"{name}.log")).read()[-300:]
        print(f"| {name} | no JSON ({tail!r}) | {wall:.1f} |" + " |" * len(stages) + " |")
        continue
    records[name] = j
    st = j.get("stage_seconds") or {}
    counts = [len((w.get("timing") or {}).get("candidate_ns") or []) for w in j["workloads"]]
    figures[name] = {"status": j["status"], "wall_s": round(wall, 2),
                     "timed_calls_min": min(counts) if counts else 0,
                     "timed_calls": counts,
                     "stage_seconds": {k: round(st.get(k, 0.0), 3) for k in stages}}
    print(f"| {name} | {j['status']} | {wall:.1f} | "
          + " | ".join(f"{st.get(k, 0.0):.2f}" for k in stages)
          + f" | {', '.join(map(str, counts))} ({min(counts) if counts else 0}) |")
if "baseline-torch_rms_norm" in figures:
    figures["baseline-torch_rms_norm"]["note"] = "not a task: the Python-callable baseline of the fidelity check"

print()
print("Medians per workload (us): candidate (CUDA events) / its host clock / reference")
for name, j in records.items():
    row = []
    for w in j["workloads"]:
        t = w.get("timing")
        if t:
            row.append(f"{w['uuid'].split('-', 1)[-1]} {t['candidate']['median_ns'] / 1e3:.1f}"
                       f"/{(t.get('candidate_host') or {}).get('median_ns', 0) / 1e3:.1f}"
                       f"/{t['reference']['median_ns'] / 1e3:.1f}")
        else:
            row.append(f"{w['uuid']}: {w['status']}")
    print(f"- {name}: " + "; ".join(row))


def ksearch_median(name, uuid):
    for w in (records.get(name) or {}).get("workloads", []):
        if w["uuid"] == uuid and w.get("timing"):
            return w["timing"]["candidate"]["median_ns"] / 1e3
    return None


fidelity = []
configs = [("rmsnorm_llm seed 1x4096", "rmsnorm_llm", "rmsnorm_llm-1x4096"),
           ("rmsnorm_llm seed 16x8192", "rmsnorm_llm", "rmsnorm_llm-16x8192"),
           ("softmax_llm seed 64x32000", "softmax_llm", "softmax_llm-64x32000"),
           ("softmax_llm seed 7x50257", "softmax_llm", "softmax_llm-7x50257"),
           ("torch rms_norm (baseline torch_rms_norm) 1x4096", "baseline-torch_rms_norm",
            "rmsnorm_llm-1x4096")]
if not ncu:
    for kernel, name, uuid in configs:
        mine = ksearch_median(name, uuid)
        fidelity.append({"kernel": kernel, "ksearch_us": mine and round(mine, 2),
                         "independent_us": None})
    print()
    print("ksearch medians of the fidelity kernels (us): "
          + "; ".join(f"{f['kernel']}: {f['ksearch_us']}" for f in fidelity))
else:
    rows = [r for r in csv.DictReader(l for l in open(os.path.join(work, "ncu.csv"))
                                      if not l.startswith("=="))]
    groups, current = [], None
    for r in rows:
        if "sleep" in r["Kernel Name"].lower() or "spin" in r["Kernel Name"].lower():
            current = []
            groups.append(current)
        elif current is not None:
            current.append(float(r["Metric Value"].replace(",", "")))
    print()
    print("| kernel | ksearch median us | ncu gpu__time_duration median us | difference |")
    print("|---|---|---|---|")
    for (kernel, name, uuid), values in zip(configs, groups):
        per = len(values) // 12 or 1
        calls = [sum(values[i * per:(i + 1) * per]) / 1e3 for i in range(len(values) // per)]
        independent = statistics.median(calls[2:]) if len(calls) > 2 else None
        mine = ksearch_median(name, uuid)
        fidelity.append({"kernel": kernel, "ksearch_us": mine and round(mine, 2),
                         "independent_us": independent and round(independent, 2),
                         "independent": "ncu gpu__time_duration, --cache-control all, "
                                        "--clock-control none, median of calls 2-11"})
        diff = (f"{mine - independent:+.2f} us ({100 * (mine / independent - 1):+.0f}%)"
                if mine and independent else "-")
        print(f"| {kernel} | {mine if mine is None else round(mine, 2)} | "
              f"{independent if independent is None else round(independent, 2)} | {diff} |")
figures["fidelity"] = fidelity
if out:
    with open(out, "w") as f:
        json.dump(figures, f, indent=1)
PY

[ "$WARM" -gt 0 ] 2>/dev/null && python3 - "$WORK" "$ONLY" "$JSON" <<'PY'
# The warm-server table: evaluations in one ksearch process, the first (cold: it starts the
# warm server, or a fresh process) against the later ones. Robust to failed runs: a row says
# what is missing.
import json, os, statistics, sys
work, only, out = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
stages = ["startup", "reference", "compile", "load", "correctness", "timing"]
rows = {}
print()
print("Warm server: `ksearch eval TASK --repeat N` in one process; wall s and stage s of the first "
      "(cold) evaluation and the median of the later (warm) ones; a log note 'fresh process' "
      "means the warm path fell back")
print()
print("| task | mode | n | statuses | fell back | first wall s | later wall s | first startup s "
      "| later startup s | later stages (" + ", ".join(stages[1:]) + ") | process s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for task in only:
    for mode in ("auto", "warm", "fresh"):
        name = f"{mode}-{task}"
        path = os.path.join(work, f"{name}.jsonl")
        if not os.path.exists(path):
            continue
        recs = []
        for line in open(path):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
        try:
            total = int(open(os.path.join(work, f"{name}.wall_ms")).read()) / 1e3
        except (OSError, ValueError):
            total = float("nan")
        if not recs:
            tail = open(os.path.join(work, f"{name}.log")).read()[-200:]
            print(f"| {task} | {mode} | 0 | no JSON ({tail!r}) | | | | | | | {total:.1f} |")
            continue
        walls = [r.get("wall_seconds", float("nan")) for r in recs]
        st = [r.get("stage_seconds") or {} for r in recs]
        med = lambda xs: statistics.median(xs) if xs else float("nan")
        later_stage = {k: med([s.get(k, 0.0) for s in st[1:]]) for k in stages}
        # A fresh process while the server starts (mode auto's first) is not a fall-back.
        fell = sum("fresh process" in (r.get("log") or "")
                   and "warm server is starting" not in (r.get("log") or "") for r in recs)
        statuses = ",".join(sorted({r.get("status", "?") for r in recs}))
        rows[name] = {"n": len(recs), "statuses": statuses, "fell_back": fell,
                      "walls_s": [round(w, 3) for w in walls],
                      "startup_s": [round(s.get("startup", 0.0), 3) for s in st],
                      "later_stage_s": {k: round(v, 3) for k, v in later_stage.items()},
                      "process_s": round(total, 2)}
        print(f"| {task} | {mode} | {len(recs)} | {statuses} | {fell} | {walls[0]:.2f} "
              f"| {med(walls[1:]):.2f} | {st[0].get('startup', 0.0):.2f} "
              f"| {later_stage['startup']:.2f} | "
              + ", ".join(f"{later_stage[k]:.2f}" for k in stages[1:]) + f" | {total:.1f} |")
if out and os.path.exists(out):
    try:
        figures = json.load(open(out))
        figures["warm"] = rows
        json.dump(figures, open(out, "w"), indent=1)
    except (OSError, ValueError):
        pass
PY
