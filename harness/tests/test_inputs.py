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


def fill_all(feed, calls):
    """Every call's values (copies), as {name: value} dicts."""
    buffers = feed.buffers()
    out = []
    for k in range(calls):
        values = feed.fill(k, buffers)
        out.append({s.tensor.name: (v.copy() if isinstance(v, np.ndarray) else v)
                    for s, v in zip(feed.sources, values)})
    return out


class TimingFeed(unittest.TestCase):
    OVERRIDES = {"x": {"distribution": "uniform", "low": -1.5, "high": -0.1},
                 "idx": {"distribution": "randint", "low": 3, "high": "N"}}

    def feed(self, overrides=None, workload=WORKLOAD, calls=33, seed=7):
        m, spec = maker(overrides if overrides is not None else self.OVERRIDES, seed=seed)
        return m.feed(0, workload, 3, spec.axes_for(workload, 0), calls), m, spec

    def test_every_call_gets_contents_no_other_call_had_in_the_task_distribution(self):
        feed, _, _ = self.feed()
        calls = fill_all(feed, 33)
        for name in ("x", "h", "idx", "mask"):
            self.assertEqual(len({c[name].tobytes() for c in calls}), 33, name)
        for c in calls:
            self.assertEqual((c["x"].shape, c["x"].dtype), ((500, 64), np.float32))
            self.assertTrue(((c["x"] >= -1.5) & (c["x"] < -0.1)).all())  # the override holds
            self.assertTrue(((c["idx"] >= 3) & (c["idx"] < 64)).all())   # valid indices
            self.assertEqual(c["h"].dtype, np.float16)
            self.assertEqual(c["mask"].dtype, np.bool_)
            self.assertEqual(c["eps"], np.float32(1e-6))                  # given scalar: fixed
            self.assertIsInstance(c["eps"], np.float32)

    def test_windows_are_views_of_one_pool_at_distinct_offsets_and_row_phases(self):
        feed, _, _ = self.feed()
        x = feed.sources[0]
        self.assertEqual(x.pool.size, 500 * 64 + 500 * 64)  # extra = n below the byte cap
        self.assertEqual(len(set(x.offsets.tolist())), 33)
        self.assertEqual(len({o % 64 for o in x.offsets.tolist()}), 33)  # no row seen twice
        self.assertTrue((x.offsets >= 0).all() and (x.offsets <= x.extra).all())
        window = feed.expected(5)[0]
        self.assertTrue(np.shares_memory(window, x.pool))
        idx = feed.sources[2]  # 500 elements in rows of 500: offsets below the row length
        self.assertEqual(len(set(idx.offsets.tolist())), 33)

    def test_random_scalar_is_drawn_for_every_call(self):
        feed, _, _ = self.feed(workload={"uuid": "w", "axes": {"M": 4}})
        eps = [c["eps"] for c in fill_all(feed, 33)]
        self.assertEqual(len(set(eps)), 33)
        self.assertTrue(all(isinstance(e, np.float32) for e in eps))

    def test_small_inputs_still_get_a_distinct_window_per_call(self):
        feed, _, _ = self.feed(workload={"uuid": "w", "axes": {"M": 1}}, calls=40)
        idx = feed.sources[2]
        self.assertEqual(idx.extra, 40)
        self.assertEqual(len(set(idx.offsets.tolist())), 40)

    def test_seeded_by_seed_workload_and_trial(self):
        a, _, _ = self.feed()
        b, _, _ = self.feed()
        c, _, _ = self.feed(seed=8)
        self.assertTrue(same(a.expected(7)[0], b.expected(7)[0]))
        self.assertFalse(same(a.expected(7)[0], c.expected(7)[0]))

    def test_vetting_stream_differs_from_the_trial(self):
        m, spec = maker()
        axes = spec.axes_for(WORKLOAD, 0)
        trial = m.draw(0, WORKLOAD, 0, axes)[0]
        vet = m.draw(0, WORKLOAD, 0, axes, stream=1)[0]
        self.assertFalse(same(trial, vet))
        self.assertGreater(np.abs(vet).max(), 2.5)  # trial 0's distribution: normal


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

    def test_file_input_is_the_same_in_every_timed_call(self):
        m, spec = maker(task_dir=self.dir.name)
        workload = {"uuid": "w", "axes": {"M": 500}, "inputs": {
            "x": {"type": "safetensors", "path": "blob/w.safetensors", "tensor_key": "x"}}}
        feed = m.feed(0, workload, 3, spec.axes_for(workload, 0), 5)
        calls = fill_all(feed, 5)
        self.assertTrue(all(same(c["x"], self.x) for c in calls))
        self.assertEqual(len({c["idx"].tobytes() for c in calls}), 5)  # random inputs vary
        self.assertTrue(feed.varies)

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
