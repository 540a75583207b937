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

Checks, layer by layer, untimed: mlx-lm's own forward pass over the tokens records each
mixer's input and what mlx-lm's MambaBlock made of it; each patched layer then runs on that same
input, and so does the same layer with the weights in fp32 (the judge, mlx-lm's code). Checked
in every layer at every length: the gated scan output (out_proj's input) against mlx-lm's, and
the final SSM state against the judge's (mlx-lm in fp16 keeps the state in fp16, which drifts
with the length: 1.2e-2 relative L2 from fp32 at L=4096). Decoding likewise, one step from
mlx-lm's own cache after the prompt: the step's output against ssm_step's, its new state against
the judge's. A relative L2 error above --layer-tol (1e-2) in any layer fails the run (exit 1).
Measured on MLX's CPU with the tasks' baselines (fp32 launchers) as the kernels: at most 1.5e-3
(output) and 1.0e-3 (state) in every layer, from L=32 to 4096 on the small model and at L=512
at mamba-370m's shapes (4 layers); the broken copies that `--self-test` runs are at 4.6e-2 (every
decay rate halved) to 1.0 (a zero state), and 0.13 for a scan whose output drops the recurrence.

The logits of the whole model are compared too (relative L2 against mlx-lm's, largest
difference, greedy-token agreement, and at lengths up to --judge-up-to both against the fp32
model), and an error above --tol (2e-2) fails the run, but the logits alone cannot tell a scan
from one that drops its recurrence: the residual stream carries them.

The random weights make the recurrence matter: x_proj's B and C rows are scaled by 8
(SSM_INPUT_SCALE) so that B and C come out near unit scale (RMS 0.8, the scale of the tasks'
inputs). With MLX's default initialisation they have RMS 0.1, the state's term is 0.2% of a
layer's gated output, and a scan that returns only D * u differed from mlx-lm's by 2e-3 in each
layer and in the logits: three times mlx-lm's own fp16 error, too close to tell apart.

`--self-test` runs the layer check on the small model (L=32, one decode step) with the tasks'
baselines, which must pass, and with broken copies of them loaded as candidates (BROKEN), each
of which must fail; it needs only MLX's CPU and mlx-lm, and runs in CI
(harness/tests/test_mlx_bench.py).

Speed: prefill tokens/s = L / (wall time of one forward pass over L tokens, evaluated and
synchronised); decode tokens/s = generated tokens / wall time of a greedy loop that overlaps
building the next step with the device's work (mx.async_eval), as mlx-lm's generate does,
after a 16-token prompt. mlx-lm's prefill at L=4096 takes about half a minute on an H200, so it
is timed once (--repeats applies to the rest); the layer check runs mlx-lm's code twice more at
each length (recorded, then in fp32 layer by layer). The patched model runs once untimed at each
length first, since a kernel is compiled for each new set of template constants (the length is
one).

Runs where MLX has a GPU (an Apple GPU, or MLX's CUDA backend, pip package mlx-cuda-13, on an
NVIDIA GPU). MLX_ENABLE_TF32=0 keeps fp32 products (the judge) in fp32.
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
                     "its wheel carried to a GPU machine without a package index)")
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
# The small model of --small and --self-test.
SMALL = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
             time_step_rank=16)
# x_proj's B and C rows are scaled by this (module docstring): B and C near unit scale.
SSM_INPUT_SCALE = 8.0
# The largest relative L2 error of a layer's gated scan output (against mlx-lm's) or new state
# (against the fp32 judge's) on mlx-lm's input; the module docstring gives the measurements.
LAYER_TOL = 1e-2


