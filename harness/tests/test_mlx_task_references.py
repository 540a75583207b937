"""The references and baselines of the MLX tasks (tasks/mlx_*) against independent float64 NumPy
implementations, on small shapes, under each task's own tolerance.

A reference judges every candidate, so it is checked against a second implementation written
from the definition's description: NumPy in float64, no MLX. The baselines are checked against
the same NumPy results, as candidates. Runs on MLX's GPU where it has one, else on its CPU (the
mlx[cpu] package is enough); without MLX the module is skipped, printing why, unless
KSEARCH_REQUIRE_MLX=1 makes that a failure. On the CPU, mx.fast.scaled_dot_product_attention
computes the fp16 logits in fp16 (MLX's fallback), which heavy-tailed inputs put far outside
the tolerance (as an fp16 unfused attention would be, see docs/gpu-tasks.md), so the mlx_sdpa
baseline is checked only on a GPU.
"""

import importlib.util
import json
import os
import tomllib
import unittest

import numpy as np

from tests.mlx_support import requires_mlx

try:
    os.environ["MLX_ENABLE_TF32"] = "0"  # as the harness starts MLX: full-precision products
    import mlx.core as mx
except ImportError:
    mx = None

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
    spec = importlib.util.spec_from_file_location(f"baseline_{name}",
                                                  os.path.join(folder, entry["file"]))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry["entry"])


def draw(rng, dist, shape):
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    return rng.standard_t(3.0, shape)


def softplus64(v):
    return np.logaddexp(v, 0.0)


def silu64(v):
    return v / (1.0 + np.exp(-v))


@requires_mlx("MLX is not installed: the MLX tasks' references cannot run (pip install "
              "'mlx[cpu]==0.32.4')", available=lambda: mx is not None)
