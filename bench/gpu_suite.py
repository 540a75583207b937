#!/usr/bin/env python3
"""The GPU task suite: every GPU task's seed kernel and every baseline, evaluated with ksearch on
this machine's GPU, summed up in one Markdown table per task.

For each task (every built-in task whose kernel language is not `c`, or those named with
--tasks) it runs

    KSEARCH eval TASK --json --seed S                    (the seed kernel)
    KSEARCH eval TASK --baseline NAME --json --seed S    (each [[baselines]] entry of task.toml)
    KSEARCH eval TASK FILE --json --seed S               (each --solution TASK=FILE)

one after the other (one evaluation holds the GPU at a time), keeps each raw JSON record (with
its samples and provenance) under --out, and prints per workload and solution: status, median
and IQR of the kernel time, the achieved bandwidth and arithmetic rate with their fraction of the
device's measured ceilings, and the ratio to each baseline (the baseline's median over this
one's: above 1 means faster than that baseline). The PyTorch reference, which every evaluation
times too, gets a row from the seed's evaluation.

Ceilings (bench/results/h200-peaks.md, measured on the H200): device-to-device copy 4.16 TB/s, bf16
GEMM ~785 TFLOP/s (a tensor-core rate: the fraction matters for the attention tasks; the scan and
the norms cannot use tensor cores). Rates come from each task's [roofline] formulas, except that
attention_prefill's flop formula counts the causal half (a floor must hold for every workload)
and is doubled here for its non-causal workloads.

Needs only the ksearch binary, python3 (3.8+; the evaluations need PyTorch, as the references do)
and this repository (task.toml and workloads.jsonl are read from tasks/). --from DIR renders the
tables again from the JSON records of an earlier run without evaluating anything.
"""

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPY_GBPS = 4164.0       # device-to-device copy, bench/results/h200-peaks.md
TENSOR_TFLOPS = 785.0    # bf16 GEMM, bench/results/h200-peaks.md


def baseline_names(task):
    """Names of task.toml's [[baselines]], in order (tomllib where there is one, else a scan)."""
    path = os.path.join(REPO, "tasks", task, "task.toml")
    if not os.path.exists(path):
        return []
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is not None:
        with open(path, "rb") as f:
            return [b["name"] for b in tomllib.load(f).get("baselines", [])]
    names, inside = [], False
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                inside = line == "[[baselines]]"
            m = re.match(r'name\s*=\s*"([^"]+)"', line)
            if inside and m:
                names.append(m.group(1))
    return names


def workload_inputs(task):
    """uuid -> the workload's `inputs` descriptors, from the repository's workloads.jsonl."""
    path = os.path.join(REPO, "tasks", task, "workloads.jsonl")
    found = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    w = json.loads(line)
                    w = w.get("workload", w)
                    found[w["uuid"]] = w.get("inputs") or {}
    return found


def flop_factor(task, inputs):
    """What the task's flop formula must be multiplied by for this workload (see the docstring)."""
    if task == "attention_prefill":
        causal = (inputs.get("causal") or {}).get("value", 1)
        return 1.0 if causal else 2.0
    return 1.0


def gpu_tasks(binary):
    out = subprocess.run([binary, "tasks", "--json"], capture_output=True, text=True, check=True)
    return [t["name"] for t in json.loads(out.stdout)["tasks"] if t.get("language") != "c"]


def evaluate(binary, task, label, extra, seed, timeout, out_dir):
    """Runs one evaluation; returns its JSON record, or a stand-in saying why there is none."""
    cmd = [binary, "eval", task] + extra + ["--json", "--seed", str(seed)]
    if timeout:
        cmd += ["--timeout", str(timeout)]
    print(f"[gpu_suite] {' '.join(cmd)}", file=sys.stderr, flush=True)
    stem = os.path.join(out_dir, f"{task}.{label}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    with open(stem + ".log", "w") as f:
        f.write(proc.stderr)
    try:
        record = json.loads(proc.stdout)
    except ValueError:
        tail = " ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit code {proc.returncode}"
        record = {"status": "not_run", "reason": f"no JSON from ksearch eval: {tail}",
                  "workloads": []}
    record["_command"] = cmd
    with open(stem + ".json", "w") as f:
        json.dump(record, f)
    return record


def load_runs(out_dir, task):
    runs = []
    for name in sorted(os.listdir(out_dir)):
        if name.startswith(task + ".") and name.endswith(".json"):
            with open(os.path.join(out_dir, name)) as f:
                runs.append((name[len(task) + 1:-len(".json")], json.load(f)))
    # the seed first, then the baselines in task.toml order, then other solutions
    order = {"seed": 0}
    order.update({f"baseline-{b}": i + 1 for i, b in enumerate(baseline_names(task))})
    return sorted(runs, key=lambda r: (order.get(r[0], 99), r[0]))


def fmt_time(ns):
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} us"


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def rows_of(task, label, record, inputs):
    """One row per workload: (uuid, solution, status, median, iqr, GB/s, TFLOP/s, suspicious)."""
    rows = []
    for w in record.get("workloads", []):
        t = w.get("timing")
        status = w.get("status", "?")
        if t is None:
            rows.append(dict(uuid=w["uuid"], solution=label, status=status, median=None, iqr=None,
                             gbps=None, tflops=None, flag=w.get("reason")))
            continue
        factor = flop_factor(task, inputs.get(w["uuid"], {}))
        gflops = t.get("achieved_gflop_per_s")
        rows.append(dict(uuid=w["uuid"], solution=label, status=status,
                         median=t["candidate"]["median_ns"], iqr=t["candidate"]["iqr_ns"],
                         gbps=t.get("achieved_gb_per_s"),
                         tflops=None if gflops is None else gflops * factor / 1e3,
                         flag=t.get("suspicious")))
    return rows


