"""Inputs drawn by MLX (backends/mlx/inputs.py) where the reference is MLX operations, on MLX's
CPU device (mx.random runs the same there): float inputs are MLX draws of the inputs.py
distributions, reproducible and distinct per trial; integers, overrides MLX does not draw and
float64 come from NumPy as on the host; timing pools are made on the device. On MLX's CPU device
an evaluation keeps NumPy's draws (faster there), so these tests use a memory set up as on a
GPU."""

import unittest

import numpy as np

from tests.mlx_support import requires_mlx

DEFINITION = {
    "name": "mix", "op_type": "t", "axes": {"N": {"type": "var"}},
    "inputs": {"x": {"shape": ["N"], "dtype": "float16"},
               "b": {"shape": ["N"], "dtype": "bfloat16"},
               "i": {"shape": ["N"], "dtype": "int32"},
               "s": {"shape": [], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
    "reference": "import mlx.core as mx\ndef run(x, b, i, s):\n    return x.astype(mx.float32)\n",
}
N = 200_000


@requires_mlx()
class MlxDraws(unittest.TestCase):
    def setUp(self):
        import mlx.core as mx
        from ksearch_harness.backends.mlx.memory import MlxMemory
        from ksearch_harness.definition import Spec
        from ksearch_harness.inputs import InputMaker
        self.mx = mx
        self.spec = Spec(DEFINITION)
        self.spec.require_numpy(bfloat16_as_float32=True)
        # As on a GPU (MLX draws only there; on_gpu also puts the timing pools on the device);
        # the operations run on MLX's CPU device here.
        self.mem = MlxMemory(mx, self.spec, True, on_gpu=True)
        self.workload = {"uuid": "w", "axes": {"N": N}}
        self.axes = self.spec.axes_for(self.workload, 0)

    def maker(self, distributions, overrides=None, seed=7):
        from ksearch_harness.inputs import InputMaker
        m = InputMaker(self.spec, {"trials": 3, "distributions": distributions,
                                   "input_overrides": overrides or {}}, seed, None)
        device = self.mem.device_inputs(m)
        self.assertIsNotNone(device)
        m.draw_with(device)
        return m

    def test_float_inputs_are_mlx_draws_of_each_distribution(self):
        mx = self.mx
        m = self.maker(["normal", "uniform", "heavy_tailed"])
        normal, uniform, heavy = (m.draw(0, self.workload, t, self.axes) for t in range(3))
        x, b, i, s = normal
        self.assertIsInstance(x, mx.array)
        self.assertEqual((x.dtype, b.dtype, tuple(x.shape)), (mx.float16, mx.bfloat16, (N,)))
        self.assertIsInstance(i, mx.array)  # NumPy's draw, uploaded
        self.assertEqual(i.dtype, mx.int32)
        self.assertIsInstance(s, (np.floating, float))  # a scalar: a number for the call
        xs = np.array(x.astype(mx.float32))
        self.assertLess(abs(xs.mean()), 0.02)
        self.assertAlmostEqual(float(xs.std()), 1.0, delta=0.02)
        u = np.array(uniform[0].astype(mx.float32))
        self.assertTrue(-1.0 <= u.min() and u.max() <= 1.0)
        self.assertAlmostEqual(float(u.mean()), 0.0, delta=0.02)
        h = np.array(heavy[0].astype(mx.float32))
        # Student t with 3 degrees of freedom: tails far heavier than a normal's.
        self.assertGreater(float(np.mean(np.abs(h) > 5)), 0.003)
        self.assertLess(float(np.mean(np.abs(xs) > 5)), 1e-5)

    def test_draws_are_reproducible_and_differ_by_trial_and_stream(self):
        mx = self.mx
        first = self.maker(["normal"]).draw(0, self.workload, 0, self.axes)
        again = self.maker(["normal"]).draw(0, self.workload, 0, self.axes)
        other = self.maker(["normal"]).draw(0, self.workload, 1, self.axes)
        vetting = self.maker(["normal"]).draw(0, self.workload, 0, self.axes, stream=1)
        self.assertTrue(mx.array_equal(first[0], again[0]).item())
        self.assertFalse(mx.array_equal(first[0], other[0]).item())
        self.assertFalse(mx.array_equal(first[0], vetting[0]).item())
        self.assertFalse(mx.array_equal(first[0], first[1].astype(mx.float16)).item())

    def test_what_mlx_does_not_draw_comes_from_numpy(self):
        mx = self.mx
        # A df MLX has no way to draw (it has no gamma distribution): NumPy's Student t.
        m = self.maker(["normal"], {"x": {"distribution": "heavy_tailed", "df": 2.5}})
        x = m.draw(0, self.workload, 0, self.axes)[0]
        self.assertIsInstance(x, mx.array)
        self.assertEqual(x.dtype, mx.float16)
        from ksearch_harness.inputs import InputMaker
        host = InputMaker(self.spec, {"trials": 3, "distributions": ["normal"],
                                      "input_overrides": {"x": {"distribution": "heavy_tailed",
                                                                "df": 2.5}}}, 7, None)
        np.testing.assert_array_equal(np.array(x), host.draw(0, self.workload, 0, self.axes)[0])

    def test_timing_pools_are_made_on_the_device(self):
        from ksearch_harness import inputs as host
        mx = self.mx
        feed = self.maker(["normal"]).feed(0, self.workload, 3, self.axes, 20)
        windows = [s for s in feed.sources if isinstance(s, host._Window)]
        self.assertEqual(len(windows), 3)
        self.assertIsInstance(windows[0].pool, mx.array)  # x, drawn by MLX
        first, second = windows[0].expected(0), windows[0].expected(1)
        self.assertEqual(tuple(first.shape), (N,))
        self.assertFalse(mx.array_equal(first, second).item())
        # The candidate's copy of a window is new memory holding the same bits.
        values = self.mem.fill(feed, 0, self.mem.feed_buffers(feed))
        self.assertTrue(mx.array_equal(values[0], first).item())
        self.assertIsNone(self.mem.changed_input(self.spec, feed.expected(0), values))

    def test_a_numpy_reference_or_mlx_on_the_cpu_keeps_the_hosts_draws(self):
        from ksearch_harness.backends.mlx.memory import MlxMemory
        from ksearch_harness.inputs import InputMaker
        for reference_on_device, on_gpu in ((False, True), (True, False)):
            mem = MlxMemory(self.mx, self.spec, reference_on_device, on_gpu=on_gpu)
            self.assertIsNone(mem.device_inputs(InputMaker(self.spec, {}, 0, None)))


if __name__ == "__main__":
    unittest.main()
