"""The timing feed of the backends that draw on their device (backends/common/device_feed.py),
held to inputs.py's rules from the outside: each pool's size (the extra counted in the device's
bytes per element, 2 for bfloat16), the offsets as drawn from SeedSequence([seed, i, trial])
after the NumPy draws that come before them, every call's window a view of its pool at its
offset, structured inputs drawn whole per call, and the uploads each backend makes.

The torch_gpu side runs on torch's CPU tensors (skipped, printing why, without torch); the mlx
side on MLX's CPU device with a memory set up as on a GPU (skipped without MLX).
"""

import copy
import math
import unittest
import unittest.mock

import numpy as np

from ksearch_harness import inputs as host
from ksearch_harness.definition import Spec
from ksearch_harness.inputs import InputMaker
from tests import gpu_support as g
from tests.mlx_support import requires_mlx

DEFINITION = {
    "name": "feed", "op_type": "t",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 48}, "T": {"type": "var"}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"},
               "b": {"shape": ["M", "N"], "dtype": "bfloat16"},
               "i": {"shape": ["M"], "dtype": "int32"},
               "indptr": {"shape": ["M"], "dtype": "int32"},
               "eps": {"shape": None, "dtype": "float32"},
               "s": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M"], "dtype": "float32"}},
    "reference": "def run(x, b, i, indptr, eps, s):\n    return x\n",
}
WORKLOAD = {"uuid": "w", "axes": {"M": 30, "T": 50},
            "inputs": {"eps": {"type": "scalar", "value": 0.25}}}
OVERRIDES = {"indptr": {"distribution": "offsets", "total": "T"}}
SEED, INDEX, TRIAL, CALLS = 11, 0, 3, 9
# Small enough that the pools' extra is capped, so that the bytes per element decide it.
POOL_EXTRA_BYTES = 256


def _spec():
    spec = Spec(DEFINITION)
    spec.require_numpy(bfloat16_as_float32=True)
    return spec


def _maker(spec):
    return InputMaker(spec, {"distributions": ["normal"],
                             "input_overrides": copy.deepcopy(OVERRIDES)}, SEED, None)


def _feed(maker, spec):
    with unittest.mock.patch.object(host, "POOL_EXTRA_BYTES", POOL_EXTRA_BYTES):
        return maker.feed(INDEX, WORKLOAD, TRIAL, spec.axes_for(WORKLOAD, INDEX), CALLS)


def _sources(feed):
    return {s.tensor.name: s for s in feed.sources}


