"""bench/mlx_cache_off.py, the timing probe's allocator experiment on MLX's CUDA backend: MLX's
buffer cache is turned off only once CUDA's pool has been told to keep its memory, never on
Metal or the CPU, and every way the driver call can fail is a note naming the step, not an
error. The driver itself is only on a GPU machine (bench/mlx_timing_probe.py measures the
effect there); here the driver library is a stand-in object, the loader's failures are real.
"""

import ctypes
import importlib.util
import os
import unittest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "mlx_cache_off.py")
_SPEC = importlib.util.spec_from_file_location("mlx_cache_off", _PATH)
allocator = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(allocator)


class RecordingMlx:
    def __init__(self):
        self.limits = []

    def set_cache_limit(self, limit):
        self.limits.append(limit)
        return 1 << 30

    def clear_cache(self):
        self.limits.append("cleared")


class FakeDriver:
    """libcuda's four calls, each returning the code given for it (0 is CUDA_SUCCESS)."""

    def __init__(self, **codes):
        self.codes = codes
        self.called = []

    def __getattr__(self, name):
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self.called.append(name)
            return self.codes.get(name, 0)
        return call


class Configure(unittest.TestCase):
    def test_cuda_turns_the_cache_off_once_the_pool_keeps_its_memory(self):
        mx = RecordingMlx()
        note = allocator.configure(mx, "cuda", True, retain=lambda: None)
        self.assertEqual(mx.limits, [0, "cleared"])
        self.assertIn("cache off", note)

    def test_a_pool_that_cannot_be_set_leaves_the_cache_on_and_says_why(self):
        mx = RecordingMlx()
        note = allocator.configure(mx, "cuda", True, retain=lambda: "cuInit returned CUDA error 100")
        self.assertEqual(mx.limits, [])
        self.assertIn("left on", note)
        self.assertIn("cuInit returned CUDA error 100", note)

    def test_metal_and_the_cpu_are_left_alone(self):
        for dialect, on_gpu in (("metal", True), (None, False), ("cuda", False)):
            mx = RecordingMlx()
            called = []
            note = allocator.configure(mx, dialect, on_gpu, retain=lambda: called.append(1))
            self.assertIsNone(note)
            self.assertEqual((mx.limits, called), ([], []))


class RetainDevicePool(unittest.TestCase):
    def test_a_missing_driver_library_is_named(self):
        def load(name):
            return ctypes.CDLL(f"/nonexistent/{name}")
        why = allocator.retain_device_pool(load=load)
        self.assertIn("CUDA driver library could not be loaded", why)

    def test_each_failing_step_is_named_with_its_code(self):
        for step in ("cuInit", "cuDeviceGet", "cuDeviceGetDefaultMemPool",
                     "cuMemPoolSetAttribute"):
            driver = FakeDriver(**{step: 999})
            why = allocator.retain_device_pool(load=lambda name, d=driver: d)
            self.assertEqual(why, f"{step} returned CUDA error 999")
            self.assertEqual(driver.called[-1], step)  # nothing after the failing step

    def test_all_steps_succeeding_is_done(self):
        driver = FakeDriver()
        self.assertIsNone(allocator.retain_device_pool(load=lambda name: driver))
        self.assertEqual(driver.called, ["cuInit", "cuDeviceGet", "cuDeviceGetDefaultMemPool",
                                         "cuMemPoolSetAttribute"])

    def test_a_driver_without_the_pool_calls_is_named(self):
        class Old:
            def cuInit(self, flags):
                return 0

            def cuDeviceGet(self, dev, index):
                return 0
        why = allocator.retain_device_pool(load=lambda name: Old())
        self.assertIn("cuDeviceGetDefaultMemPool could not be called", why)


if __name__ == "__main__":
    unittest.main()
