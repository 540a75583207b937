"""The references and PyTorch baselines of the built-in GPU tasks against independent float64
NumPy implementations, on small shapes, under each task's own tolerance.

A reference is the judge of every candidate, so it is checked against a second implementation
written from the definition's description: NumPy in float64, no PyTorch. The baselines are
checked against the reference as a candidate would be. Everything runs on CUDA when PyTorch sees
a GPU, else on the CPU; the baselines that only exist on a GPU (cuDNN and FlashAttention through
SDPA) are skipped without one. Without PyTorch the whole module is skipped.
"""

import importlib.util
import json
import math
import os
import tomllib
import unittest

import numpy as np

try:
    import torch
except ImportError:  # the harness's own tests run without PyTorch
    torch = None

TASKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "tasks")
DISTRIBUTIONS = ("normal", "uniform", "heavy_tailed")


def load_task(name):
    folder = os.path.join(TASKS, name)
    with open(os.path.join(folder, "definition.json")) as f:
        definition = json.load(f)
    with open(os.path.join(folder, "task.toml"), "rb") as f:
        config = tomllib.load(f)
    namespace = {}
    exec(compile(definition["reference"], f"{name}/definition.json:reference", "exec"), namespace)
    return folder, definition, config, namespace["run"]


def load_baseline(folder, config, name):
    entry = next(b for b in config["baselines"] if b["name"] == name)
    path = os.path.join(folder, entry["file"])
    spec = importlib.util.spec_from_file_location(f"baseline_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry["entry"])


def draw(rng, dist, shape):
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    return rng.standard_t(3.0, shape)


@unittest.skipUnless(torch is not None, "PyTorch is not installed: the GPU tasks' references "
                                        "cannot run here")
class GpuTaskReferences(unittest.TestCase):
    def setUp(self):
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.rng = np.random.default_rng(20261130)

    def tensor(self, array, dtype):
        return torch.tensor(np.asarray(array, np.float32)).to(dtype).to(self.device)

    @staticmethod
    def as64(t):
        return t.detach().double().cpu().tolist()

    def assert_close(self, name, got, want, tol, context):
        """|got - want| <= atol + rtol * |want| everywhere, infinities in the same places."""
        got = np.asarray(self.as64(got) if torch.is_tensor(got) else got, np.float64)
        want = np.asarray(self.as64(want) if torch.is_tensor(want) else want, np.float64)
        self.assertEqual(got.shape, want.shape, f"{context}: {name} shape")
        inf = np.isinf(want)
        np.testing.assert_array_equal(np.isinf(got), inf, err_msg=f"{context}: {name} infinities")
        np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{context}: {name} infinities")
        finite = ~inf
        bound = tol["atol"] + tol["rtol"] * np.abs(want[finite])
        err = np.abs(got[finite] - want[finite])
        worst = float(np.max(err / bound)) if err.size else 0.0
        self.assertTrue(np.all(np.isfinite(got[finite])), f"{context}: {name} has NaN")
        self.assertLessEqual(worst, 1.0, f"{context}: {name} max err / bound = {worst:.3f}")
        return worst

    # --- attention_prefill ------------------------------------------------------------------

    def test_attention_prefill(self):
        folder, definition, config, run = load_task("attention_prefill")
        tol = config["tolerance"]["float16"]
        heads, dim = 32, 128
        for dist in DISTRIBUTIONS:
            for causal in (0, 1):
                batch, length = 1, 70
                arrays = [draw(self.rng, dist, (batch, heads, length, dim)) for _ in range(3)]
                q, k, v = (self.tensor(a, torch.float16) for a in arrays)
                q64, k64, v64 = (np.asarray(self.as64(t)) for t in (q, k, v))
                s = np.einsum("bhid,bhjd->bhij", q64, k64) / math.sqrt(dim)
                if causal:
                    s = np.where(np.tril(np.ones((length, length), bool)), s, -np.inf)
                p = np.exp(s - s.max(-1, keepdims=True))
                want = np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v64)
                context = f"attention_prefill {dist} causal={causal}"
                out = run(q, k, v, causal)
                self.assertEqual(out.dtype, torch.float16, context)
                self.assert_close("out", out, want, tol, context)
                for name in ("sdpa_cudnn", "sdpa_flash"):
                    if self.device != "cuda":
                        continue  # these backends exist only on a GPU
                    base = load_baseline(folder, config, name)(q, k, v, causal)
                    self.assert_close("out", base, out.double(), tol, f"{context} baseline {name}")

    # --- mamba_scan -------------------------------------------------------------------------

    def test_mamba_scan(self):
        folder, definition, config, run = load_task("mamba_scan")
        tol = config["tolerance"]["float16"]
        ranges = config["inputs"]
        batch, dim, seqlen, dstate = 2, 24, 50, 16
        for dist in DISTRIBUTIONS:
            u, delta, z = (self.tensor(draw(self.rng, dist, (batch, dim, seqlen)), torch.float16)
                           for _ in range(3))
            B, C = (self.tensor(draw(self.rng, dist, (batch, dstate, seqlen)), torch.float16)
                    for _ in range(2))
            A = self.tensor(self.rng.uniform(ranges["A"]["low"], ranges["A"]["high"],
                                             (dim, dstate)), torch.float32)
            D = self.tensor(draw(self.rng, dist, (dim,)), torch.float32)
            bias = self.tensor(self.rng.uniform(ranges["delta_bias"]["low"],
                                                ranges["delta_bias"]["high"], (dim,)),
                               torch.float32)
            u64, d64, z64, B64, C64, A64, D64, b64 = (
                np.asarray(self.as64(t)) for t in (u, delta, z, B, C, A, D, bias))
            dt = np.logaddexp(0.0, d64 + b64[None, :, None])
            h = np.zeros((batch, dim, dstate))
            y = np.empty((batch, dim, seqlen))
            for t in range(seqlen):
                h = np.exp(dt[:, :, t, None] * A64[None]) * h + \
                    (dt[:, :, t] * u64[:, :, t])[:, :, None] * B64[:, None, :, t]
                y[:, :, t] = np.einsum("bdn,bn->bd", h, C64[:, :, t])
            want = (y + D64[None, :, None] * u64) * (z64 / (1.0 + np.exp(-z64)))
            context = f"mamba_scan {dist}"
            args = (u, delta, A, B, C, D, z, bias)
            out = run(*args)
            self.assertEqual(out.dtype, torch.float16, context)
            self.assert_close("out", out, want, tol, context)
            base = load_baseline(folder, config, "torch_doubling")(*args)
            self.assert_close("out", base, out.double(), tol, f"{context} baseline torch_doubling")

    # --- gqa_paged_decode -------------------------------------------------------------------

    def test_gqa_paged_decode(self):
        folder, definition, config, run = load_task("gqa_paged_decode")
        out_tol, lse_tol = config["tolerance"]["bfloat16"], config["tolerance"]["float32"]
        qo_heads, kv_heads, dim, pages = 32, 4, 128, 300
        lengths = [5, 0, 1, 120, 37]  # one sequence without tokens
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        scale = 1.0 / math.sqrt(dim)
        for dist in DISTRIBUTIONS:
            q = self.tensor(draw(self.rng, dist, (len(lengths), qo_heads, dim)), torch.bfloat16)
            kc, vc = (self.tensor(draw(self.rng, dist, (pages, 1, kv_heads, dim)), torch.bfloat16)
                      for _ in range(2))
            indices = self.rng.permutation(pages)[: indptr[-1]].astype(np.int32)
            args = (q, kc, vc, torch.tensor(indptr).to(self.device),
                    torch.tensor(indices).to(self.device), scale)
            q64, k64, v64 = (np.asarray(self.as64(t)) for t in (q, kc, vc))
            want_out = np.zeros((len(lengths), qo_heads, dim))
            want_lse = np.full((len(lengths), qo_heads), -np.inf)
            for b in range(len(lengths)):
                rows = indices[indptr[b]:indptr[b + 1]]
                if rows.size == 0:
                    continue
                for h in range(qo_heads):
                    k = k64[rows, 0, h // (qo_heads // kv_heads)]
                    v = v64[rows, 0, h // (qo_heads // kv_heads)]
                    s = k @ q64[b, h] * scale
                    m = s.max()
                    want_lse[b, h] = (m + math.log(np.exp(s - m).sum())) / math.log(2.0)
                    p = np.exp(s - m)
                    want_out[b, h] = p @ v / p.sum()
            context = f"gqa_paged_decode {dist}"
            out, lse = run(*args)
            self.assertEqual((out.dtype, lse.dtype), (torch.bfloat16, torch.float32), context)
            self.assert_close("output", out, want_out, out_tol, context)
            self.assert_close("lse", lse, want_lse, lse_tol, context)
            base_out, base_lse = load_baseline(folder, config, "torch_gather_sdpa")(*args)
            self.assert_close("output", base_out, out.double(), out_tol,
                              f"{context} baseline torch_gather_sdpa")
            self.assert_close("lse", base_lse, lse.double(), lse_tol,
                              f"{context} baseline torch_gather_sdpa")

    # --- rmsnorm_llm ------------------------------------------------------------------------

    def test_rmsnorm_llm(self):
        folder, definition, config, run = load_task("rmsnorm_llm")
        tol = config["tolerance"]["bfloat16"]
        for dist in DISTRIBUTIONS:
            x = self.tensor(draw(self.rng, dist, (7, 1000)), torch.bfloat16)
            w = self.tensor(draw(self.rng, dist, (1000,)), torch.bfloat16)
            x64, w64 = np.asarray(self.as64(x)), np.asarray(self.as64(w))
            want = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * w64
            context = f"rmsnorm_llm {dist}"
            out = run(x, w)
            self.assertEqual(out.dtype, torch.bfloat16, context)
            self.assert_close("output", out, want, tol, context)
            for name in ("torch_rms_norm", "hf_llama"):
                base = load_baseline(folder, config, name)(x, w)
                self.assertEqual(base.dtype, torch.bfloat16, f"{context} baseline {name}")
                self.assert_close("output", base, out.double(), tol, f"{context} baseline {name}")

    # --- softmax_llm ------------------------------------------------------------------------

    def test_softmax_llm(self):
        folder, definition, config, run = load_task("softmax_llm")
        tol = config["tolerance"]["bfloat16"]
        for dist in DISTRIBUTIONS:
            x = self.tensor(draw(self.rng, dist, (5, 3001)), torch.bfloat16)
            x64 = np.asarray(self.as64(x))
            e = np.exp(x64 - x64.max(-1, keepdims=True))
            want = e / e.sum(-1, keepdims=True)
            context = f"softmax_llm {dist}"
            out = run(x)
            self.assertEqual(out.dtype, torch.bfloat16, context)
            self.assert_close("probs", out, want, tol, context)
            base = load_baseline(folder, config, "torch_softmax")(x)
            self.assert_close("probs", base, out.double(), tol, f"{context} baseline torch_softmax")


if __name__ == "__main__":
    unittest.main()