def build_model(config, seed):
    """mlx-lm's Mamba with random weights (MLX's initialisers), dt_proj's bias as Mamba
    initialises it (softplus^-1 of dt, log-uniform in [0.001, 0.1]) so the state has the long
    memory of a trained model, and x_proj's B and C rows scaled by SSM_INPUT_SCALE so the state
    carries as much of a layer's output as its skip connection; returns (fp16 model, fp32 model
    with the same weights)."""
    mx.random.seed(seed)
    args = mamba.ModelArgs(**config)
    model = mamba.Model(args)
    for layer in model.layers:
        mixer = layer.mixer
        u = mx.random.uniform(shape=mixer.dt_proj.bias.shape)
        dt = mx.exp(u * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        mixer.dt_proj.bias = dt + mx.log(-mx.expm1(-dt))
        w, rank = mixer.x_proj.weight, mixer.time_step_rank  # rows: delta, then B, then C
        mixer.x_proj.weight = mx.concatenate([w[:rank], w[rank:] * SSM_INPUT_SCALE], axis=0)
    weights = tree_flatten(model.parameters())
    mx.eval([w for _, w in weights])
    judge = mamba.Model(args)
    judge.update(tree_unflatten([(k, w.astype(mx.float32)) for k, w in weights]))
    model.set_dtype(mx.float16)
    mx.eval(model.parameters(), judge.parameters())
    return model, judge


class Kernels:
    """The scan and step candidates as functions of MLX arrays (harness: load_callable)."""

    def __init__(self, scan, step, scan_entry=None, step_entry=None):
        self.scan = load("mlx_mamba_scan", scan, scan_entry)
        self.step = load("mlx_mamba_step", step, step_entry)


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


class _Tap(nn.Module):
    """Stands in for a MambaBlock's out_proj and keeps what it was given: the gated scan
    output, swiglu(z, y) in mlx-lm, the scan kernel's `out` when patched."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.seen = []

    def __call__(self, v):
        self.seen.append(v)
        return self.inner(v)


def _tapped(block, call, x, cache):
    """block's mixer run by `call` on x: (its output, the gated scan output)."""
    inner = block.out_proj
    block.out_proj = tap = _Tap(inner)
    try:
        out = call(block, x, cache)
    finally:
        block.out_proj = inner
    return out, tap.seen[-1]


def record_layers(model, tokens, cache=None):
    """mlx-lm's forward pass (its own MambaBlock code) over `tokens`, keeping for every layer
    the mixer's input, the cache it started from, the gated scan output and the new state.
    Returns (logits, records), evaluated."""
    records = []

    def recording(self, x, cache):
        conv, state = (cache[0], cache[1]) if cache is not None else (None, None)

        def shipped(block, x, _):
            return block._process_sequence(x, conv, state)
        (out, (new_conv, new_state)), gated = _tapped(self, shipped, x, None)
        if cache is not None:
            cache[0], cache[1] = new_conv, new_state
        records.append({"x": x, "conv": conv, "state": state, "gated": gated,
                        "new_state": new_state})
        return out

    with mixer(recording):
        logits = model(tokens, cache=cache)
    mx.eval(logits, [(r["gated"], r["new_state"]) for r in records])
    return logits, records


def check_layers(model, judge, records, patched):
    """Every layer's patched mixer on the input mlx-lm's pass gave it (and, decoding, on
    mlx-lm's cache, its state as fp32 as the step kernel takes it), and the same layer of the
    fp32 judge on that input: relative L2 errors of the gated scan output against mlx-lm's and
    of the new state against the judge's (the checked pair), and the other pairs for the record.
    mlx-lm in fp16 keeps the state in fp16, which drifts from fp32 with the length (1.2e-2
    relative L2 at L=4096, where an fp32 scan is within 1e-3 of the judge), so the state is
    held to the fp32 judge; the output is rounded to fp16 either way."""
    rows = []
    for i, (layer, r) in enumerate(zip(model.layers, records)):
        state = None if r["state"] is None else r["state"].astype(mx.float32)
        cache = [r["conv"], state]
        _, gated = _tapped(layer.mixer, patched, r["x"], cache)
        conv32 = None if r["conv"] is None else r["conv"].astype(mx.float32)

        def fp32(block, x, _):
            return block._process_sequence(x, conv32, state)
        (_, (_, truth_state)), truth = _tapped(judge.layers[i].mixer, fp32,
                                               r["x"].astype(mx.float32), None)
        rows.append({"layer": i, "out": relative_l2(gated, r["gated"]),
                     "state": relative_l2(cache[1], truth_state),
                     "out_vs_fp32": relative_l2(gated, truth),
                     "state_vs_mlx_lm": relative_l2(cache[1], r["new_state"]),
                     "mlx_lm_out_vs_fp32": relative_l2(r["gated"], truth),
                     "mlx_lm_state_vs_fp32": relative_l2(r["new_state"], truth_state)})
    return rows


def layer_summary(rows, tol):
    """The worst layer of each comparison, and whether every layer's checked pair (the gated
    output against mlx-lm's, the state against the fp32 judge's) is within `tol`."""
    summary = {}
    for key in rows[0]:
        if key != "layer":
            worst = max(rows, key=lambda r: _nan_high(r[key]))
            summary[key] = {"worst": worst[key], "layer": worst["layer"]}
    summary["match"] = bool(all(r[k] <= tol for r in rows for k in ("out", "state")))  # NaN fails
    return summary


def _nan_high(v):
    return math.inf if v != v else v


def relative_l2(got, want):
    """||got - want|| / ||want|| in float64; NaN where either is not finite."""
    g = np.array(got.astype(mx.float32)).astype(np.float64)
    w = np.array(want.astype(mx.float32)).astype(np.float64)
    if g.shape != w.shape or not (np.isfinite(g).all() and np.isfinite(w).all()):
        return float("nan")
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


def decode_records(model, prompt):
    """mlx-lm's prefill of `prompt` into its cache, then one decode step recorded layer by
    layer (record_layers); the step's token is the prompt's greedy continuation."""
    cache = model.make_cache()
    logits = model(prompt, cache=cache)
    token = mx.argmax(logits[:, -1, :], axis=-1)[:, None]
    mx.eval(token, [c.state for c in cache])
    return record_layers(model, token, cache)[1]


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
                        help="compare the logits with the fp32 model at lengths up to this (it "
                             "is as slow as mlx-lm; the layer check judges every length)")
    parser.add_argument("--tol", type=float, default=2e-2,
                        help="largest relative L2 error of the patched logits against mlx-lm's")
    parser.add_argument("--layer-tol", type=float, default=LAYER_TOL,
                        help="largest relative L2 error, in any layer on mlx-lm's input, of the "
                             "gated scan output against mlx-lm's or of the new state against the "
                             "fp32 judge's")
    parser.add_argument("--layers", type=int, default=None, help="fewer layers (a quick check)")
    parser.add_argument("--small", action="store_true",
                        help="a small model (d_model 256, 4 layers, vocabulary 1000) for checking "
                             "the script itself, e.g. on MLX's CPU with launcher candidates")
    parser.add_argument("--self-test", action="store_true",
                        help="show that the layer check fails: the small model with the tasks' "
                             "baselines (must pass) and broken copies of them (must fail); "
                             "runs on MLX's CPU; exit 0 when every outcome is the expected one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--md", help="write the markdown section into this file "
                                     "(bench/results/mlx.md), replacing an earlier one")
    args = parser.parse_args()
    if args.self_test:
        return self_test(args)

    config = dict(MAMBA_370M)
    if args.small:
        config.update(SMALL)
    if args.layers:
        config["num_hidden_layers"] = args.layers
    lengths = [int(v) for v in args.lengths.split(",") if v]
    kernels = Kernels(args.scan, args.step, args.scan_entry, args.step_entry)
    model, judge = build_model(config, args.seed)
    patched = patched_call(kernels)
    rng = np.random.default_rng(args.seed)
    report = {"device": str(mx.default_device()), "mlx": mx.__version__,
              "mlx_lm": _version("mlx_lm"), "device_info": _device_info(), "config": config,
              "ssm_input_scale": SSM_INPUT_SCALE, "scan": args.scan, "step": args.step,
              "prefill": [], "decode": None}

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
        judged = L <= args.judge_up_to
        if judged:
            with mixer(None):
                truth, _ = prefill(judge, tokens)
            row["rel_l2_mlx_lm_vs_fp32"] = compare(shipped, truth)[0]
            row["rel_l2_patched_vs_fp32"] = compare(mine, truth)[0]
            del truth
        del shipped, mine, runs
        # Untimed: mlx-lm's pass again, recording every layer, then each patched layer on it.
        _, records = record_layers(model, tokens)
        row["layers"] = layer_summary(check_layers(model, judge, records, patched),
                                      args.layer_tol)
        del records
        row["match"] = bool(rel <= args.tol) and row["layers"]["match"]
        failed |= not row["match"]
        report["prefill"].append(row)
        print(json.dumps(row), flush=True)

    prompt = mx.array(rng.integers(0, config["vocab_size"], (1, args.prompt)))
    with mixer(None):
        first_shipped, tokens_shipped, shipped_s = decode(model, prompt, args.decode_tokens)
    with mixer(patched):
        timed = [decode(model, prompt, args.decode_tokens) for _ in range(max(args.repeats, 1))]
    first_mine, tokens_mine = timed[0][0], timed[0][1]
    mine_s = float(np.median([t[2] for t in timed]))
    rel, largest, _ = compare(first_mine, first_shipped)
    layers = layer_summary(check_layers(model, judge, decode_records(model, prompt), patched),
                           args.layer_tol)
    report["decode"] = {
        "prompt": args.prompt, "tokens": args.decode_tokens,
        "mlx_lm_tok_s": args.decode_tokens / shipped_s,
        "patched_tok_s": args.decode_tokens / mine_s, "speedup": shipped_s / mine_s,
        "first_step_rel_l2_vs_mlx_lm": rel, "first_step_max_abs_vs_mlx_lm": largest,
        "greedy_tokens_equal": int(np.sum(tokens_mine == tokens_shipped)),
        "layers": layers, "match": bool(rel <= args.tol) and layers["match"]}
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


