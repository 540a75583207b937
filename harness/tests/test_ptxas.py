"""The ptxas -v parser, on output ptxas really wrote (tests/data, CUDA 13.5) and on the older
"Used" line layout (registers, smem, cmem banks; no barriers)."""

import os
import unittest

from ksearch_harness.backends.cuda import ptxas

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def read(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return f.read()


class RealOutput(unittest.TestCase):
    def test_hopper_cuda13_without_cmem(self):
        kernels = {k["name"]: k for k in ptxas.parse(read("ptxas_cuda13.5_sm_90a.txt"))}
        # The __noinline__ device function has properties but is not a kernel.
        self.assertEqual(sorted(kernels), ["_Z6stagedPKfPfl", "_Z7spilledPKfPf"])
        staged, spilled = kernels["_Z6stagedPKfPfl"], kernels["_Z7spilledPKfPf"]
        self.assertEqual(staged["arch"], "sm_90a")
        self.assertEqual(staged["shared_bytes"], 1024)  # __shared__ float tile[256]
        self.assertEqual(staged["barriers"], 1)
        self.assertEqual(staged["spill_store_bytes"], 0)
        self.assertIsNone(staged["constant_bytes"])  # CUDA 13 does not print cmem for sm_90a
        self.assertLessEqual(spilled["registers"], 32)  # -maxrregcount=32
        self.assertGreater(spilled["spill_store_bytes"], 0)
        self.assertGreater(spilled["spill_load_bytes"], spilled["spill_store_bytes"])
        self.assertEqual(spilled["shared_bytes"], 0)
        self.assertGreaterEqual(spilled["stack_frame_bytes"], spilled["spill_store_bytes"] // 2)

    def test_ampere_target_reports_constant_banks(self):
        kernels = {k["name"]: k for k in ptxas.parse(read("ptxas_cuda13.5_sm_80.txt"))}
        self.assertEqual(kernels["_Z6stagedPKfPfl"]["arch"], "sm_80")
        self.assertEqual(kernels["_Z6stagedPKfPfl"]["constant_bytes"], 376)
        self.assertEqual(kernels["_Z7spilledPKfPf"]["constant_bytes"], 368)
        self.assertEqual(kernels["_Z7spilledPKfPf"]["spill_store_bytes"], 3388)
        self.assertEqual(kernels["_Z7spilledPKfPf"]["spill_load_bytes"], 11472)
        self.assertEqual(kernels["_Z7spilledPKfPf"]["registers"], 32)


class OlderLayout(unittest.TestCase):
    LOG = """ptxas info    : 0 bytes gmem, 7464 bytes cmem[3]
ptxas info    : Compiling entry function 'ewald' for 'sm_35'
ptxas info    : Function properties for ewald
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 82 registers, 2176 bytes smem, 352 bytes cmem[0], 716 bytes cmem[2]
ptxas info    : Function properties for __internal_trig_reduction_slowpathd
    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas warning : Registers are spilled to local memory in function 'ewald'
ptxas info    : Compiling entry function 'plain' for 'sm_35'
ptxas info    : Function properties for plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 320 bytes cmem[0]
"""

    def test_every_field_of_the_older_used_line(self):
        ewald, plain = ptxas.parse(self.LOG)
        self.assertEqual(ewald, {"name": "ewald", "arch": "sm_35", "registers": 82,
                                 "spill_store_bytes": 4, "spill_load_bytes": 12,
                                 "stack_frame_bytes": 8, "shared_bytes": 2176,
                                 "constant_bytes": 352 + 716, "barriers": None})
        self.assertEqual((plain["registers"], plain["shared_bytes"], plain["constant_bytes"]),
                         (8, 0, 320))

    def test_no_kernels_in_other_output(self):
        self.assertEqual(ptxas.parse("k.cu(3): error: identifier \"x\" is undefined\n"), [])
        self.assertEqual(ptxas.parse(""), [])


if __name__ == "__main__":
    unittest.main()
