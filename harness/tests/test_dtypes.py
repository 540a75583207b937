"""bfloat16 bit patterns on the host (the GPU backends' representation), and the GPU backends'
refusal of the dtypes they do not hold, both without torch."""

import types
import unittest

import numpy as np

from ksearch_harness import dtypes
from ksearch_harness.definition import Spec
from ksearch_harness.errors import TaskError


class Bfloat16Bits(unittest.TestCase):
    def test_round_to_nearest_even_and_special_values(self):
        x = np.array([1.0, 1.00390625, 1.005859375, 1.01171875, -2.5, 0.0, -0.0, np.inf,
                      -np.inf, 3.4e38, np.nan], np.float32)
        bits = dtypes.float32_to_bfloat16_bits(x)
        self.assertEqual([int(b) for b in bits[:10]],
                         [0x3F80, 0x3F80, 0x3F81, 0x3F82, 0xC020, 0x0000, 0x8000, 0x7F80,
                          0xFF80, 0x7F80])
        back = dtypes.bfloat16_bits_to_float32(bits)
        self.assertTrue(np.isnan(back[-1]))
        np.testing.assert_array_equal(back[:4], [1.0, 1.0, 1.0078125, 1.015625])

    def test_widening_is_exact_for_every_pattern(self):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        wide = dtypes.bfloat16_bits_to_float32(bits)
        finite = np.isfinite(wide)
        np.testing.assert_array_equal(dtypes.float32_to_bfloat16_bits(wide[finite]),
                                      bits[finite])

    def test_bfloat16_exists_only_where_the_backend_allows(self):
        definition = {"axes": {}, "inputs": {"x": {"shape": [4], "dtype": "bfloat16"}},
                      "outputs": {"y": {"shape": [4], "dtype": "bfloat16"}}}
        with self.assertRaises(TaskError):
            Spec(definition).require_numpy()
        spec = Spec(definition)
        spec.require_numpy(bfloat16_as_float32=True)
        self.assertEqual(spec.inputs[0].dtype, np.float32)


class GpuBackendsRefuseFp8AndFp4(unittest.TestCase):
    # GPU MODE's nvfp4 problems import with float4_e2m1 inputs; the GPU backends' refusal names
    # the dtypes they do hold. check_definition needs no torch: the dtype table decides.
    def test_the_refusal_names_the_dtypes_held(self):
        from ksearch_harness.backends.python import Backend as PythonBackend
        for dtype in ("float4_e2m1", "float8_e4m3"):
            spec = Spec({"axes": {"N": {"type": "var"}},
                         "inputs": {"a": {"shape": ["N"], "dtype": dtype}},
                         "outputs": {"y": {"shape": ["N"], "dtype": "float16"}}})
            with self.assertRaises(TaskError) as caught:
                PythonBackend().check_definition(spec)
            self.assertEqual(caught.exception.field, "definition.inputs.a.dtype")
            message = str(caught.exception)
            self.assertIn(f"dtype {dtype} is not supported by backend python ('a')", message)
            self.assertIn("float16, bfloat16", message)
            self.assertIn("fp8 and fp4 tensors are not built", message)
        spec = Spec({"axes": {"N": {"type": "var"}},
                     "inputs": {"a": {"shape": ["N"], "dtype": "bfloat16"}},
                     "outputs": {"y": {"shape": ["N"], "dtype": "float16"}}})
        backend = PythonBackend()
        backend.torch = types.SimpleNamespace(bfloat16="torch.bfloat16", float16="torch.float16")
        backend.check_definition(spec)  # held: no error


if __name__ == "__main__":
    unittest.main()