def reference_rows(task, record, inputs):
    """The reference's timing, as measured in the seed's evaluation."""
    rows = []
    for w in record.get("workloads", []):
        t = w.get("timing")
        if not t:
            continue
        ref = t["reference"]["median_ns"]
        cand = t["candidate"]["median_ns"]
        # The roofline rates scale inversely with time: the reference's = the seed's * cand / ref.
        scale = cand / ref
        factor = flop_factor(task, inputs.get(w["uuid"], {}))
        gbps, gflops = t.get("achieved_gb_per_s"), t.get("achieved_gflop_per_s")
        rows.append(dict(uuid=w["uuid"], solution="reference", status="-",
                         median=ref, iqr=t["reference"]["iqr_ns"],
                         gbps=None if gbps is None else gbps * scale,
                         tflops=None if gflops is None else gflops * scale * factor / 1e3,
                         flag=None))
    return rows


def render_task(task, runs):
    inputs = workload_inputs(task)
    baselines = [label[len("baseline-"):] for label, _ in runs if label.startswith("baseline-")]
    rows = []
    for label, record in runs:
        rows += rows_of(task, label, record, inputs)
        if label == "seed":
            rows += reference_rows(task, record, inputs)
    medians = {(r["uuid"], r["solution"]): r["median"] for r in rows}
    lines = [f"### {task}", ""]
    for label, record in runs:
        # Whole-evaluation time (the tasks aim at under 60 s each) and its largest stages.
        stages = sorted((record.get("stage_seconds") or {}).items(), key=lambda kv: -kv[1])[:3]
        took = f"{record['wall_seconds']:.1f} s" if record.get("wall_seconds") is not None else "-"
        detail = ", ".join(f"{k} {v:.1f} s" for k, v in stages)
        line = f"- {label}: {record.get('status')}, evaluation {took}" + (f" ({detail})" if detail else "")
        if record.get("status") != "passed":
            line += f": {record.get('reason') or ''}"
        lines.append(line)
    lines.append("")
    head = ["workload", "solution", "status", "median", "IQR", "GB/s", "% of 4.3 TB/s",
            "TFLOP/s", "% of 790"] + [f"vs {b}" for b in baselines]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = list(dict.fromkeys(r["uuid"] for r in rows))
    for uuid in order:
        for r in (r for r in rows if r["uuid"] == uuid):
            ratios = []
            for b in baselines:
                base = medians.get((uuid, f"baseline-{b}"))
                ratios.append("-" if base is None or r["median"] is None
                              else f"{base / r['median']:.2f}x")
            gbps, tflops = r["gbps"], r["tflops"]
            cells = [uuid, r["solution"], r["status"], fmt_time(r["median"]), fmt_time(r["iqr"]),
                     fmt(gbps, ".0f"), fmt(None if gbps is None else 100 * gbps / COPY_GBPS, ".1f"),
                     fmt(tflops, ".2f"),
                     fmt(None if tflops is None else 100 * tflops / TENSOR_TFLOPS, ".1f")] + ratios
            lines.append("| " + " | ".join(cells) + " |")
            if r["flag"] and r["status"] == "passed":
                lines.append(f"| | | warning: {r['flag']} |" + " |" * (len(head) - 3))
    # Geometric means of each solution's ratio to each baseline over the workloads both timed.
    summary = []
    for label, _ in runs + [("reference", None)]:
        name = label
        parts = []
        for b in baselines:
            ratios = [medians[(u, f"baseline-{b}")] / medians[(u, name)] for u in order
                      if medians.get((u, f"baseline-{b}")) and medians.get((u, name))]
            if ratios and name != f"baseline-{b}":
                gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
                parts.append(f"{gm:.3g}x {b}'s speed ({len(ratios)} workloads)")
        if parts:
            summary.append(f"- {name}: " + "; ".join(parts))
    if summary:
        lines += ["", "Geometric mean over workloads:"] + summary
    return "\n".join(lines) + "\n"


