"""The GPU backends' device path without a GPU: torch's CPU tensors stand in for the device.

- compare.py's tensor functions give the NumPy functions' verdicts and statistics;
- gpu_inputs.py's draws keep inputs.py's rules (distributions, bounds, structure,
  reproducibility, fresh contents per trial, windows of one pool per timing call);
- an evaluation with KSEARCH_TORCH_NATIVE=1 (the device path on a CPU torch) still catches
  unwritten outputs, changed inputs and results cached across timing calls.

Skipped (printing why) without torch. The same logic on a CUDA device is exercised by
test_gpu.py and test_gpu_gate.py there.
"""

import copy
import math
import unittest

import numpy as np

from ksearch_harness import compare as c
from ksearch_harness.definition import Spec
from ksearch_harness.errors import TaskError
from ksearch_harness.inputs import InputMaker
from tests import gpu_support as g
from tests.support import run


def _torch(test):
    return g.torch_or_skip(test)


def _same_check(test, a, b, context):
    for k in ("elements", "mismatched", "pairs", "unwritten", "first", "got", "expected"):
        x, y = getattr(a, k), getattr(b, k)
        test.assertTrue(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)),
                        f"{context}: {k} {x!r} != {y!r}")
    for k in ("max_abs", "max_rel", "sq_diff", "sq_ref"):
        x, y = getattr(a, k), getattr(b, k)
        test.assertTrue((math.isnan(x) and math.isnan(y)) or
                        abs(x - y) <= 1e-12 * max(abs(x), abs(y), 1e-300),
                        f"{context}: {k} {x!r} != {y!r}")


