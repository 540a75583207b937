"""The CPU an evaluation ran on (cpu_info.py), as backend c records it in `done`, and the C
backend's arithmetic: FMA contraction is on."""

import os
import platform
import tempfile
import unittest

from ksearch_harness.backends.c import cpu_info
from tests.support import request, run

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

NEOVERSE = (
    "processor\t: 0\nBogoMIPS\t: 2100.00\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
    "jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs "
    "paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd40\n\n"
)

M2_MAX = (
    "hw.perflevel0.l1dcachesize: 131072\nhw.perflevel0.l2cachesize: 16777216\n"
    "hw.perflevel0.cpusperl2: 4\nhw.l1dcachesize: 65536\nhw.cachelinesize: 128\n"
    "hw.logicalcpu: 12\nhw.optional.neon: 1\nhw.optional.arm.FEAT_FP16: 1\n"
    "hw.optional.arm.FEAT_BF16: 1\nhw.optional.arm.FEAT_SME: 0\n"
    "machdep.cpu.brand_string: Apple M2 Max\n"
)


class Parsing(unittest.TestCase):
    def test_the_recorded_epyc(self):
        with open(os.path.join(DATA, "cpuinfo-epyc-zen4.txt"), encoding="utf-8") as f:
            info = cpu_info.parse_cpuinfo(f.read())
        self.assertEqual((info["name"], info["vendor"], info["processors"]), ("AMD EPYC", "amd", 2))
        self.assertEqual(cpu_info.vector_bits(info["flags"]), 512)
        present = [f for f in cpu_info.NOTABLE if f in info["flags"]]
        self.assertEqual(present, ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq",
                                   "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
                                   "avx512_vnni", "avx512_bf16"])

    def test_arm_and_macos(self):
        info = cpu_info.parse_cpuinfo(NEOVERSE)
        self.assertEqual(info["name"], "Arm CPU (implementer 0x41, part 0xd40)")
        self.assertEqual(info["vendor"], "arm")
        self.assertEqual(cpu_info.vector_bits(info["flags"]), 128)
        self.assertEqual(cpu_info.vector_bits(info["flags"], sve_bits=256), 256)
        mac = cpu_info.parse_sysctl(M2_MAX)
        self.assertEqual((mac["name"], mac["vendor"], mac["processors"]), ("Apple M2 Max", "apple", 12))
        self.assertEqual(mac["flags"], {"asimd", "asimdhp", "bf16"})
        self.assertEqual(mac["caches"]["l1d_kb"], 128)
        self.assertEqual((mac["caches"]["l2_kb"], mac["caches"]["l2_shared_by"]), (16384, 4))
        self.assertEqual(mac["caches"]["line_bytes"], 128)
        self.assertIsNone(cpu_info.vector_bits(set()))

    def test_caches_from_sysfs(self):
        with tempfile.TemporaryDirectory() as root:
            for i, (level, kind, size, shared) in enumerate([
                    ("1", "Data", "48K", "0-1"), ("1", "Instruction", "32K", "0-1"),
                    ("2", "Unified", "2048K", "0-1"), ("3", "Unified", "105M", "0-55,112-167")]):
                folder = os.path.join(root, f"index{i}")
                os.makedirs(folder)
                for name, text in (("level", level), ("type", kind), ("size", size),
                                   ("shared_cpu_list", shared), ("coherency_line_size", "64")):
                    with open(os.path.join(folder, name), "w", encoding="ascii") as f:
                        f.write(text + "\n")
            caches = cpu_info.read_caches(root)
        self.assertEqual(caches, {"l1d_kb": 48, "l2_kb": 2048, "l2_shared_by": 2,
                                  "l3_kb": 105 * 1024, "l3_shared_by": 112, "line_bytes": 64})
        self.assertEqual(cpu_info.read_caches("/nonexistent")["l1d_kb"], None)


@unittest.skipUnless(platform.system() == "Linux", "reads /proc/cpuinfo")
class ThisMachine(unittest.TestCase):
    def test_describe(self):
        d = cpu_info.describe()
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            words = set(f.read().split())
        self.assertEqual(d["kind"], "cpu")
        self.assertTrue(d["isa"], d)
        self.assertEqual(d["vector_bits"] == 512, "avx512f" in words, d)
        self.assertGreaterEqual(d["cores"], 1)
        self.assertGreaterEqual(d["caches"]["l1d_kb"], 8, d)

    def test_the_done_event_records_it(self):
        result = run(request())
        device = result.of("done")[0]["environment"]["device"]
        self.assertEqual(device["kind"], "cpu")
        self.assertEqual(device["isa"], cpu_info.describe()["isa"])
        self.assertIn("vector_bits", device)
        self.assertIn("l1d_kb", device["caches"])


# y = a * b + c. The reference is the fused result: the product is exact in float64 (24 + 24
# bits), so rounding a * b + c once to float32 is what one FMA does (bar a double rounding once
# in ~2^29 elements). An unfused multiply and add rounds the product first and misses it on a
# good share of elements, so with a zero tolerance only a contracted build passes.
FMA_DEFINITION = {
    "name": "fma_rows", "op_type": "elementwise",
    "axes": {"N": {"type": "var"}},
    "inputs": {"a": {"shape": ["N"], "dtype": "float32"}, "b": {"shape": ["N"], "dtype": "float32"},
               "c": {"shape": ["N"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
    "reference": (
        "import numpy as np\n"
        "def run(a, b, c):\n"
        "    f = np.float64\n"
        "    return (a.astype(f) * b.astype(f) + c.astype(f)).astype(np.float32)\n"
    ),
}
FMA_C = r"""
#include <stdint.h>
void fma_rows(const float *restrict a, const float *restrict b, const float *restrict c,
              float *restrict y, int64_t N) {
    for (int64_t i = 0; i < N; i++) y[i] = a[i] * b[i] + c[i];
}
"""


@unittest.skipUnless(platform.system() == "Linux", "reads /proc/cpuinfo for FMA")
class Contraction(unittest.TestCase):
    def test_a_multiply_add_is_fused(self):
        flags = cpu_info.parse_cpuinfo(open("/proc/cpuinfo", encoding="utf-8").read())["flags"]
        if not flags & {"fma", "asimd"}:
            self.skipTest("this CPU has no fused multiply-add")
        req = request(FMA_C, definition=FMA_DEFINITION, symbol="fma_rows",
                      workloads=[{"uuid": "w0", "axes": {"N": 4099}}])
        req["correctness"]["tolerance"] = {"float32": {"atol": 0.0, "rtol": 0.0}}
        result = run(req)
        self.assertEqual(result.statuses, ["passed"], result.workloads)
        (compile_event,) = result.of("compile")
        self.assertIn("-ffp-contract=fast", compile_event["command"])


if __name__ == "__main__":
    unittest.main()
