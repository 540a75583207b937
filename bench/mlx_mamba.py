#!/usr/bin/env python3
"""mlx-lm's Mamba at mamba-370m shapes with random fp16 weights: prefill and decode speed as
mlx-lm ships it, then with kernels found by ksearch patched into its mixer (MambaBlock).

    python3 bench/mlx_mamba.py [--scan PATH] [--step PATH] [--lengths 512,4096]
                               [--decode-tokens 64] [--md bench/results/mlx.md] [--json FILE]

PATH is a candidate of tasks/mlx_mamba_scan (--scan) or tasks/mlx_mamba_step (--step): a
launch spec or launcher, a folder holding one (a run directory: its best/), or a Solution
JSON; the default is the task's naive seed. The scan kernel replaces mlx-lm's per-token loop of
ssm_step calls in a prefill and returns the final state; the step kernel replaces ssm_step when
decoding. The rest of the mixer (in_proj, the depthwise conv, x_proj, dt_proj, out_proj) stays
mlx-lm's MLX operations; the kernels take dt_proj's output without its bias (the bias enters
their softplus) and apply the gate silu(z) themselves, and keep the state in fp32.

Checks: the patched model's logits are compared with mlx-lm's on the same tokens (relative L2
error, largest difference, greedy-token agreement), and both with the same weights run in fp32
through mlx-lm (the judge of which is closer: mlx-lm in fp16 keeps its state in fp16). A
relative error above --tol fails the run (exit 1).

Speed: prefill tokens/s = L / (wall time of one forward pass over L tokens, evaluated and
synchronised); decode tokens/s = generated tokens / wall time of a greedy loop that overlaps
building the next step with the device's work (mx.async_eval), as mlx-lm's generate does,
after a 16-token prompt. mlx-lm's prefill at L=4096 takes about half a minute on an H200, so it
runs once (--repeats applies to the rest); the patched model runs once untimed at each length
first, since a kernel is compiled for each new set of template constants (the length is one).

Runs where MLX has a GPU (an Apple GPU, or MLX's CUDA backend: shared/device/mlx-cuda/prepare.sh
brings MLX and mlx-lm to the H200). MLX_ENABLE_TF32=0 keeps fp32 products (the judge) in fp32.
"""

import argparse
import json
import math
import os
import sys
import time
from contextlib import contextmanager

os.environ.setdefault("MLX_ENABLE_TF32", "0")

import numpy as np  # noqa: E402

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
from mlx.utils import tree_flatten, tree_unflatten  # noqa: E402


def _import_mamba():
    """mlx_lm.models.mamba without running mlx_lm/__init__.py, which imports the Hugging Face
    libraries (transformers, huggingface_hub) that the model code does not need and that the
    GPU machine lacks (mlx-lm is installed there without its dependencies)."""
    import importlib.util
    import types
    if "mlx_lm" not in sys.modules:
        found = importlib.util.find_spec("mlx_lm")
        if found is None:
            sys.exit("mlx-lm is not installed (pip install mlx-lm, or "
                     "shared/device/mlx-cuda/prepare.sh on the GPU machine)")
        package = types.ModuleType("mlx_lm")
        package.__path__ = list(found.submodule_search_locations)
        sys.modules["mlx_lm"] = package
    from mlx_lm.models import mamba
    return mamba


mamba = _import_mamba()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))
from ksearch_harness.backends import mlx as mlx_backend  # noqa: E402

# mamba-370m (state-spaces/mamba-370m): d_model 1024, 48 layers, d_state 16, d_conv 4, expand 2,
# dt_rank ceil(1024 / 16) = 64, vocabulary 50280, tied embeddings, conv bias, no linear bias.
MAMBA_370M = dict(model_type="mamba", vocab_size=50280, hidden_size=1024, intermediate_size=2048,
                  state_size=16, num_hidden_layers=48, conv_kernel=4, use_bias=False,
                  use_conv_bias=True, time_step_rank=64, tie_word_embeddings=True)


