"""Structured integer inputs: `offsets` (segment offsets such as kv_indptr) and `unique`
(distinct indices such as kv_indices), bounds given as expressions over axes, and a
workload's own distribution for a random input."""

import unittest

import numpy as np

from ksearch_harness.definition import Spec
from ksearch_harness.errors import TaskError
from ksearch_harness.inputs import InputMaker

# A paged-attention-like definition: kv_indptr splits num_kv_indices entries of kv_indices
# into batch_size segments; kv_indices point into num_pages pages.
PAGED = {
    "axes": {"batch_size": {"type": "var"}, "len_indptr": {"type": "var"},
             "num_kv_indices": {"type": "var"}, "num_pages": {"type": "var"},
             "page_size": {"type": "const", "value": 4}},
    "inputs": {"k_cache": {"shape": ["num_pages", "page_size"], "dtype": "float32"},
               "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
               "table": {"shape": ["batch_size", "page_size"], "dtype": "int64"}},
    "outputs": {"o": {"shape": ["batch_size"], "dtype": "float32"}},
}
AXES = {"batch_size": 6, "len_indptr": 7, "num_kv_indices": 40, "num_pages": 50}
OFFSETS = {"distribution": "offsets", "total": "num_kv_indices"}
UNIQUE = {"distribution": "unique", "high": "num_pages"}


def make(overrides=None, seed=3):
    spec = Spec(PAGED)
    spec.require_numpy()
    correctness = {"distributions": ["normal"], "input_overrides": overrides or {}}
    return InputMaker(spec, correctness, seed, None), spec


def workload(axes=None, inputs=None):
    return {"uuid": "w", "axes": dict(axes or AXES), "inputs": inputs or {}}


def draw(m, spec, w, trial=0):
    values = m.draw(0, w, trial, spec.axes_for(w, 0))
    return dict(zip([t.name for t in spec.inputs], values))


def check_offsets(test, x, n, total):
    test.assertEqual(x.dtype, np.int32)
    test.assertEqual(x.shape, (n,))
    test.assertEqual(int(x[0]), 0)
    test.assertEqual(int(x[-1]), total)
    test.assertTrue(np.all(np.diff(x) >= 0), x)


class Offsets(unittest.TestCase):
    def test_start_at_zero_never_decrease_and_end_at_the_total(self):
        m, spec = make({"kv_indptr": OFFSETS})
        for trial in range(20):
            check_offsets(self, draw(m, spec, workload(), trial)["kv_indptr"], 7, 40)

    def test_segment_lengths_vary_and_some_are_empty(self):
        m, spec = make({"kv_indptr": OFFSETS})
        lengths = np.concatenate([np.diff(draw(m, spec, workload(dict(AXES, num_kv_indices=200)), t)
                                          ["kv_indptr"]) for t in range(5)])
        self.assertGreater(len(set(lengths.tolist())), 10)
        axes = dict(AXES, len_indptr=30, num_kv_indices=12)
        lengths = np.diff(draw(m, spec, workload(axes))["kv_indptr"])
        self.assertIn(0, lengths.tolist())

    def test_total_as_an_expression_and_as_a_number(self):
        m, spec = make({"kv_indptr": {"distribution": "offsets", "total": "num_pages * page_size - 8"}})
        check_offsets(self, draw(m, spec, workload())["kv_indptr"], 7, 50 * 4 - 8)
        m, spec = make({"kv_indptr": {"distribution": "offsets", "total": 5}})
        check_offsets(self, draw(m, spec, workload())["kv_indptr"], 7, 5)

    def test_one_element_holds_only_a_zero_total(self):
        m, spec = make({"kv_indptr": OFFSETS})
        x = draw(m, spec, workload(dict(AXES, len_indptr=1, num_kv_indices=0)))["kv_indptr"]
        self.assertEqual(x.tolist(), [0])
        with self.assertRaises(TaskError) as e:
            draw(m, spec, workload(dict(AXES, len_indptr=1)))
        self.assertIn("need at least 2 elements", e.exception.message)

    def test_float_and_2d_inputs_are_refused(self):
        for name, why in (("k_cache", "integer input"), ("table", "1-D input")):
            m, spec = make({name: {"distribution": "offsets", "total": 3}})
            with self.assertRaises(TaskError) as e:
                draw(m, spec, workload())
            self.assertIn(why, e.exception.message)
            self.assertEqual(e.exception.field, f"correctness.input_overrides.{name}")


