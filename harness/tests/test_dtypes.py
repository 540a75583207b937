"""bfloat16 bit patterns on the host (the GPU backends' representation), without torch."""

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


if __name__ == "__main__":
    unittest.main()