class TensorComparison(unittest.TestCase):
    def setUp(self):
        self.torch = _torch(self)

    def cases(self):
        rng = np.random.default_rng(3)
        kinds = ["float32", "float16", "float64", "int32", "bool"]
        for i in range(150):
            n = int(rng.integers(1, 400))
            kind = kinds[i % len(kinds)]
            ref = rng.standard_normal(n)
            out = ref + rng.standard_normal(n) * [0, 1e-6, 1e-3, 1][i % 4]
            if i % 3 == 0:
                out[rng.integers(0, n, 3)] = np.nan
            if i % 5 == 1:
                ref[rng.integers(0, n, 2)] = np.inf
                out[rng.integers(0, n, 2)] = np.inf
            if i % 7 == 2:
                ref[: n // 3] = 0
            if kind == "bool":
                o, r = out > 0, ref > 0
                if i % 2:
                    o.view(np.uint8)[0] = 0xAA  # the poison byte of an unwritten bool
            elif kind == "int32":
                clean = lambda v: np.nan_to_num(np.rint(v * 10), posinf=5, neginf=-5)
                o, r = clean(out).astype(np.int32), clean(ref).astype(np.int32)
                if i % 2:
                    o[0] = np.iinfo(np.int32).max
            else:
                o, r = out.astype(kind), ref.astype(kind)
            shape = (n,) if i % 2 else (1, n)
            tol = (0.0, 0.0) if kind in ("int32", "bool") else (1e-4, 1e-3)
            yield kind, o.reshape(shape), r.reshape(shape), tol

    def test_compare_matches_numpy(self):
        t = self.torch
        for kind, o, r, (atol, rtol) in self.cases():
            host = c.compare(o, r, atol, rtol)
            dev = c.compare_tensors(t, t.from_numpy(o.copy()), t.from_numpy(r.copy()), atol, rtol)
            _same_check(self, host, dev, f"{kind} {o.shape}")

    def test_fast_check_and_magnitude_match_numpy(self):
        self.assert_fast_check_and_magnitude_match_numpy()

    def assert_fast_check_and_magnitude_match_numpy(self):
        t = self.torch
        verdicts = set()
        for kind, o, r, (atol, rtol) in self.cases():
            host = c.FastCheck(o.shape, np.dtype(kind), atol, rtol).passes(o, r)
            dev = c.TensorFastCheck(t, kind, atol, rtol).passes(t.from_numpy(o.copy()),
                                                                 t.from_numpy(r.copy()))
            self.assertEqual(host, dev, kind)
            verdicts.add(host)
            self.assertEqual(c.largest_finite_magnitude(r),
                             c.largest_finite_magnitude_tensor(t, t.from_numpy(r.copy())), kind)
        self.assertEqual(verdicts, {True, False})  # both outcomes were exercised

    def test_bfloat16_is_compared_as_its_widened_values(self):
        t = self.torch
        ref = t.randn(1000).to(t.bfloat16)
        out = ref.clone()
        out[7] = float("nan")
        out[9] = ref[9].float() * 1.05
        check = c.compare_tensors(t, out, ref, 1e-5, 1e-2)
        widened = c.compare(out.float().numpy(), ref.float().numpy(), 1e-5, 1e-2)
        _same_check(self, widened, check, "bfloat16")
        self.assertEqual(check.mismatched, 2)
        self.assertEqual(check.unwritten, 1)
        self.assertEqual(check.first, (7,))

    def test_chunks_give_the_same_statistics(self):
        t = self.torch
        rng = np.random.default_rng(5)
        r = rng.standard_normal(10_001).astype(np.float32)
        o = r + rng.standard_normal(10_001).astype(np.float32) * 1e-6
        o[5_000] = np.nan
        whole = c.compare_tensors(t, t.from_numpy(o), t.from_numpy(r), 1e-4, 1e-3)
        saved = c.TENSOR_CHUNK
        c.TENSOR_CHUNK = 999
        try:
            chunked = c.compare_tensors(t, t.from_numpy(o), t.from_numpy(r), 1e-4, 1e-3)
        finally:
            c.TENSOR_CHUNK = saved
        _same_check(self, whole, chunked, "chunked")
        self.assertEqual((whole.mismatched, whole.first), (1, (5_000,)))

    def test_fast_check_and_magnitude_in_chunks_match_numpy(self):
        # Chunks of 97 elements: every case spans many, and its bad elements sit in later ones.
        t = self.torch
        saved = c.TENSOR_CHUNK
        c.TENSOR_CHUNK = 97
        try:
            self.assert_fast_check_and_magnitude_match_numpy()
            # One wrong element in the last chunk alone fails; the largest magnitude there is found.
            r = np.ones(1000, dtype=np.float32)
            o = r.copy()
            o[-1] = 2.0
            r[-2] = -7.0
            o[-2] = -7.0
            check = c.TensorFastCheck(t, "float32", 1e-4, 1e-3)
            self.assertFalse(check.passes(t.from_numpy(o), t.from_numpy(r)))
            self.assertTrue(check.passes(t.from_numpy(r.copy()), t.from_numpy(r)))
            self.assertEqual(c.largest_finite_magnitude_tensor(t, t.from_numpy(r)), 7.0)
        finally:
            c.TENSOR_CHUNK = saved


DEFINITION = {
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64},
             "T": {"type": "var"}, "P": {"type": "var"}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"},
               "b": {"shape": ["M", "N"], "dtype": "bfloat16"},
               "h": {"shape": ["N"], "dtype": "float16"},
               "idx": {"shape": ["M"], "dtype": "int32"},
               "mask": {"shape": ["M", "N"], "dtype": "bool"},
               "indptr": {"shape": ["M"], "dtype": "int32"},
               "pages": {"shape": ["T"], "dtype": "int32"},
               "eps": {"shape": None, "dtype": "float32"},
               "s": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M"], "dtype": "float32"}},
}
WORKLOAD = {"uuid": "w", "axes": {"M": 400, "T": 300, "P": 1000},
            "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}
OVERRIDES = {"idx": {"distribution": "randint", "low": 3, "high": "M"},
             "indptr": {"distribution": "offsets", "total": "T"},
             "pages": {"distribution": "unique", "low": 0, "high": "P"}}


class DeviceDraws(unittest.TestCase):
    def setUp(self):
        self.torch = _torch(self)
        self.spec = Spec(DEFINITION)
        self.spec.require_numpy(bfloat16_as_float32=True)

    def maker(self, seed=7, overrides=OVERRIDES, distributions=("normal", "uniform",
                                                                 "heavy_tailed")):
        m = InputMaker(self.spec, {"distributions": list(distributions),
                                   "input_overrides": copy.deepcopy(overrides)}, seed, None)
        t = self.torch
        m.on_device(t, t.device("cpu"), lambda a, spec: t.from_numpy(a.copy()))
        return m

    def draw(self, m, trial=0, stream=None, index=0):
        axes = self.spec.axes_for(WORKLOAD, index)
        return dict(zip([x.name for x in self.spec.inputs],
                        m.draw(index, WORKLOAD, trial, axes, stream=stream)))

    def test_dtypes_shapes_and_structure(self):
        t = self.torch
        v = self.draw(self.maker())
        self.assertEqual(v["x"].dtype, t.float32)
        self.assertEqual(v["b"].dtype, t.bfloat16)
        self.assertEqual(v["h"].dtype, t.float16)
        self.assertEqual(v["mask"].dtype, t.bool)
        self.assertEqual(tuple(v["x"].shape), (400, 64))
        self.assertEqual(float(v["eps"]), np.float32(1e-6))
        self.assertIsInstance(v["s"], np.floating)  # a random scalar: a number for the call
        idx = v["idx"]
        self.assertEqual(idx.dtype, t.int32)
        self.assertTrue(bool(((idx >= 3) & (idx < 400)).all()))
        indptr = v["indptr"]
        self.assertEqual(int(indptr[0]), 0)
        self.assertEqual(int(indptr[-1]), 300)
        self.assertTrue(bool((indptr[1:] >= indptr[:-1]).all()))
        pages = v["pages"]
        self.assertEqual(len(set(pages.tolist())), 300)
        self.assertTrue(bool(((pages >= 0) & (pages < 1000)).all()))
        self.assertTrue(0.3 < float(v["mask"].float().mean()) < 0.7)

    def test_distributions_per_trial(self):
        m = self.maker()
        normal, uniform, heavy = (self.draw(m, trial)["x"].double() for trial in range(3))
        self.assertLess(abs(float(normal.mean())), 0.05)
        self.assertLess(abs(float(normal.std()) - 1.0), 0.05)
        self.assertGreaterEqual(float(uniform.min()), -1.0)
        self.assertLess(float(uniform.max()), 1.0)
        self.assertLess(abs(float(uniform.var()) - 1 / 3), 0.03)
        # Student t with 3 degrees of freedom: far heavier tails than the normal draw.
        self.assertGreater(float(heavy.abs().max()), 3 * float(normal.abs().max()))
        self.assertLess(abs(float(heavy.median())), 0.05)

    def test_reproducible_and_fresh(self):
        a, b = self.draw(self.maker()), self.draw(self.maker())
        for name in ("x", "b", "idx", "pages", "indptr"):
            self.assertTrue(self.torch.equal(a[name], b[name]), name)
        self.assertEqual(a["s"], b["s"])
        other = {"trial 1": self.draw(self.maker(), trial=1)["x"],
                 "seed 8": self.draw(self.maker(seed=8))["x"],
                 "vetting stream": self.draw(self.maker(), stream=1)["x"],
                 "workload 1": self.draw(self.maker(), index=1)["x"]}
        for what, x in other.items():
            self.assertFalse(self.torch.equal(a["x"], x), what)

    def test_task_errors_of_the_host_rules(self):
        too_many = dict(OVERRIDES, pages={"distribution": "unique", "low": 0, "high": 10})
        with self.assertRaises(TaskError) as e:
            self.draw(self.maker(overrides=too_many))
        self.assertIn("cannot draw 300 distinct values", e.exception.message)
        floats = dict(OVERRIDES, x={"distribution": "offsets", "total": "T"})
        with self.assertRaises(TaskError) as e:
            self.draw(self.maker(overrides=floats))
        self.assertIn("offsets needs an integer input", e.exception.message)

    def test_timing_feed_windows_and_structured_draws(self):
        t = self.torch
        m = self.maker()
        axes = self.spec.axes_for(WORKLOAD, 0)
        feed = m.feed(0, WORKLOAD, 3, axes, 8)
        names = [x.name for x in self.spec.inputs]
        calls = [dict(zip(names, feed.expected(k))) for k in range(8)]
        rows = set()
        for k, call in enumerate(calls):
            self.assertEqual(tuple(call["x"].shape), (400, 64))
            self.assertEqual(call["b"].dtype, t.bfloat16)
            ip = call["indptr"]
            self.assertEqual((int(ip[0]), int(ip[-1])), (0, 300))
            self.assertEqual(len(set(call["pages"].tolist())), 300)
            rows.add(tuple(call["x"][0].tolist()))
        self.assertEqual(len(rows), 8)  # every call its own contents
        x = [s for s in feed.sources if s.tensor.name == "x"][0]
        self.assertEqual(len(set(int(o) % 64 for o in x.offsets)), 8)  # distinct residues
        self.assertFalse(t.equal(calls[0]["pages"], calls[1]["pages"]))
        self.assertEqual(len({float(call["s"]) for call in calls}), 8)


class NativeEvaluation(unittest.TestCase):
    """Whole evaluations through the device path on a CPU torch (python backend)."""

    def setUp(self):
        _torch(self)

    def evaluate(self, source):
        req = g.gpu_request("python", source, calling="dps", device="cpu")
        req["timing"] = {"warmup": 2, "iterations": 6, "min_iterations": 3, "max_seconds": 0.5}
        return run(req, env={"KSEARCH_TORCH_NATIVE": "1"}, timeout=300)

    def test_checks_hold_on_the_device_path(self):
        good = "import torch\ndef softmax(x, y, M, N):\n    y.copy_(torch.softmax(x, dim=-1))\n"
        result = self.evaluate(good)
        self.assertEqual(result.statuses, ["passed", "passed"], result.stderr[-2000:])
        self.assertEqual(result.workloads[0]["correctness"]["mismatched"], 0)
        self.assertEqual(len(result.workloads[0]["timing"]["candidate_ns"]), 6)
        partial = ("import torch\ndef softmax(x, y, M, N):\n"
                   "    y[:, :-1].copy_(torch.softmax(x, dim=-1)[:, :-1])\n")
        result = self.evaluate(partial)
        self.assertEqual(result.statuses[0], "incorrect_numerical")
        self.assertIn("NaN poison", result.workloads[0]["reason"])
        mutate = ("import torch\ndef softmax(x, y, M, N):\n"
                  "    y.copy_(torch.softmax(x, dim=-1))\n    x[0, 0] = 5.0\n")
        result = self.evaluate(mutate)
        self.assertIn("modified its input 'x'", result.workloads[0]["reason"])
        cache = ("import torch\nC = {}\ndef softmax(x, y, M, N):\n"
                 "    if x.data_ptr() not in C:\n        C[x.data_ptr()] = torch.softmax(x, -1)\n"
                 "    y.copy_(C[x.data_ptr()])\n")
        result = self.evaluate(cache)
        self.assertEqual(result.statuses[0], "incorrect_numerical")
        self.assertIn("are results cached", result.workloads[0]["reason"])


if __name__ == "__main__":
    unittest.main()
