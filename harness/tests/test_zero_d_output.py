"""An output of shape [] (a loss, a sum: KernelBench's CrossEntropyLoss, GPU MODE's vectorsum)
is a 0-d array through the whole path: allocated, written by a C kernel through its pointer,
checked against the reference (which may return a NumPy scalar) and timed."""

import unittest

from tests.support import request, run

TOTAL = {
    "name": "total",
    "op_type": "reduction",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
    "outputs": {"total": {"shape": [], "dtype": "float32"}},
    "reference": (
        "import numpy as np\n"
        "def run(x):\n"
        "    return np.float32(np.sum(x, dtype=np.float64))\n"
    ),
}

TOTAL_C = r"""
#include <stdint.h>
void total(const float* x, float* total, int64_t M) {
    double s = 0.0;
    for (int64_t i = 0; i < M * 8; i++) s += x[i];
    total[0] = (float)s;
}
"""


class ZeroDimensionalOutput(unittest.TestCase):
    def test_a_sum_into_a_0d_output_passes_and_is_timed(self):
        result = run(request(TOTAL_C, definition=TOTAL, symbol="total"))
        self.assertEqual(result.statuses, ["passed", "passed", "passed"], result.stderr[-3000:])
        c = result.workloads[0]["correctness"]
        self.assertEqual(c["elements"], 3)  # one element per trial
        self.assertGreater(len(result.workloads[0]["timing"]["candidate_ns"]), 0)

    def test_a_wrong_sum_is_incorrect(self):
        wrong = TOTAL_C.replace("total[0] = (float)s;", "total[0] = (float)s + 1.0f;")
        result = run(request(wrong, definition=TOTAL, symbol="total"))
        self.assertEqual(result.statuses[0], "incorrect_numerical", result.stderr[-3000:])


if __name__ == "__main__":
    unittest.main()