# Broken copies of the tasks' baselines for --self-test: (name, task, what is replaced, by what).
# Each must fail the layer check; the first is the audit's scan that drops the recurrence from
# its output (the logits missed it), with its final state still right.
BROKEN = [
    ("scan output without the recurrence (D * u only)", "scan",
     "ys.append(y + D * x)", "ys.append(0.0 * y + D * x)"),
    ("scan with every state's decay rate halved", "scan",
     "mx.exp(mx.expand_dims(dt, -1) * A)", "mx.exp(mx.expand_dims(dt, -1) * (0.5 * A))"),
    ("scan returning a zero final state", "scan",
     "astype(mx.float16), state", "astype(mx.float16), mx.zeros_like(state)"),
    ("step without the old state (no recurrence)", "step",
     "new_state + state * mx.exp", "new_state + 0.0 * state * mx.exp"),
]
BASELINES = {"scan": os.path.join(ROOT, "tasks/mlx_mamba_scan/baselines/mlx_lm_loop.py"),
             "step": os.path.join(ROOT, "tasks/mlx_mamba_step/baselines/mlx_lm_ssm_step.py")}


def self_test(args):
    """The layer check on the small model (prefill at L=32, one decode step after 16 tokens):
    the tasks' baselines, launchers of MLX operations, must pass it; each BROKEN copy of them,
    loaded as a candidate file like any other, must fail it."""
    import tempfile
    model, judge = build_model(dict(MAMBA_370M, **SMALL), args.seed)
    rng = np.random.default_rng(args.seed)
    tokens = mx.array(rng.integers(0, SMALL["vocab_size"], (1, 32)))
    prompt = mx.array(rng.integers(0, SMALL["vocab_size"], (1, 16)))
    _, prefill_records = record_layers(model, tokens)
    step_records = decode_records(model, prompt)
    cases = [("the tasks' baselines", None, None, None)] + BROKEN
    unexpected = 0
    with tempfile.TemporaryDirectory(prefix="mlx-mamba-self-test-") as folder:
        for name, which, old, new in cases:
            files = dict(BASELINES)
            if which is not None:
                with open(BASELINES[which]) as f:
                    source = f.read()
                if old not in source:
                    raise SystemExit(f"--self-test: {BASELINES[which]} no longer contains "
                                     f"{old!r}; update BROKEN")
                files[which] = os.path.join(folder, f"broken_{which}.py")
                with open(files[which], "w") as f:
                    f.write(source.replace(old, new))
            patched = patched_call(Kernels(files["scan"], files["step"], "run", "run"))
            got = {phase: layer_summary(check_layers(model, judge, records, patched),
                                        args.layer_tol)
                   for phase, records in (("prefill", prefill_records), ("decode", step_records))}
            passed = got["prefill"]["match"] and got["decode"]["match"]
            expected = which is None
            unexpected += passed != expected
            worst = {phase: {k: f"{g[k]['worst']:.2e}" for k in ("out", "state")}
                     for phase, g in got.items()}
            print(json.dumps({"case": name, "passed": passed, "expected": expected,
                              "worst_layer_errors": worst}), flush=True)
    print(f"--self-test: {len(cases) - unexpected} of {len(cases)} outcomes as expected "
          f"(layer tolerance {args.layer_tol:g})")
    return 1 if unexpected else 0


