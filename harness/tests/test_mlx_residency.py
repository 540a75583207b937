"""The mlx backend's uploads on a GPU: a device-written copy of each input, bit for bit.

On MLX's CUDA backend an array made from NumPy sits in host-written unified memory and its
first reader pulls it to the GPU inside the timed call (backends/mlx/memory.py, "Residency");
uploads on a GPU therefore go through `device_copy`. It must not change a single bit: -0.0,
NaN payloads, infinities, integers at their limits, bools and bfloat16 come back as they went
in. Runs on MLX's CPU device too (the copy is an ordinary MLX operation there).
"""

import unittest
import unittest.mock

import numpy as np

from tests.mlx_support import requires_mlx


@requires_mlx()
class DeviceCopy(unittest.TestCase):
    def setUp(self):
        import mlx.core as mx

        from ksearch_harness.backends.mlx import memory as mlx_memory
        self.mx, self.mem = mx, mlx_memory

    def cases(self):
        payload = np.array([0x7FC01234, 0xFF800001], dtype=np.uint32).view(np.float32)
        return [
            np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 65504.0, 6e-8], dtype=np.float16),
            np.concatenate([np.array([-0.0, 1e-45, 3.0], dtype=np.float32), payload]),
            np.array([-2 ** 63, 2 ** 63 - 1, 0], dtype=np.int64),
            np.array([255, 0, 7], dtype=np.uint8),
            np.array([True, False, True], dtype=np.bool_),
            np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 12,
        ]

    def test_bits_unchanged(self):
        mx = self.mx
        for host in self.cases():
            with self.subTest(dtype=host.dtype.name):
                copy = self.mem.device_copy(mx, mx.array(host))
                mx.eval(copy)
                self.assertEqual(copy.dtype, mx.array(host).dtype)
                self.assertEqual(tuple(copy.shape), host.shape)
                self.assertEqual(np.array(copy).tobytes(), host.tobytes())

    def test_bfloat16_bits_unchanged(self):
        mx = self.mx
        b = mx.array(np.array([1.0, -0.0, np.inf, 3.140625], dtype=np.float32)).astype(mx.bfloat16)
        copy = self.mem.device_copy(mx, b)
        mx.eval(copy)
        self.assertEqual(copy.dtype, mx.bfloat16)
        self.assertEqual(np.array(copy.view(mx.uint16)).tobytes(),
                         np.array(b.view(mx.uint16)).tobytes())

    def test_scalars_and_empty_pass_through(self):
        mx = self.mx
        zero_d = mx.array(3, dtype=mx.int32)
        empty = mx.array(np.zeros((0, 4), dtype=np.float16))
        self.assertIs(self.mem.device_copy(mx, zero_d), zero_d)
        self.assertIs(self.mem.device_copy(mx, empty), empty)

    def test_upload_on_a_gpu_copies_exactly(self):
        # on_gpu=True takes the GPU path (the copy) even on MLX's CPU device: same bits, and a
        # different array from the one MLX made out of the host's memory.
        mx = self.mx

        class Tensor:
            dtype_name = "float16"

        mem = self.mem.MlxMemory(mx, spec=None, reference_on_device=True, on_gpu=True)
        host = self.cases()[0]
        up = mem.upload(host, Tensor())
        mx.eval(up)
        self.assertEqual(np.array(up).tobytes(), host.tobytes())
        off = self.mem.MlxMemory(mx, spec=None, reference_on_device=True, on_gpu=False)
        plain = off.upload(host, Tensor())
        self.assertEqual(np.array(plain).tobytes(), host.tobytes())

    def test_inputs_on_a_gpu_are_new_buffers_not_the_hosts_donated(self):
        # MLX hands an elementwise result the buffer of an operand nothing else holds; the host
        # array must still be held when its copy runs, or the "copy" is the host-written buffer
        # itself (managed memory on MLX's CUDA backend). Buffers compared by address (CPU MLX).
        mx = self.mx
        made = []
        real_copy = self.mem.device_copy

        def recording_copy(mx_, array):
            made.append(_address(array))  # the host array's buffer
            return real_copy(mx_, array)

        class Tensor:
            dtype_name = "float16"

        class Spec:
            inputs = [Tensor(), Tensor()]

        mem = self.mem.MlxMemory(mx, Spec(), reference_on_device=True, on_gpu=True)
        hosts = [np.random.default_rng(i).standard_normal(1 << 16).astype(np.float16)
                 for i in range(2)]
        with unittest.mock.patch.object(self.mem, "device_copy", recording_copy):
            arrays = mem.inputs(hosts)
        self.assertEqual(len(made), 2)
        for host, a in zip(hosts, arrays):
            self.assertEqual(np.array(a).tobytes(), host.tobytes())
            self.assertNotIn(_address(a), made)