def build_model(config, seed):
    """mlx-lm's Mamba with random weights (MLX's initialisers), dt_proj's bias as Mamba
    initialises it (softplus^-1 of dt, log-uniform in [0.001, 0.1]) so the state has the long
    memory of a trained model; returns (fp16 model, fp32 model with the same weights)."""
    mx.random.seed(seed)
    args = mamba.ModelArgs(**config)
    model = mamba.Model(args)
    for layer in model.layers:
        mixer = layer.mixer
        u = mx.random.uniform(shape=mixer.dt_proj.bias.shape)
        dt = mx.exp(u * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        mixer.dt_proj.bias = dt + mx.log(-mx.expm1(-dt))
    weights = tree_flatten(model.parameters())
    mx.eval([w for _, w in weights])
    judge = mamba.Model(args)
    judge.update(tree_unflatten([(k, w.astype(mx.float32)) for k, w in weights]))
    model.set_dtype(mx.float16)
    mx.eval(model.parameters(), judge.parameters())
    return model, judge


class Kernels:
    """The scan and step candidates as functions of MLX arrays (harness: load_callable)."""

    def __init__(self, args):
        self.scan = load("mlx_mamba_scan", args.scan, args.scan_entry)
        self.step = load("mlx_mamba_step", args.step, args.step_entry)


def load(task, path, entry):
    with open(os.path.join(ROOT, "tasks", task, "definition.json")) as f:
        definition = json.load(f)
    candidate = mlx_backend.candidate_at(path, entry or task)
    return mlx_backend.load_callable(candidate, definition)


def patched_call(kernels):
    """MambaBlock.__call__ with the scan (prefill) and step (decode) kernels in the mixer."""

    def __call__(self, x, cache):
        conv_cache, state = (cache[0], cache[1]) if cache is not None else (None, None)
        _, T, _ = x.shape
        x, z = self.in_proj(x).split(2, axis=-1)
        K = self.conv_kernel_size
        if conv_cache is not None:
            x_full = mx.concatenate([conv_cache, x], axis=1)
        else:
            x_full = mx.pad(x, [(0, 0), (K - 1, 0), (0, 0)])
        new_conv_cache = x_full[:, -(K - 1):, :]
        x = nn.silu(self.conv1d(x_full))
        R, N = self.time_step_rank, self.ssm_state_size
        delta, B, C = mx.split(self.x_proj(x), [R, R + N], axis=-1)
        delta = delta @ self.dt_proj.weight.T  # dt_proj without its bias: the kernels add it
        A = -mx.exp(self.A_log.astype(mx.float32))
        D = self.D.astype(mx.float32)
        bias = self.dt_proj.bias.astype(mx.float32)
        if state is None:
            y, new_state = kernels.scan(x, delta, A, B, C, D, z, bias)
        elif T == 1:
            y, new_state = kernels.step(x[:, 0], delta[:, 0], A, B[:, 0], C[:, 0], D, z[:, 0],
                                        bias, state)
            y = y[:, None, :]
        else:
            raise NotImplementedError("a prefill after a cached state: the scan task starts "
                                      "from a zero state")
        if cache is not None:
            cache[0] = new_conv_cache
            cache[1] = new_state
        return self.out_proj(y)
    return __call__


@contextmanager
def mixer(call):
    """MambaBlock.__call__ replaced for the duration (None: mlx-lm's own)."""
    shipped = mamba.MambaBlock.__call__
    if call is not None:
        mamba.MambaBlock.__call__ = call
    try:
        yield
    finally:
        mamba.MambaBlock.__call__ = shipped


def prefill(model, tokens):
    mx.synchronize()
    t0 = time.perf_counter()
    logits = model(tokens)
    mx.eval(logits)
    mx.synchronize()
    return logits, time.perf_counter() - t0


def decode(model, prompt, n):
    """Greedy decoding of n tokens after `prompt`, pipelined as mlx-lm's generate pipelines."""
    cache = model.make_cache()
    logits = model(prompt, cache=cache)
    y = mx.argmax(logits[:, -1, :], axis=-1)
    first = logits[:, -1, :]
    mx.eval(y, first)
    mx.synchronize()
    tokens = []
    t0 = time.perf_counter()
    for _ in range(n):
        logits = model(y[:, None], cache=cache)
        tokens.append(y)
        y = mx.argmax(logits[:, -1, :], axis=-1)
        mx.async_eval(y)
    mx.eval(y)
    mx.synchronize()
    seconds = time.perf_counter() - t0
    tokens.append(y)
    return first, np.array(mx.concatenate(tokens)), seconds


def compare(got, want):
    """(relative L2 error, largest |difference|, share of positions with the same argmax)."""
    g = np.array(got.astype(mx.float32)).reshape(-1, got.shape[-1]).astype(np.float64)
    w = np.array(want.astype(mx.float32)).reshape(-1, want.shape[-1]).astype(np.float64)
    if not (np.isfinite(g).all() and np.isfinite(w).all()):
        return float("nan"), float("nan"), float("nan")
    rel = float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))
    return rel, float(np.abs(g - w).max()), float(np.mean(g.argmax(-1) == w.argmax(-1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scan", default=os.path.join(ROOT, "tasks/mlx_mamba_scan/seed.toml"))
    parser.add_argument("--step", default=os.path.join(ROOT, "tasks/mlx_mamba_step/seed.toml"))
    parser.add_argument("--scan-entry", help="the scan candidate's entry (default: the task's, "
                                             "mlx_mamba_scan; a baseline's is run)")
    parser.add_argument("--step-entry", help="the step candidate's entry (default: mlx_mamba_step)")
    parser.add_argument("--lengths", default="512,4096")
    parser.add_argument("--decode-tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=16, help="prompt length before decoding")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of the fast paths")
    parser.add_argument("--judge-up-to", type=int, default=512,
                        help="run the fp32 judge at lengths up to this (it is as slow as mlx-lm)")
    parser.add_argument("--tol", type=float, default=2e-2,
                        help="largest relative L2 error of the patched logits against mlx-lm's")
    parser.add_argument("--layers", type=int, default=None, help="fewer layers (a quick check)")
    parser.add_argument("--small", action="store_true",
                        help="a small model (d_model 256, 4 layers, vocabulary 1000) for checking "
                             "the script itself, e.g. on MLX's CPU with launcher candidates")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--md", help="write the markdown section into this file "
                                     "(bench/results/mlx.md), replacing an earlier one")
    args = parser.parse_args()

    config = dict(MAMBA_370M)
    if args.small:
        config.update(vocab_size=1000, hidden_size=256, intermediate_size=512,
                      num_hidden_layers=4, time_step_rank=16)
    if args.layers:
        config["num_hidden_layers"] = args.layers
    lengths = [int(v) for v in args.lengths.split(",") if v]
    kernels = Kernels(args)
    model, judge = build_model(config, args.seed)
    patched = patched_call(kernels)
    rng = np.random.default_rng(args.seed)
    report = {"device": str(mx.default_device()), "mlx": mx.__version__,
              "mlx_lm": _version("mlx_lm"), "device_info": _device_info(), "config": config,
              "scan": args.scan, "step": args.step, "prefill": [], "decode": None}

    warm = mx.array(rng.integers(0, config["vocab_size"], (1, 8)))
    for call in (None, patched):
        with mixer(call):
            prefill(model, warm)
            decode(model, warm, 2)

    failed = False
    for L in lengths:
        tokens = mx.array(rng.integers(0, config["vocab_size"], (1, L)))
        with mixer(None):
            shipped, shipped_s = prefill(model, tokens)
        with mixer(patched):
            prefill(model, tokens)  # untimed: the kernels' sizes are template constants, so
            # each new length compiles its own instance at its first call
            runs = [prefill(model, tokens) for _ in range(max(args.repeats, 1))]
        mine, mine_s = runs[0][0], float(np.median([s for _, s in runs]))
        rel, largest, agree = compare(mine, shipped)
        row = {"L": L, "mlx_lm_tok_s": L / shipped_s, "patched_tok_s": L / mine_s,
               "speedup": shipped_s / mine_s, "rel_l2_vs_mlx_lm": rel,
               "max_abs_vs_mlx_lm": largest, "argmax_agreement": agree}
        if L <= args.judge_up_to:
            with mixer(None):
                truth, _ = prefill(judge, tokens)
            row["rel_l2_mlx_lm_vs_fp32"] = compare(shipped, truth)[0]
            row["rel_l2_patched_vs_fp32"] = compare(mine, truth)[0]
        row["match"] = bool(rel <= args.tol)
        failed |= not row["match"]
        report["prefill"].append(row)
        print(json.dumps(row), flush=True)
        del shipped, mine, runs

    prompt = mx.array(rng.integers(0, config["vocab_size"], (1, args.prompt)))
    with mixer(None):
        first_shipped, tokens_shipped, shipped_s = decode(model, prompt, args.decode_tokens)
    with mixer(patched):
        timed = [decode(model, prompt, args.decode_tokens) for _ in range(max(args.repeats, 1))]
    first_mine, tokens_mine = timed[0][0], timed[0][1]
    mine_s = float(np.median([t[2] for t in timed]))
    rel, largest, _ = compare(first_mine, first_shipped)
    report["decode"] = {
        "prompt": args.prompt, "tokens": args.decode_tokens,
        "mlx_lm_tok_s": args.decode_tokens / shipped_s,
        "patched_tok_s": args.decode_tokens / mine_s, "speedup": shipped_s / mine_s,
        "first_step_rel_l2_vs_mlx_lm": rel, "first_step_max_abs_vs_mlx_lm": largest,
        "greedy_tokens_equal": int(np.sum(tokens_mine == tokens_shipped)),
        "match": bool(rel <= args.tol)}
    failed |= not report["decode"]["match"]
    print(json.dumps(report["decode"]), flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    text = markdown(report, args)
    print(text)
    if args.md:
        write_section(args.md, "mlx_mamba.py", text)
    return 1 if failed else 0


def markdown(r, args):
    c = r["config"]
    lines = [
        "### mlx-lm Mamba, prefill and decode (bench/mlx_mamba.py)", "",
        f"{r['device']}, {r['device_info']}; MLX {r['mlx']}, mlx-lm {r['mlx_lm']}. Model: "
        f"d_model {c['hidden_size']}, {c['num_hidden_layers']} layers, d_inner "
        f"{c['intermediate_size']}, d_state {c['state_size']}, vocabulary {c['vocab_size']}, "
        f"random fp16 weights. Patched scan: `{_rel(args.scan)}`; step: `{_rel(args.step)}`.", "",
        "| prefill L | mlx-lm tok/s | patched tok/s | speedup | rel. L2 vs mlx-lm | argmax agree "
        "| mlx-lm vs fp32 | patched vs fp32 |", "|---|---|---|---|---|---|---|---|"]
    for p in r["prefill"]:
        lines.append(f"| {p['L']} | {p['mlx_lm_tok_s']:,.0f} | {p['patched_tok_s']:,.0f} | "
                     f"{p['speedup']:.1f}x | {p['rel_l2_vs_mlx_lm']:.2e} | "
                     f"{p['argmax_agreement']:.3f} | {_num(p.get('rel_l2_mlx_lm_vs_fp32'))} | "
                     f"{_num(p.get('rel_l2_patched_vs_fp32'))} |")
    d = r["decode"]
    lines += ["", f"Decode ({d['tokens']} tokens after a {d['prompt']}-token prompt, greedy): "
                  f"mlx-lm {d['mlx_lm_tok_s']:.1f} tok/s, patched {d['patched_tok_s']:.1f} tok/s "
                  f"({d['speedup']:.1f}x); first step's logits rel. L2 "
                  f"{d['first_step_rel_l2_vs_mlx_lm']:.2e} vs mlx-lm; "
                  f"{d['greedy_tokens_equal']} of {d['tokens'] + 1} greedy tokens equal.",
              "", f"Tolerance: relative L2 error of the logits <= {args.tol:g}; "
                  + ("all within." if all(p["match"] for p in r["prefill"]) and d["match"]
                     else "**NOT MET**.")]
    return "\n".join(lines)


def write_section(path, name, text):
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    old = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + block + "\n"
    with open(path, "w") as f:
        f.write(new)


def _rel(path):
    return os.path.relpath(path, ROOT) if os.path.isabs(path) else path


def _num(v):
    return "-" if v is None else f"{v:.2e}"


def _version(module):
    try:
        import importlib.metadata
        return importlib.metadata.version(module.replace("_", "-"))
    except Exception:  # noqa: BLE001
        return None


def _device_info():
    try:
        info = mx.device_info()
        return info.get("device_name") or info.get("architecture")
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    sys.exit(main())