def markdown(r, args):
    c = r["config"]
    lines = [
        "### mlx-lm Mamba, prefill and decode (bench/mlx_mamba.py)", "",
        f"{r['device']}, {r['device_info']}; MLX {r['mlx']}, mlx-lm {r['mlx_lm']}. Model: "
        f"d_model {c['hidden_size']}, {c['num_hidden_layers']} layers, d_inner "
        f"{c['intermediate_size']}, d_state {c['state_size']}, vocabulary {c['vocab_size']}, "
        f"random fp16 weights (x_proj's B and C rows x{r['ssm_input_scale']:g}). Patched scan: "
        f"`{_rel(args.scan)}`; step: `{_rel(args.step)}`.", "",
        "| prefill L | mlx-lm tok/s | patched tok/s | speedup | worst layer: scan out vs mlx-lm "
        "/ state vs fp32 | logits rel. L2 vs mlx-lm | argmax agree | logits mlx-lm vs fp32 | "
        "logits patched vs fp32 |", "|---|---|---|---|---|---|---|---|---|"]
    for p in r["prefill"]:
        lay = p["layers"]
        lines.append(f"| {p['L']} | {p['mlx_lm_tok_s']:,.0f} | {p['patched_tok_s']:,.0f} | "
                     f"{p['speedup']:.1f}x | {_num(lay['out']['worst'])} / "
                     f"{_num(lay['state']['worst'])} | {p['rel_l2_vs_mlx_lm']:.2e} | "
                     f"{p['argmax_agreement']:.3f} | {_num(p.get('rel_l2_mlx_lm_vs_fp32'))} | "
                     f"{_num(p.get('rel_l2_patched_vs_fp32'))} |")
    d = r["decode"]
    lines += ["", f"Decode ({d['tokens']} tokens after a {d['prompt']}-token prompt, greedy): "
                  f"mlx-lm {d['mlx_lm_tok_s']:.1f} tok/s, patched {d['patched_tok_s']:.1f} tok/s "
                  f"({d['speedup']:.1f}x); one step from mlx-lm's cache, worst layer: step out "
                  f"{_num(d['layers']['out']['worst'])} vs mlx-lm, new state "
                  f"{_num(d['layers']['state']['worst'])} vs fp32; first step's logits rel. "
                  f"L2 {d['first_step_rel_l2_vs_mlx_lm']:.2e} vs mlx-lm; "
                  f"{d['greedy_tokens_equal']} of {d['tokens'] + 1} greedy tokens equal.",
              "", f"Tolerance: relative L2 error <= {args.layer_tol:g} in every layer (on "
                  f"mlx-lm's input: the gated scan output against mlx-lm's, the state against "
                  f"mlx-lm's code in fp32) and <= {args.tol:g} in the logits; "
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