class _Rules:
    """What both backends' feeds must hold to; `numpy_draws_first(maker, spec, rng)` takes
    from `rng` what the backend draws with NumPy before the offsets."""

    def check_pools_and_offsets(self, feed, maker, spec):
        sources = _sources(feed)
        self.assertEqual([type(s) for s in feed.sources],
                         [host._Window, host._Window, host._Window, host._Draws, host._Fixed,
                          host._Each])
        n = 30 * 48
        # The extra in the device's bytes per element: bfloat16 is 2 bytes there (4 on the
        # host, where it is held as float32), so its pool's extra is twice float32's.
        self.assertEqual(sources["x"].extra, max(CALLS, min(n, POOL_EXTRA_BYTES // 4)))
        self.assertEqual(sources["b"].extra, max(CALLS, min(n, POOL_EXTRA_BYTES // 2)))
        self.assertEqual(sources["b"].extra, 128)
        self.assertEqual(sources["i"].extra, max(CALLS, min(30, POOL_EXTRA_BYTES // 4)))
        for name in ("x", "b", "i"):
            w = sources[name]
            self.assertEqual(self.numel(w.pool), w.n + w.extra, name)
        # The offsets: NumPy's generator of SeedSequence([seed, i, trial]), after the draws
        # made with it before them, window by window in definition order.
        rng = np.random.default_rng(np.random.SeedSequence([SEED, INDEX, TRIAL]))
        self.numpy_draws_first(maker, spec, rng)
        for name in ("x", "b", "i"):
            w = sources[name]
            expected = host._offsets(rng, w.extra, CALLS, w.row)
            np.testing.assert_array_equal(np.asarray(w.offsets), expected, name)
            if w.row <= w.extra + 1:  # distinct modulo the row where the extra allows it
                self.assertEqual(len({int(o) % w.row for o in w.offsets}), CALLS, name)

    def check_calls(self, feed):
        sources = _sources(feed)
        names = [s.tensor.name for s in feed.sources]
        seen = set()
        for k in range(CALLS):
            call = dict(zip(names, feed.expected(k)))
            for name in ("x", "b", "i"):
                w = sources[name]
                o = int(w.offsets[k])
                self.assertEqual(tuple(call[name].shape), w.shape(), name)
                self.assertEqual(self.host_bytes(call[name]),
                                 self.host_bytes(w.pool[o:o + w.n]), (name, k))
            ip = self.host_array(call["indptr"])
            self.assertEqual((int(ip[0]), int(ip[-1])), (0, 50))
            self.assertTrue(bool((ip[1:] >= ip[:-1]).all()))
            self.assertEqual(float(call["eps"]), 0.25)
            seen.add(self.host_bytes(call["x"]))
        self.assertEqual(len(seen), CALLS)  # every call its own contents
        draws = {self.host_bytes(d) for d in sources["indptr"].draws}
        self.assertGreater(len(draws), 1)  # a draw per call, not one reused


class TorchFeed(_Rules, unittest.TestCase):
    def setUp(self):
        self.torch = g.torch_or_skip(self)
        self.spec = _spec()
        self.uploads = []

    def maker(self):
        t = self.torch

        def upload(array, tensor):
            self.uploads.append(tensor.name)
            return t.from_numpy(array.copy())

        m = _maker(self.spec)
        m.on_device(t, t.device("cpu"), upload)
        return m

    def numel(self, pool):
        return pool.numel()

    def host_array(self, x):
        return x.numpy()

    def host_bytes(self, x):
        x = x.contiguous()
        if x.dtype == self.torch.bfloat16:
            x = x.view(self.torch.int16)
        return x.numpy().tobytes()

    def numpy_draws_first(self, maker, spec, rng):
        # Only the random scalar is NumPy's: every array is drawn by torch.
        s = [t for t in spec.inputs if t.name == "s"][0]
        maker._random(rng, s, (CALLS,), TRIAL, spec.axes_for(WORKLOAD, INDEX), None)

    def test_pools_and_offsets(self):
        m = self.maker()
        self.check_pools_and_offsets(_feed(m, self.spec), m, self.spec)

    def test_calls_are_views_of_their_pools(self):
        feed = _feed(self.maker(), self.spec)
        self.check_calls(feed)
        for name in ("x", "b", "i"):
            w = _sources(feed)[name]
            for k in (0, CALLS - 1):
                window = w.expected(k)
                self.assertEqual(window.data_ptr(),
                                 w.pool.data_ptr() + int(w.offsets[k]) * w.pool.element_size())

    def test_pools_are_the_device_generators_draws_in_definition_order(self):
        from ksearch_harness.backends.torch_gpu.inputs import sample, torch_seed
        t = self.torch
        feed = _feed(self.maker(), self.spec)
        gen = t.Generator(device="cpu")
        gen.manual_seed(torch_seed([SEED, INDEX, TRIAL]))
        axes = self.spec.axes_for(WORKLOAD, INDEX)
        sources = _sources(feed)
        for tensor in self.spec.inputs[:3]:  # x, b, i: the first three draws of `gen`
            w = sources[tensor.name]
            drawn = sample(t, gen, "cpu", tensor, (w.n + w.extra,), None, "normal", axes,
                           f"correctness.input_overrides.{tensor.name}")
            self.assertEqual(self.host_bytes(w.pool), self.host_bytes(drawn), tensor.name)

    def test_reproducible_and_no_upload_for_random_inputs(self):
        a = _feed(self.maker(), self.spec)
        b = _feed(self.maker(), self.spec)
        self.assertEqual(self.uploads, [])  # random inputs are drawn on the device
        for sa, sb in zip(a.sources, b.sources):
            if isinstance(sa, host._Window):
                self.assertTrue(self.torch.equal(sa.pool, sb.pool), sa.tensor.name)
                np.testing.assert_array_equal(sa.offsets, sb.offsets)


@requires_mlx()
class MlxFeed(_Rules, unittest.TestCase):
    def setUp(self):
        import mlx.core as mx
        from ksearch_harness.backends.mlx.memory import MlxMemory
        self.mx = mx
        self.spec = _spec()
        # As on a GPU (MLX draws only there, and the timing pools live on the device); the
        # operations run on MLX's CPU device here.
        self.mem = MlxMemory(mx, self.spec, True, on_gpu=True)
        self.uploads = []
        real_upload = self.mem.upload

        def counting_upload(value, tensor):
            self.uploads.append(tensor.name)
            return real_upload(value, tensor)

        self.mem.upload = counting_upload

    def maker(self):
        m = _maker(self.spec)
        device = self.mem.device_inputs(m)
        self.assertIsNotNone(device)
        m.draw_with(device)
        return m

    def numel(self, pool):
        return math.prod(pool.shape)

    def host_array(self, x):
        return np.asarray(x)

    def host_bytes(self, x):
        mx = self.mx
        if isinstance(x, mx.array):
            if x.dtype == mx.bfloat16:
                x = x.view(mx.uint16)
            return np.array(x).tobytes()
        return np.ascontiguousarray(x).tobytes()

    def numpy_draws_first(self, maker, spec, rng):
        # In definition order: i's pool (MLX draws no integers), indptr's draws per call (a
        # structured input), then the random scalar.
        axes = spec.axes_for(WORKLOAD, INDEX)
        by_name = {t.name: t for t in spec.inputs}
        i = maker._random(rng, by_name["i"], (30 + max(CALLS, min(30, POOL_EXTRA_BYTES // 4)),),
                          TRIAL, axes, None)
        self.numpy_pool_of_i = i
        for _ in range(CALLS):
            maker._random(rng, by_name["indptr"], (30,), TRIAL, axes, maker.overrides["indptr"])
        maker._random(rng, by_name["s"], (CALLS,), TRIAL, axes, None)

    def test_pools_and_offsets(self):
        m = self.maker()
        feed = _feed(m, self.spec)
        self.check_pools_and_offsets(feed, m, self.spec)
        sources = _sources(feed)
        self.assertIsInstance(sources["x"].pool, self.mx.array)  # drawn by MLX
        self.assertIsInstance(sources["b"].pool, self.mx.array)
        # i's pool is NumPy's draw, uploaded.
        self.assertEqual(self.host_bytes(sources["i"].pool), self.numpy_pool_of_i.tobytes())

    def test_calls_are_windows_of_their_pools(self):
        self.check_calls(_feed(self.maker(), self.spec))

    def test_uploads(self):
        feed = _feed(self.maker(), self.spec)
        # The feed uploads only the pool MLX did not draw; structured draws and the scalars
        # stay on the host.
        self.assertEqual(self.uploads, ["i"])
        self.assertIsInstance(_sources(feed)["indptr"].draws[0], np.ndarray)
        self.uploads.clear()
        self.mem.feed_buffers(feed)
        self.mem.feed_buffers(feed, for_reference=True)
        # The memory's device pools, made once for both sides: a pool MLX drew is the pristine
        # one itself, with one device copy for the calls; NumPy's pool, now a device array too,
        # the same.
        self.assertEqual(sorted(self.uploads), ["b", "i", "x"])


if __name__ == "__main__":
    unittest.main()
