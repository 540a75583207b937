#!/usr/bin/env python3
"""An attention kernel of tasks/mlx_attention against mx.fast.scaled_dot_product_attention, at
the task's shapes (fp16, B=1, H=32, D=128, L in {1024, 4096}, causal and not).

    python3 bench/mlx_attention.py [--kernel PATH] [--lengths 1024,4096] [--md bench/results/mlx.md]

PATH is a candidate of the task: a launch spec or launcher, a folder holding one (a run
directory: its best/), or a Solution JSON; the default is the task's naive seed. Per case:
median and IQR of the wall time of single calls, each between a synchronise and the evaluation
of its result plus another synchronise (inputs made once per case, outside the timing), the
achieved TFLOP/s (4 L^2 D per head, half of it causal), and the kernel's time over SDPA's. Both
outputs are checked against an fp32 MLX reference under the task's tolerance (atol 5e-3, rtol
2e-3) on heavy-tailed inputs; a kernel outside it fails the run (exit 1).

Runs where MLX has a GPU (an Apple GPU, or MLX's CUDA backend, pip package mlx-cuda-13,
on an NVIDIA GPU).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("MLX_ENABLE_TF32", "0")

import numpy as np  # noqa: E402

import mlx.core as mx  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))
from ksearch_harness.backends import mlx as mlx_backend  # noqa: E402

TASK = os.path.join(ROOT, "tasks", "mlx_attention")
HEADS, HEAD_DIM = 32, 128
ATOL, RTOL = 5e-3, 2e-3


def task_functions():
    with open(os.path.join(TASK, "definition.json")) as f:
        definition = json.load(f)
    namespace = {}
    exec(compile(definition["reference"], "mlx_attention reference", "exec"), namespace)
    baseline = {}
    with open(os.path.join(TASK, "baselines", "mlx_sdpa.py")) as f:
        exec(compile(f.read(), "baselines/mlx_sdpa.py", "exec"), baseline)
    return definition, namespace["run"], baseline["run"]


def timed(fn, args, warmup, iterations):
    for _ in range(warmup):
        mx.eval(fn(*args))
    samples = []
    for _ in range(iterations):
        mx.synchronize()
        t0 = time.perf_counter_ns()
        out = fn(*args)
        mx.eval(out)
        mx.synchronize()
        samples.append(time.perf_counter_ns() - t0)
        del out
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    return median / 1e6, (q3 - q1) / 1e6


def worst(got, want):
    """Largest |got - want| / (atol + rtol |want|): 1.0 is the task's bound."""
    g = np.array(got.astype(mx.float32), np.float64)
    w = np.array(want.astype(mx.float32), np.float64)
    if not np.isfinite(g).all():
        return float("inf")
    return float(np.max(np.abs(g - w) / (ATOL + RTOL * np.abs(w))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default=os.path.join(TASK, "seed.toml"))
    parser.add_argument("--entry", default="mlx_attention",
                        help="the candidate's entry (a baseline's is run)")
    parser.add_argument("--lengths", default="1024,4096")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--md", help="write the markdown section into this file "
                                     "(bench/results/mlx.md), replacing an earlier one")
    args = parser.parse_args()

    definition, reference, sdpa = task_functions()
    kernel = mlx_backend.load_callable(mlx_backend.candidate_at(args.kernel, args.entry),
                                       definition)
    rng = np.random.default_rng(args.seed)
    rows, failed = [], False
    for L in [int(v) for v in args.lengths.split(",") if v]:
        shape = (args.batch, HEADS, L, HEAD_DIM)
        q, k, v = (mx.array(rng.standard_t(3.0, shape).astype(np.float16)) for _ in range(3))
        mx.eval(q, k, v)
        for causal in (0, 1):
            want = reference(q, k, v, causal)
            mx.eval(want)
            ours = lambda q, k, v, c: kernel(q, k, v, c)[0]  # noqa: E731
            mine_err, sdpa_err = worst(ours(q, k, v, causal), want), worst(sdpa(q, k, v, causal),
                                                                          want)
            del want
            mine_ms, mine_iqr = timed(ours, (q, k, v, causal), args.warmup, args.iterations)
            sdpa_ms, sdpa_iqr = timed(sdpa, (q, k, v, causal), args.warmup, args.iterations)
            flops = 4.0 * args.batch * HEADS * L * L * HEAD_DIM * (0.5 if causal else 1.0)
            row = {"L": L, "causal": causal, "kernel_ms": mine_ms, "kernel_iqr_ms": mine_iqr,
                   "sdpa_ms": sdpa_ms, "sdpa_iqr_ms": sdpa_iqr,
                   "kernel_tflops": flops / mine_ms / 1e9, "sdpa_tflops": flops / sdpa_ms / 1e9,
                   "sdpa_over_kernel": sdpa_ms / mine_ms, "kernel_err_over_bound": mine_err,
                   "sdpa_err_over_bound": sdpa_err, "match": mine_err <= 1.0}
            failed |= not row["match"]
            rows.append(row)
            print(json.dumps(row), flush=True)
        del q, k, v
    report = {"device": str(mx.default_device()), "device_info": _device_info(),
              "mlx": mx.__version__, "kernel": args.kernel, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    text = markdown(report, args)
    print(text)
    if args.md:
        write_section(args.md, "mlx_attention.py", text)
    return 1 if failed else 0


def markdown(r, args):
    kernel = os.path.relpath(args.kernel, ROOT) if os.path.isabs(args.kernel) else args.kernel
    lines = ["### Attention against mx.fast.scaled_dot_product_attention (bench/mlx_attention.py)",
             "", f"{r['device']}, {r['device_info']}; MLX {r['mlx']}. Kernel: `{kernel}`. fp16, "
                 f"B={args.batch}, H={HEADS}, D={HEAD_DIM}, heavy-tailed inputs; median (IQR) of "
                 f"{args.iterations} calls.", "",
             "| L | causal | kernel ms | SDPA ms | kernel TFLOP/s | SDPA TFLOP/s | SDPA time / "
             "kernel time | kernel err / bound | SDPA err / bound |",
             "|---|---|---|---|---|---|---|---|---|"]
    for x in r["rows"]:
        lines.append(f"| {x['L']} | {'yes' if x['causal'] else 'no'} | {x['kernel_ms']:.3f} "
                     f"({x['kernel_iqr_ms']:.3f}) | {x['sdpa_ms']:.3f} ({x['sdpa_iqr_ms']:.3f}) | "
                     f"{x['kernel_tflops']:.1f} | {x['sdpa_tflops']:.1f} | "
                     f"{x['sdpa_over_kernel']:.2f}x | {x['kernel_err_over_bound']:.2f} | "
                     f"{x['sdpa_err_over_bound']:.2f} |")
    lines += ["", "Error / bound: the largest |out - ref| / (5e-3 + 2e-3 |ref|) against the task's "
                  "fp32 MLX reference (1.0 is the task's tolerance)."]
    return "\n".join(lines)


def write_section(path, name, text):
    """Replace the section between this script's markers in `path` (append it the first time)."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    old = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + block + "\n"
    with open(path, "w") as f:
        f.write(new)


def _device_info():
    try:
        info = mx.device_info()
        return info.get("device_name") or info.get("architecture")
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    sys.exit(main())
