"""Seeded input generation, distributions, scalars and the safetensors reader."""

import json
import os
import tempfile
import unittest

import numpy as np

from ksearch_harness import safetensors_reader
from ksearch_harness.definition import Spec
from ksearch_harness.errors import TaskError
from ksearch_harness.inputs import InputMaker

DEFINITION = {
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"},
               "h": {"shape": ["N"], "dtype": "float16"},
               "idx": {"shape": ["M"], "dtype": "int64"},
               "mask": {"shape": ["M", "N"], "dtype": "bool"},
               "eps": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M"], "dtype": "float32"}},
}
WORKLOAD = {"uuid": "w", "axes": {"M": 500}, "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}


def maker(overrides=None, distributions=("normal", "uniform", "heavy_tailed"), seed=7,
          task_dir=None, definition=DEFINITION):
    spec = Spec(definition)
    spec.require_numpy()
    correctness = {"distributions": list(distributions), "input_overrides": overrides or {}}
    return InputMaker(spec, correctness, seed, task_dir), spec


def draw(m, spec, index=0, trial=0, workload=WORKLOAD):
    values = m.draw(index, workload, trial, spec.axes_for(workload, index))
    return dict(zip([t.name for t in spec.inputs], values))


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class Seeding(unittest.TestCase):
    def test_same_seed_workload_and_trial_give_the_same_data(self):
        m1, spec = maker()
        m2, _ = maker()
        a, b = draw(m1, spec, 1, 2), draw(m2, spec, 1, 2)
        for name in ("x", "h", "idx", "mask"):
            self.assertTrue(same(a[name], b[name]), name)

    def test_trial_workload_and_seed_each_change_the_data(self):
        m, spec = maker()
        base = draw(m, spec, 0, 0)["x"]
        self.assertFalse(same(base, draw(m, spec, 0, 1)["x"]))
        self.assertFalse(same(base, draw(m, spec, 1, 0)["x"]))
        m2, _ = maker(seed=8)
        self.assertFalse(same(base, draw(m2, spec, 0, 0)["x"]))

    def test_draws_are_fresh_writeable_contiguous_arrays(self):
        m, spec = maker()
        a, b = draw(m, spec), draw(m, spec)
        self.assertTrue(same(a["x"], b["x"]))
        self.assertFalse(np.shares_memory(a["x"], b["x"]))
        for v in a.values():
            if isinstance(v, np.ndarray):
                self.assertTrue(v.flags.c_contiguous and v.flags.writeable)

    def test_seed_sequence_is_the_documented_one(self):
        m, spec = maker(distributions=["normal"])
        rng = np.random.default_rng(np.random.SeedSequence([7, 3, 1]))
        expected = rng.standard_normal(size=(500, 64), dtype=np.float32)
        self.assertTrue(same(draw(m, spec, 3, 1)["x"], expected))


class Distributions(unittest.TestCase):
    def test_trial_cycles_through_the_float_distributions(self):
        m, spec = maker()
        normal, uniform, heavy, normal_again = (draw(m, spec, 0, t)["x"] for t in range(4))
        self.assertGreater(np.abs(normal).max(), 2.5)
        self.assertTrue(((uniform >= -1) & (uniform < 1)).all())
        self.assertGreater(np.abs(heavy).max(), 10)  # Student t with df=3 over 32000 draws
        self.assertEqual(normal.dtype, np.float32)
        self.assertFalse(same(normal, normal_again))  # trial 3 is normal again, fresh data

    def test_override_fixes_the_distribution_for_every_trial(self):
        m, spec = maker({"x": {"distribution": "uniform", "low": -1.5, "high": -0.1},
                         "h": {"distribution": "normal", "mean": 100.0, "std": 0.01}})
        for trial in range(3):
            d = draw(m, spec, 0, trial)
            self.assertTrue(((d["x"] >= -1.5) & (d["x"] < -0.1)).all())
            self.assertEqual(d["h"].dtype, np.float16)
            self.assertTrue((np.abs(d["h"].astype(np.float64) - 100) < 0.5).all())

    def test_randint_with_an_axis_name_bound(self):
        m, spec = maker({"idx": {"distribution": "randint", "low": 3, "high": "N"}})
        idx = draw(m, spec)["idx"]
        self.assertEqual(idx.dtype, np.int64)
        self.assertEqual(set(idx.tolist()), set(range(3, 64)))

    def test_integer_and_bool_defaults(self):
        m, spec = maker()
        d = draw(m, spec)
        self.assertTrue(((d["idx"] >= 0) & (d["idx"] < 100)).all())
        self.assertEqual(set(d["idx"].tolist()), set(range(100)))
        self.assertEqual(d["mask"].dtype, np.bool_)
        self.assertTrue(0.45 < d["mask"].mean() < 0.55)

    def test_scalar_input_keeps_its_dtype(self):
        m, spec = maker()
        eps = draw(m, spec)["eps"]
        self.assertIsInstance(eps, np.float32)
        self.assertEqual(eps, np.float32(1e-6))

    def test_random_scalar_is_drawn(self):
        m, spec = maker()
        workload = {"uuid": "w", "axes": {"M": 4}}
        eps = draw(m, spec, workload=workload)["eps"]
        self.assertIsInstance(eps, np.float32)

    def test_bad_override_is_a_task_error(self):
        with self.assertRaises(TaskError) as e:
            maker({"x": {"distribution": "gaussian"}})
        self.assertEqual(e.exception.field, "correctness.input_overrides.x.distribution")
        m, spec = maker({"idx": {"distribution": "randint", "low": 0, "high": "K"}})
        with self.assertRaises(TaskError) as e:
            draw(m, spec)
        self.assertIn("'K' is not an axis", e.exception.message)

    def test_missing_var_axis_is_a_task_error(self):
        m, spec = maker()
        with self.assertRaises(TaskError) as e:
            spec.axes_for({"axes": {}}, 4)
        self.assertEqual(e.exception.field, "workloads[4].axes.M")


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "np"}}, [], 0
    codes = {np.dtype("<f4"): "F32", np.dtype("<i8"): "I64", np.dtype("<f2"): "F16"}
    for name, array in tensors.items():
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": codes[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))


