#!/usr/bin/env bash
# The GPU part of the adversarial suite (docs/threat-model.md): the hacks that need a device,
# evaluated once on the H200 through the ksearch binary. The CPU part runs in CI
# (crates/cli/tests/adversarial.rs, harness/tests/test_adversarial.py).
#
# Makes a GPU copy of tasks/softmax (a PyTorch reference on the device, three workloads, the
# cuda language), then evaluates every candidate of tests/adversarial/cuda and
# tests/adversarial/triton and compares its status (and the timing flag) with the one its file
# expects. Prints the environment and a Markdown table for bench/results/adversarial-gpu.md;
# raw JSON records are kept in the work folder ($KEEP, if set, else a temp dir). Exits 1 when
# a case is not as expected.
#
# Usage: [ONLY=case.cu,...] bench/adversarial_gpu.sh [KSEARCH_BINARY]
#   default binary: .gpu-transfer/bin/ksearch, else target/release/ksearch.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-.gpu-transfer/bin/ksearch}
[ -x "$BIN" ] || BIN=target/release/ksearch
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
export KSEARCH_CACHE_DIR="$WORK/cache"

echo "# command: bench/adversarial_gpu.sh $BIN"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/# gpu: /'
python3 -c 'import torch, triton, sys; print(f"# python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}")'

python3 - "$BIN" "$WORK" <<'PY'
import json, os, shutil, subprocess, sys, time

binary, work = os.path.abspath(sys.argv[1]), sys.argv[2]
sys.path.insert(0, "bench")
from softmax_gpu_task import make  # noqa: E402
task = make(work)

# (file, expected status, expected flag, reason fragment, import check); the files say why.
# The import check (harness/ksearch_harness/backends/cuda/imports.py) refuses the hacks that call
# what a kernel never needs before they are linked; each is then run again without it, so the
# runtime defence behind it is tested too ("layer shown", docs/threat-model.md).
cases = [
    ("cuda/honest.cu", "passed", False, "", True),
    ("cuda/side_stream.cu", "rejected", False, "cudaStreamCreateWithFlags", True),
    ("cuda/side_stream.cu", "passed", True, "", False),
    ("cuda/host_thread.cu", "rejected", False, "_M_start_thread", True),
    ("cuda/host_thread.cu", "incorrect_numerical", False, "NaN poison", False),
    ("cuda/mutate_input.cu", "incorrect_numerical", False, "modified its input 'x'", True),
    ("cuda/partial_write.cu", "incorrect_numerical", False, "NaN poison", True),
    ("cuda/pointer_cache.cu", "incorrect_numerical", False, "are results cached", True),
    ("cuda/downcast.cu", "incorrect_numerical", False, "output 'y'", True),
    ("cuda/shape_cache.cu", "incorrect_numerical", False, "output 'y'", True),
    ("cuda/constant_output.cu", "incorrect_numerical", False, "output 'y'", True),
    ("triton/side_stream.py", "passed", True, "", True),
    ("cuda/reference_fallback.cu", "rejected", False, "dlsym", True),
    ("cuda/driver_stream.cu", "rejected", False, "cuStreamCreate", True),
    ("cuda/raw_syscall.cu", "rejected", False, "instruction syscall", True),
    # Host code that sets ksearch's CPU-time limit to 0, its priority and scheduling policy
    # (issue 19): ksearch's guard on the harness refuses each call, the kernel passes, and
    # ksearch lives to print the record (before the guard: no JSON, ksearch killed).
    ("cuda/other_processes.cu", "passed", False, "", True),
    # A known limit while GPU candidates share the harness's process (docs/threat-model.md).
    ("cuda/reference_fallback.cu", "passed", False, "", False),
    ("cuda/infinite_loop.cu", "timeout", False, "limit", True),
    ("cuda/honest.cu", "passed", False, "", True),  # the device recovered from everything above
]

# What a case's log must show beyond its status: every host call refused, none reached.
def every_call_refused(log):
    calls = [l for l in log.splitlines() if l.split("(")[0] in
             ("prlimit", "setpriority", "sched_setscheduler")]
    return len(calls) == 3 and all(l.endswith(") refused (Operation not permitted)")
                                   for l in calls)


log_checks = {"cuda/other_processes.cu": every_call_refused}

# ONLY=a.cu,b.cu keeps only those cases (a device call with little time left).
only = [x for x in os.environ.get("ONLY", "").split(",") if x]
if only:
    cases = [c for c in cases if any(c[0].endswith(o) for o in only)]

rows, bad = [], []
for i, (name, want, want_flag, fragment, checked) in enumerate(cases):
    src = os.path.join("tests/adversarial", name)
    path = os.path.join(work, os.path.basename(name))
    shutil.copy(src, path)
    env = dict(os.environ, KSEARCH_IMPORT_CHECK="on" if checked else "off")
    start = time.time()
    proc = subprocess.run([binary, "eval", task, path, "--json", "--seed", "7"],
                          capture_output=True, text=True, timeout=600, env=env)
    wall = time.time() - start
    try:
        record = json.loads(proc.stdout)
    except ValueError:
        record = {"status": f"no JSON (exit {proc.returncode})", "reason": proc.stderr[-300:]}
    with open(os.path.join(work, f"record-{i}.json"), "w") as f:
        json.dump(record, f, indent=1)
    timed = [w for w in record.get("workloads", []) if w.get("timing")]
    flags = [w["timing"]["suspicious"] for w in timed if w["timing"].get("suspicious")]
    status = record.get("status")
    reason = (record.get("reason") or (flags[0] if flags else "") or "").replace("\n", " ")
    ok = status == want and bool(flags) == want_flag and fragment in reason
    if name in log_checks and not log_checks[name](record.get("log") or ""):
        ok = False
        reason = "log: " + " / ".join((record.get("log") or "").splitlines()[-4:]) + " " + reason
    if not ok:
        bad.append(name)
    big = timed[-1]["timing"] if timed else {}
    med = lambda k: f"{big[k]['median_ns'] / 1e3:.1f}" if big.get(k) else "-"
    rows.append((name + ("" if checked else " (import check off)"),
                 want + (", flagged" if want_flag else ""),
                 status + (", flagged" if flags else ""), "yes" if ok else "NO",
                 med("candidate"), med("candidate_host"), med("reference"), f"{wall:.1f}",
                 reason[:180]))

print()
print("Times: medians on the largest timed workload, in microseconds: candidate (CUDA events), "
      "candidate host clock (device-wide synchronise), reference.")
print()
head = ("candidate", "expected", "status", "as expected", "cand us", "cand host us", "ref us",
        "wall s", "reason / flag")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join(str(c).replace("|", "/") for c in r) + " |")
print()
print("all as expected" if not bad else f"NOT as expected: {', '.join(bad)}")
sys.exit(1 if bad else 0)
PY