def provenance_line(runs_by_task):
    for runs in runs_by_task.values():
        for _, record in runs:
            p = record.get("provenance")
            if p:
                env = p.get("environment") or {}
                bits = [f"device: {p.get('device')}", f"backend: {p.get('backend')}",
                        f"seed: {p.get('seed')}", f"harness {p.get('harness_version')}"]
                for key in ("torch", "cuda", "nvcc", "driver", "gpu"):
                    if env.get(key):
                        bits.append(f"{key}: {env[key]}")
                return ", ".join(bits)
    return "no evaluation produced a record"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", nargs="?", help="the ksearch binary (not needed with --from)")
    ap.add_argument("--tasks", help="comma-separated task names (default: every non-C built-in task)")
    ap.add_argument("--seed", type=int, default=1, help="input seed of every evaluation (default 1)")
    ap.add_argument("--timeout", type=float, help="passed to ksearch eval --timeout")
    ap.add_argument("--solution", action="append", default=[], metavar="TASK=FILE",
                    help="also evaluate FILE (a source file or Solution JSON) on TASK")
    ap.add_argument("--out", help="folder for the raw JSON records and logs "
                                  "(default: bench/results/gpu-suite-raw)")
    ap.add_argument("--md", help="also write the Markdown report to this file")
    ap.add_argument("--from", dest="from_dir", help="render the records in this folder; run nothing")
    args = ap.parse_args()

    out_dir = args.from_dir or args.out or os.path.join(REPO, "bench", "results", "gpu-suite-raw")
    os.makedirs(out_dir, exist_ok=True)
    extra_solutions = {}
    for item in args.solution:
        task, sep, path = item.partition("=")
        if not sep or not path:
            ap.error(f"--solution wants TASK=FILE, got {item!r}")
        extra_solutions.setdefault(task, []).append(os.path.abspath(path))

    if args.from_dir:
        tasks = args.tasks.split(",") if args.tasks else sorted(
            {n.split(".")[0] for n in os.listdir(out_dir) if n.endswith(".json")})
    else:
        if not args.binary:
            ap.error("give the ksearch binary (or --from DIR)")
        binary = os.path.abspath(args.binary) if os.path.sep in args.binary else args.binary
        tasks = args.tasks.split(",") if args.tasks else gpu_tasks(binary)
        for task in tasks:
            for name in list(os.listdir(out_dir)):
                if name.startswith(task + "."):
                    os.remove(os.path.join(out_dir, name))  # no stale records from earlier runs
            evaluate(binary, task, "seed", [], args.seed, args.timeout, out_dir)
            for b in baseline_names(task):
                evaluate(binary, task, f"baseline-{b}", ["--baseline", b], args.seed,
                         args.timeout, out_dir)
            for i, path in enumerate(extra_solutions.get(task, [])):
                label = f"solution-{i}-{os.path.splitext(os.path.basename(path))[0]}"
                evaluate(binary, task, label, [path], args.seed, args.timeout, out_dir)

    runs_by_task = {task: load_runs(out_dir, task) for task in tasks}
    report = [
        "# GPU task suite",
        "",
        f"{datetime.date.today().isoformat()}; {provenance_line(runs_by_task)}.",
        f"Raw records: {os.path.relpath(out_dir, REPO) if out_dir.startswith(REPO) else out_dir}. "
        "Generated by bench/gpu_suite.sh.",
        "",
        "median and IQR: the kernel's time per call over the timed calls (CUDA events, L2 flushed "
        "between calls); GB/s and TFLOP/s from the task's [roofline] formulas; ceilings: "
        f"{COPY_GBPS / 1e3:.1f} TB/s device copy and {TENSOR_TFLOPS:.0f} TFLOP/s bf16 GEMM, "
        "measured on the H200; 'vs B': B's median / this median (above 1: faster than B).",
        "",
    ]
    failed = False
    for task in tasks:
        runs = runs_by_task[task]
        if not runs:
            report += [f"### {task}", "", "no records", ""]
            failed = True
            continue
        failed |= any(r.get("status") != "passed" for _, r in runs)
        report.append(render_task(task, runs))
    text = "\n".join(report)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