@requires_mlx()
class DevicePools(unittest.TestCase):
    """On a GPU the timing feed's pools are uploaded once per workload and each call gets a
    device copy of its window (backends/mlx/memory.py, "Timing inputs on a GPU"); on MLX's CPU
    device with on_gpu=True the same path runs."""

    def setUp(self):
        import mlx.core as mx

        from ksearch_harness import inputs as host_inputs
        from ksearch_harness.backends.mlx import memory as mlx_memory
        self.mx, self.mem, self.host = mx, mlx_memory, host_inputs

    def feed(self):
        class Tensor:
            def __init__(self, name, dtype, scalar=False):
                self.name, self.dtype_name, self.dtype, self.is_scalar = name, dtype, np.dtype(
                    "float32" if dtype == "bfloat16" else dtype), scalar

        rng = np.random.default_rng(7)
        x = Tensor("x", "float16")
        w = self.host._Window(x, (4, 8), rng.standard_normal(32 + 21).astype(np.float16), 21)
        w.offsets = np.array([0, 5, 21, 13])
        b = Tensor("b", "bfloat16")
        wb = self.host._Window(b, (2, 3), rng.standard_normal(6 + 9).astype(np.float32), 9)
        wb.offsets = np.array([9, 1, 4, 0])
        table = self.host._Fixed(Tensor("table", "int32"), np.arange(12, dtype=np.int32).reshape(3, 4))
        scale = self.host._Fixed(Tensor("scale", "float32", scalar=True), 0.5)
        return self.host.Feed([w, wb, table, scale])

    def test_each_call_gets_its_window_from_pools_uploaded_once(self):
        mx = self.mx
        feed = self.feed()
        mem = self.mem.MlxMemory(mx, spec=None, reference_on_device=True, on_gpu=True)
        uploads = []
        real_upload = mem.upload

        def counting_upload(value, tensor):
            uploads.append(tensor.name)
            return real_upload(value, tensor)

        mem.upload = counting_upload
        mine = mem.feed_buffers(feed)
        theirs = mem.feed_buffers(feed, for_reference=True)
        # Two per pool, made once and shared by both sides: the one the calls copy from and the
        # pristine one their inputs are checked against.
        self.assertEqual(sorted(uploads), ["b", "b", "table", "table", "x", "x"],
                         "two uploads per pool, shared")
        seen = []
        for k in range(4):
            for buffers in (mine, theirs):
                values = mem.fill(feed, k, buffers)
                expected = feed.expected(k)
                self.assertEqual(np.array(values[0]).tobytes(), expected[0].tobytes())
                bf = np.array(values[1].astype(mx.float32))
                self.assertEqual(bf.tobytes(),
                                 np.array(mx.array(expected[1]).astype(mx.bfloat16)
                                          .astype(mx.float32)).tobytes())
                self.assertEqual(np.array(values[2]).tobytes(), expected[2].tobytes())
                self.assertEqual(values[3], 0.5)
                seen.append(_address(values[0]))
        self.assertEqual(sorted(uploads), ["b", "b", "table", "table", "x", "x"],
                         "no upload per call")
        # Each call's array is a new one written on the device, not the pool itself.
        pool = _address(mine.pools[0].array)
        self.assertNotIn(pool, seen)
        # A new feed (the next workload) gets its own pools.
        other = self.feed()
        mem.feed_buffers(other)
        self.assertEqual(len(uploads), 12)

    def test_without_a_gpu_calls_are_uploaded_per_call(self):
        mem = self.mem.MlxMemory(self.mx, spec=None, reference_on_device=True, on_gpu=False)
        feed = self.feed()
        buffers = mem.feed_buffers(feed)
        self.assertEqual(buffers, [None] * 4)
        values = mem.fill(feed, 2, buffers)
        self.assertEqual(np.array(values[0]).tobytes(), feed.expected(2)[0].tobytes())


def _address(array):
    return np.asarray(array).__array_interface__["data"][0]


if __name__ == "__main__":
    unittest.main()