class Safetensors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.x = np.arange(500 * 64, dtype=np.float32).reshape(500, 64) / 7
        self.idx = np.array([5, -2, 2**40], dtype=np.int64)
        os.makedirs(os.path.join(self.dir.name, "blob"))
        write_safetensors(os.path.join(self.dir.name, "blob", "w.safetensors"),
                          {"x": self.x, "idx": self.idx})

    def test_reader_returns_the_tensors(self):
        path = os.path.join(self.dir.name, "blob", "w.safetensors")
        self.assertTrue(same(safetensors_reader.load(path, "idx"), self.idx))
        self.assertTrue(same(safetensors_reader.load(path, "x"), self.x))
        with self.assertRaisesRegex(ValueError, r"no tensor 'y' \(the file has idx, x\)"):
            safetensors_reader.load(path, "y")

    def test_workload_input_from_a_file_is_fresh_each_trial(self):
        m, spec = maker(task_dir=self.dir.name)
        workload = {"uuid": "w", "axes": {"M": 500}, "inputs": {
            "x": {"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "x"}}}
        a, b = draw(m, spec, 0, 0, workload)["x"], draw(m, spec, 0, 1, workload)["x"]
        self.assertTrue(same(a, self.x) and same(b, self.x))
        self.assertFalse(np.shares_memory(a, b))

    def test_file_must_match_the_definition_and_stay_in_the_task(self):
        m, spec = maker(task_dir=self.dir.name)
        bad_shape = {"uuid": "w", "axes": {"M": 3}, "inputs": {
            "x": {"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "x"}}}
        with self.assertRaisesRegex(TaskError, r"has shape \[500, 64\], but 'x' needs \[3, 64\]"):
            draw(m, spec, workload=bad_shape)
        outside = {"uuid": "w", "axes": {"M": 3}, "inputs": {
            "x": {"type": "safetensors", "path": "../w.safetensors", "tensor_key": "x"}}}
        with self.assertRaisesRegex(TaskError, "outside the task folder"):
            draw(m, spec, workload=outside)


if __name__ == "__main__":
    unittest.main()