class MlxTaskReferences(unittest.TestCase):
    def setUp(self):
        self.on_gpu = mx.default_device() == mx.gpu
        self.rng = np.random.default_rng(20261201)

    def assert_close(self, name, got, want, tol, context):
        got = np.array(got.astype(mx.float32) if isinstance(got, mx.array) else got, np.float64)
        want = np.asarray(want, np.float64)
        self.assertEqual(got.shape, want.shape, f"{context}: {name} shape")
        bound = tol["atol"] + tol["rtol"] * np.abs(want)
        err = np.abs(got - want)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        self.assertTrue(np.all(err <= bound), f"{context}: {name} differs by {err[worst]:.3g} at "
                                              f"{worst} (bound {bound[worst]:.3g})")

    def half(self, a):
        """An fp16 MLX array and the float64 values it holds."""
        h = np.asarray(a, np.float32).astype(np.float16)
        return mx.array(h), h.astype(np.float64)

    def single(self, a):
        s = np.asarray(a, np.float32)
        return mx.array(s), s.astype(np.float64)

    # ---- attention -----------------------------------------------------------------------------

    def attention64(self, q, k, v, causal):
        s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
        if causal:
            n = q.shape[-2]
            s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return np.einsum("bhij,bhjd->bhid", p, v)

    def test_attention(self):
        folder, definition, config, reference = load_task("mlx_attention")
        tol = config["tolerance"]["float16"]
        sdpa = load_baseline(folder, config, "mlx_sdpa")
        for dist in DISTRIBUTIONS:
            for causal, (b, n) in ((0, (1, 64)), (1, (2, 37))):
                q, q64 = self.half(draw(self.rng, dist, (b, 32, n, 128)))
                k, k64 = self.half(draw(self.rng, dist, (b, 32, n, 128)))
                v, v64 = self.half(draw(self.rng, dist, (b, 32, n, 128)))
                want = self.attention64(q64, k64, v64, causal)
                context = f"{dist} causal={causal} L={n}"
                out = reference(q, k, v, causal)
                self.assertEqual(out.dtype, mx.float16)
                self.assert_close("reference", out, want, tol, context)
                if self.on_gpu:
                    self.assert_close("mlx_sdpa", sdpa(q, k, v, causal), want, tol, context)

    def test_the_attention_reference_applies_the_mask(self):
        _, _, _, reference = load_task("mlx_attention")
        q, _ = self.half(self.rng.standard_normal((1, 32, 8, 128)))
        k, _ = self.half(self.rng.standard_normal((1, 32, 8, 128)))
        v = mx.array(np.arange(8, dtype=np.float16)[None, None, :, None] * np.ones((1, 32, 8, 128),
                                                                                  np.float16))
        out = np.array(reference(q, k, v, 1).astype(mx.float32))
        # Row 0 sees only key 0, whose value is 0 everywhere; without the mask it would not.
        self.assertTrue(np.all(out[:, :, 0, :] == 0.0))
        self.assertTrue(np.all(np.array(reference(q, k, v, 0).astype(mx.float32))[:, :, 0] > 0))

    # ---- mamba -----------------------------------------------------------------------------

    def mamba_inputs(self, dist, batch, seqlen, dim, step):
        lead = (batch,) if step else (batch, seqlen)
        u, u64 = self.half(draw(self.rng, dist, lead + (dim,)))
        delta, d64 = self.half(draw(self.rng, dist, lead + (dim,)))
        A, A64 = self.single(self.rng.uniform(-16.0, -1.0, (dim, 16)))
        B, B64 = self.half(draw(self.rng, dist, lead + (16,)))
        C, C64 = self.half(draw(self.rng, dist, lead + (16,)))
        D, D64 = self.single(draw(self.rng, dist, (dim,)))
        z, z64 = self.half(draw(self.rng, dist, lead + (dim,)))
        bias, bias64 = self.single(self.rng.uniform(-6.9, -2.25, (dim,)))
        return (u, delta, A, B, C, D, z, bias), (u64, d64, A64, B64, C64, D64, z64, bias64)

    @staticmethod
    def step64(h, u, delta, A, B, C, D, z, bias):
        """One step for every (batch, channel): u, delta, z [b, d]; B, C [b, n]; h [b, d, n]."""
        dt = softplus64(delta + bias)
        h = np.exp(dt[..., None] * A) * h + (dt * u)[..., None] * B[:, None, :]
        y = (h * C[:, None, :]).sum(-1) + D * u
        return y * silu64(z), h

    def test_mamba_scan(self):
        folder, _, config, reference = load_task("mlx_mamba_scan")
        loop = load_baseline(folder, config, "mlx_lm_loop")
        tol16, tol32 = config["tolerance"]["float16"], config["tolerance"]["float32"]
        for dist in DISTRIBUTIONS:
            for batch, seqlen, dim in ((1, 300, 64), (2, 37, 24)):
                arrays, (u, delta, A, B, C, D, z, bias) = self.mamba_inputs(dist, batch, seqlen,
                                                                             dim, step=False)
                h = np.zeros((batch, dim, 16))
                want = np.empty((batch, seqlen, dim))
                for t in range(seqlen):
                    want[:, t], h = self.step64(h, u[:, t], delta[:, t], A, B[:, t], C[:, t], D,
                                                z[:, t], bias)
                context = f"{dist} {batch}x{seqlen}x{dim}"
                for name, fn in (("reference", reference), ("mlx_lm_loop", loop)):
                    out, state = fn(*arrays)
                    self.assertEqual((out.dtype, state.dtype), (mx.float16, mx.float32))
                    self.assert_close(f"{name} out", out, want, tol16, context)
                    self.assert_close(f"{name} state", state, h, tol32, context)

    def test_mamba_step(self):
        folder, _, config, reference = load_task("mlx_mamba_step")
        step = load_baseline(folder, config, "mlx_lm_ssm_step")
        tol16, tol32 = config["tolerance"]["float16"], config["tolerance"]["float32"]
        for dist in DISTRIBUTIONS:
            for batch, dim in ((1, 256), (3, 100)):
                arrays, inputs64 = self.mamba_inputs(dist, batch, 1, dim, step=True)
                state, state64 = self.single(draw(self.rng, dist, (batch, dim, 16)))
                want, h = self.step64(state64, *inputs64)
                context = f"{dist} {batch}x{dim}"
                for name, fn in (("reference", reference), ("mlx_lm_ssm_step", step)):
                    out, new_state = fn(*arrays, state)
                    self.assert_close(f"{name} out", out, want, tol16, context)
                    self.assert_close(f"{name} new_state", new_state, h, tol32, context)


if __name__ == "__main__":
    unittest.main()
