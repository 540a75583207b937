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


def _address(array):
    return np.asarray(array).__array_interface__["data"][0]


if __name__ == "__main__":
    unittest.main()