class Unique(unittest.TestCase):
    def test_distinct_values_in_range_in_random_order(self):
        m, spec = make({"kv_indices": UNIQUE})
        x = draw(m, spec, workload())["kv_indices"]
        self.assertEqual((x.dtype, x.shape), (np.int32, (40,)))
        self.assertEqual(len(set(x.tolist())), 40)
        self.assertTrue(x.min() >= 0 and x.max() < 50)
        self.assertFalse(np.all(np.diff(x) > 0), "indices come sorted")

    def test_small_share_of_a_large_range_and_a_low_bound(self):
        m, spec = make({"kv_indices": {"distribution": "unique", "low": 1000, "high": "num_pages * 1000"}})
        x = draw(m, spec, workload())["kv_indices"]
        self.assertEqual(len(set(x.tolist())), 40)
        self.assertTrue(x.min() >= 1000 and x.max() < 50000)

    def test_whole_range_is_a_permutation(self):
        m, spec = make({"kv_indices": UNIQUE})
        x = draw(m, spec, workload(dict(AXES, num_kv_indices=50)))["kv_indices"]
        self.assertEqual(sorted(x.tolist()), list(range(50)))

    def test_more_elements_than_values_is_a_task_error(self):
        m, spec = make({"kv_indices": UNIQUE})
        with self.assertRaises(TaskError) as e:
            draw(m, spec, workload(dict(AXES, num_pages=39)))
        self.assertIn("cannot draw 40 distinct values from [0, 39)", e.exception.message)

    def test_two_dimensional_input_is_distinct_over_all_elements(self):
        m, spec = make({"table": {"distribution": "unique", "high": "batch_size * page_size"}})
        x = draw(m, spec, workload())["table"]
        self.assertEqual(x.shape, (6, 4))
        self.assertEqual(sorted(x.ravel().tolist()), list(range(24)))


class Bounds(unittest.TestCase):
    def bad(self, bound, text):
        m, spec = make({"kv_indices": {"distribution": "unique", "high": bound}})
        with self.assertRaises(TaskError) as e:
            draw(m, spec, workload())
        self.assertIn(text, e.exception.message)
        self.assertEqual(e.exception.field, "correctness.input_overrides.kv_indices.high")

    def test_expressions(self):
        m, spec = make({"kv_indices": {"distribution": "unique", "high": "(num_pages + 10) / 2 * 3 % 1000"}})
        self.assertTrue(draw(m, spec, workload())["kv_indices"].max() < 90)
        self.bad("num_pages / 3", "50 / 3 is not an integer")
        self.bad("num_pages + pages", "uses 'pages', which is not an axis")
        self.bad("pages", "'pages' is not an axis of the definition")
        self.bad("max(num_pages, 1)", "may only use integers, axis names")
        self.bad("num_pages ** 2", "may only use integers, axis names")
        self.bad("num_pages +", "is not an expression over axes")
        self.bad(2.5, "must be an integer")

    def test_randint_takes_expressions_too(self):
        m, spec = make({"table": {"distribution": "randint", "low": 1, "high": "page_size + 1"}})
        x = draw(m, spec, workload())["table"]
        self.assertTrue(x.min() >= 1 and x.max() <= 4)


class WorkloadDistribution(unittest.TestCase):
    def test_a_workloads_own_distribution_applies_unless_the_task_sets_one(self):
        w = workload(inputs={"kv_indptr": dict(OFFSETS, type="random")})
        m, spec = make()
        check_offsets(self, draw(m, spec, w)["kv_indptr"], 7, 40)
        self.assertTrue(draw(m, spec, workload())["kv_indptr"].max() < 100)
        m, spec = make({"kv_indptr": {"distribution": "randint", "low": 0, "high": 3}})
        self.assertTrue(draw(m, spec, w)["kv_indptr"].max() < 3)

    def test_errors_name_the_workload_field(self):
        m, spec = make()
        w = workload(inputs={"kv_indptr": {"type": "random", "distribution": "zipf"}})
        with self.assertRaises(TaskError) as e:
            draw(m, spec, w)
        self.assertEqual(e.exception.field, "workloads[0].inputs.kv_indptr.distribution")
        w = workload(inputs={"kv_indices": {"type": "random", "distribution": "unique", "high": 3}})
        with self.assertRaises(TaskError) as e:
            draw(m, spec, w)
        self.assertEqual(e.exception.field, "workloads[0].inputs.kv_indices")

    def test_draws_are_reproducible_and_change_with_the_trial(self):
        w = workload(inputs={"kv_indptr": dict(OFFSETS, type="random"),
                             "kv_indices": dict(UNIQUE, type="random")})
        (m1, spec), (m2, _) = make(), make()
        a, b = draw(m1, spec, w, 1), draw(m2, spec, w, 1)
        for name in ("kv_indptr", "kv_indices"):
            self.assertEqual(a[name].tolist(), b[name].tolist())
        self.assertNotEqual(a["kv_indices"].tolist(), draw(m1, spec, w, 2)["kv_indices"].tolist())


class Timing(unittest.TestCase):
    def test_every_timed_call_gets_a_whole_valid_draw_of_its_own(self):
        m, spec = make({"kv_indptr": OFFSETS, "kv_indices": UNIQUE})
        w = workload()
        feed = m.feed(0, w, 3, spec.axes_for(w, 0), 12)
        self.assertTrue(feed.varies)
        buffers = feed.buffers()
        seen = set()
        for k in range(12):
            values = dict(zip([t.name for t in spec.inputs], feed.fill(k, buffers)))
            check_offsets(self, values["kv_indptr"], 7, 40)
            indices = values["kv_indices"]
            self.assertEqual(len(set(indices.tolist())), 40)
            self.assertTrue(indices.max() < 50)
            seen.add(indices.tobytes())
        self.assertEqual(len(seen), 12)


if __name__ == "__main__":
    unittest.main()
