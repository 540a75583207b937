"""The timing stage's per-call checks done by MLX (backends/mlx/checks.py) and the inputs'
bit comparison on the device (memory.same_bits, MlxMemory.changed_input with pool windows), on
MLX's CPU device: the same MLX operations run there as on a GPU. End to end, a candidate that
returns cached results during timing still fails (test_mlx_backend.py): the device test fails,
and the host comparison gives the verdict."""

import unittest

import numpy as np

from tests.mlx_support import requires_mlx

DEFINITION = {
    "name": "pair", "op_type": "t", "axes": {"N": {"type": "var"}},
    "inputs": {"x": {"shape": ["N"], "dtype": "float16"}, "w": {"shape": ["N"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["N"], "dtype": "float16"}, "z": {"shape": ["N"], "dtype": "float32"}},
    "reference": "def run(x, w):\n    return x, w\n",
}


class _Reference:
    """What DeviceChecks asks of the reference: its results by output name."""

    def __init__(self, spec):
        from ksearch_harness.reference import Reference
        self.named_values = lambda raw, shapes, where: Reference.named_values(self, raw, shapes,
                                                                             where)
        self.spec = spec


class _Ctx:
    def __init__(self, spec, tolerances, reference):
        self.spec, self.tolerances, self.reference = spec, tolerances, reference


@requires_mlx()
class DeviceChecks(unittest.TestCase):
    def setUp(self):
        import mlx.core as mx
        from ksearch_harness.backends.mlx.memory import MlxMemory
        from ksearch_harness.definition import Spec
        self.mx = mx
        self.spec = Spec(DEFINITION)
        self.tolerances = {"y": (1e-2, 1e-2, None), "z": (1e-5, 1e-4, None)}
        self.mem = MlxMemory(mx, self.spec, True, on_gpu=False)
        self.ctx = _Ctx(self.spec, self.tolerances, _Reference(self.spec))
        self.checks = self.mem.timing_checks(self.ctx)
        self.shapes = [(1000,), (1000,)]

    def pair(self, dy=0.0, dz=0.0):
        mx = self.mx
        ref_y = mx.array(np.linspace(-3, 3, 1000).astype(np.float16))
        ref_z = mx.array(np.linspace(-1, 1, 1000).astype(np.float32))
        return [ref_y + dy, ref_z + dz], (ref_y, ref_z)

    def test_outputs_within_the_tolerance_pass_and_others_go_to_the_host(self):
        self.assertIsNotNone(self.checks)
        taken, ref = self.pair()
        self.assertTrue(self.checks.passes(self.checks.take(taken), ref, self.shapes, "w"))
        taken, ref = self.pair(dz=5e-5)  # z's bound is 1e-5 + 1e-4 |z|: off somewhere
        self.assertFalse(self.checks.passes(taken, ref, self.shapes, "w"))
        taken, ref = self.pair(dy=0.5)
        self.assertFalse(self.checks.passes(taken, ref, self.shapes, "w"))
        # NaN in the output, or in the reference: the host decides.
        taken, ref = self.pair()
        nan = self.mx.array(np.full(1000, np.nan, np.float32))
        self.assertFalse(self.checks.passes([taken[0], nan], ref, self.shapes, "w"))
        self.assertFalse(self.checks.passes(taken, (ref[0], nan), self.shapes, "w"))
        # Host copies of what was taken are what the host comparison gets.
        hosts = self.checks.host(taken)
        self.assertTrue(all(isinstance(h, np.ndarray) for h in hosts))
        np.testing.assert_array_equal(hosts[1], np.array(ref[1]))

    def test_large_outputs_are_tested_in_chunks(self):
        from ksearch_harness.backends.mlx import checks
        taken, ref = self.pair()
        saved = checks.CHUNK
        checks.CHUNK = 64  # 1000 elements: 16 chunks
        try:
            self.assertTrue(self.checks.passes(taken, ref, self.shapes, "w"))
            wrong = np.array(taken[1])
            wrong[999] += 1.0  # in the last chunk only
            self.assertFalse(self.checks.passes([taken[0], self.mx.array(wrong)], ref,
                                                self.shapes, "w"))
        finally:
            checks.CHUNK = saved

    def test_a_subclass_of_mlx_array_is_left_to_the_host(self):
        mx = self.mx

        class Agrees(mx.array):  # arithmetic that would make any output look right
            def __sub__(self, other):
                return mx.zeros_like(other)

            def astype(self, dtype):
                return self

        taken, ref = self.pair(dy=0.5)
        self.assertIsNone(self.checks.passes([Agrees(taken[0]), taken[1]], ref, self.shapes, "w"))

    def test_a_result_the_device_cannot_test_is_left_to_the_host(self):
        taken, ref = self.pair()
        self.assertIsNone(self.checks.passes(taken, (np.array(ref[0]), ref[1]), self.shapes, "w"))
        short = self.mx.zeros((999,), dtype=self.mx.float32)
        self.assertIsNone(self.checks.passes(taken, (ref[0], short), self.shapes, "w"))
        self.assertIsNone(self.checks.passes([taken[0], short], ref, self.shapes, "w"))

    def test_a_numpy_reference_or_a_float64_output_keeps_the_host_way(self):
        from ksearch_harness.backends.mlx.memory import MlxMemory
        from ksearch_harness.definition import Spec
        host_ref = MlxMemory(self.mx, self.spec, False, on_gpu=False)
        self.assertIsNone(host_ref.timing_checks(self.ctx))
        wide = dict(DEFINITION, outputs={"y": {"shape": ["N"], "dtype": "float64"}})
        spec = Spec(wide)
        mem = MlxMemory(self.mx, spec, True, on_gpu=False)
        self.assertIsNone(mem.timing_checks(_Ctx(spec, {"y": (1e-5, 1e-5, None)},
                                                 _Reference(spec))))

    def test_a_pool_written_by_a_call_is_caught_at_the_next(self):
        # The calls' inputs are copied from one device pool and checked against a second one
        # that no call sees: a kernel that wrote into the first (raw pointers) shows at the
        # next call. Here the write is stood for by replacing the first pool's array.
        from ksearch_harness import inputs as host
        from ksearch_harness.backends.mlx.memory import MlxMemory
        mx = self.mx
        mem = MlxMemory(mx, self.spec, True, on_gpu=True)
        n = 100
        pools = [np.linspace(0, 1, n + 40).astype(np.float16), np.ones(n + 40, np.float32)]
        sources = [host._Window(t, (n,), p, 40) for t, p in zip(self.spec.inputs, pools)]
        for s in sources:
            s.offsets = np.arange(0, 40, 4)
        feed = host.Feed(sources)
        mine = mem.feed_buffers(feed)
        values = mem.fill(feed, 0, mine)
        self.assertIsNone(mem.changed_input(self.spec, feed.expected(0), values))
        mine.pools[1].array = mx.zeros(n + 40, dtype=mx.float32)  # "written" during call 0
        values = mem.fill(feed, 1, mine)
        text = mem.changed_input(self.spec, feed.expected(1), values)
        self.assertIn("'w'", text or "")

    def test_bits_are_compared_exactly(self):
        from ksearch_harness.backends.mlx.memory import same_bits
        mx = self.mx
        a = mx.array(np.array([0.0, 1.5, np.nan], np.float32))
        self.assertTrue(same_bits(mx, a, mx.array(np.array([0.0, 1.5, np.nan], np.float32))))
        self.assertFalse(same_bits(mx, a, mx.array(np.array([-0.0, 1.5, np.nan], np.float32))))
        other_nan = np.array([0.0, 1.5, np.nan], np.float32)
        other_nan.view(np.uint32)[2] ^= 1  # another NaN payload
        self.assertFalse(same_bits(mx, a, mx.array(other_nan)))
        self.assertFalse(same_bits(mx, a, a[:2]))
        self.assertFalse(same_bits(mx, a, a.astype(mx.float16)))

    def test_pooled_inputs_are_compared_with_their_window_on_the_device(self):
        from ksearch_harness.backends.mlx.memory import _Buffers
        mx = self.mx
        pristine = [np.linspace(0, 1, 1000).astype(np.float16), np.ones(1000, np.float32)]
        mine = _Buffers([None, None])
        mine.windows = [mx.array(p) for p in pristine]
        mine[:] = [mx.array(p) for p in pristine]
        self.assertIsNone(self.mem.changed_input(self.spec, pristine, mine))
        # The window, not the host's copy, is what a pooled input is held to: with host
        # contents that differ (they never do in the harness) it still reads as unchanged.
        elsewhere = [np.zeros(1000, np.float16), np.zeros(1000, np.float32)]
        self.assertIsNone(self.mem.changed_input(self.spec, elsewhere, mine))
        changed = pristine[1].copy()
        changed[[3, 500]] = 2.0
        mine[1] = mx.array(changed)
        text = self.mem.changed_input(self.spec, pristine, mine)
        self.assertIn("'w'", text)
        self.assertIn("2 of 1000", text)


if __name__ == "__main__":
    unittest.main()
