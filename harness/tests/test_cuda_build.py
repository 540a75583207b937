"""Backend cuda's build stage with a real nvcc, no GPU needed: the command, the resource report
from ptxas, compile errors with their log, the build cache, and the source checks.

nvcc comes from CUDA_HOME, PATH or the pip package nvidia-cuda-nvcc (.ci/run installs it).
Without one these tests skip, printing why, unless KSEARCH_REQUIRE_NVCC=1 makes that a failure.
"""

import ctypes
import os
import sys
import tempfile
import unittest

from ksearch_harness.backends import cuda
from ksearch_harness.backends.cuda import nvcc
from ksearch_harness.backends.torch_gpu import device as gpu
from ksearch_harness.errors import SetupError

KERNEL = r"""
#include <cstdint>
__global__ void scale_rows(const float* x, float* y, int64_t n) {
    __shared__ float tile[256];
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = 2.0f * tile[threadIdx.x];
}
extern "C" void scale(const float* x, float* y, int64_t n) {
    scale_rows<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}
"""
HEADER = "#pragma once\n#define FACTOR 2.0f\n"


def require_nvcc(test):
    found = nvcc.find()
    if found is None:
        reason = ("nvcc not found (pip install nvidia-cuda-nvcc nvidia-cuda-runtime "
                  "nvidia-cuda-cccl, or set CUDA_HOME)")
        if os.environ.get("KSEARCH_REQUIRE_NVCC") == "1":
            test.fail(f"KSEARCH_REQUIRE_NVCC=1 but {reason}")
        print(f"skipping {test.id()}: {reason}", file=sys.stderr)
        test.skipTest(reason)
    return found


HOPPER_ONLY = r"""
#include <cuda_runtime.h>
__global__ void hopper_only(float *x) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    x[threadIdx.x] = 1.0f;
}
extern "C" void fence(float *x) { hopper_only<<<1, 128>>>(x); }
"""


def candidate(source=KERNEL, entry="kernel.cu::scale", extra=(), cache_dir=None, more=()):
    return {"language": "cuda", "sources": [{"path": "kernel.cu", "content": source}, *more],
            "entry_point": entry, "destination_passing_style": True,
            "build": {"extra_flags": list(extra), "arch": "sm_90a", "cache_dir": cache_dir}}


class Build(unittest.TestCase):
    def setUp(self):
        require_nvcc(self)
        self.tmp = tempfile.TemporaryDirectory(prefix="ksearch-cuda-test-")
        self.addCleanup(self.tmp.cleanup)
        self.count = 0

    def build(self, cand, limits=None):
        self.count += 1
        workdir = os.path.join(self.tmp.name, f"w{self.count}")
        os.makedirs(workdir)
        backend = cuda.Backend()
        result = backend.build(cand, workdir, limits or {"compile_timeout_s": 120})
        return backend, result

    def test_compiles_for_the_arch_with_a_resource_report(self):
        backend, result = self.build(candidate(more=[{"path": "factor.h", "content": HEADER}]))
        self.assertTrue(result["ok"], result["log"])
        command = result["command"]
        self.assertIn("arch=compute_90a,code=[sm_90a,compute_90a]", command)
        self.assertNotIn("-arch=sm_90a", command)
        for flag in ("-O3", "-shared", "-lineinfo"):
            self.assertIn(flag, command)
        # One compile per .cu (the header is not compiled), the imports checked, then one link.
        compile_, link = command[:command.index("&&")], command[command.index("&&") + 1:]
        self.assertEqual(compile_[-4:], ["-c", "-o", "../objects/0.o", "kernel.cu"])
        self.assertEqual(link[-3:], ["-o", "candidate.so", "../objects/0.o"])
        self.assertNotIn("factor.h", command)
        self.assertEqual(result["arch"], "sm_90a")
        self.assertFalse(result["cached"])
        (kernel,) = result["resources"]
        self.assertIn("scale_rows", kernel["name"])
        self.assertEqual(kernel["arch"], "sm_90a")
        self.assertGreater(kernel["registers"], 0)
        self.assertEqual(kernel["shared_bytes"], 1024)
        self.assertEqual(kernel["spill_store_bytes"], 0)
        self.assertIn("release", backend.compiler)
        self.assertIn("Compiling entry function", result["log"])  # ptxas -v is in the log

    def test_hopper_only_instructions_build_for_sm_90a(self):
        # wgmma and setmaxnreg exist only in the arch-specific target: with `-arch=sm_90a` nvcc
        # also made portable compute_90 PTX, and ptxas refused them there ("not supported on
        # .target 'sm_90'"), so no wgmma kernel could be built.
        result = self.build(candidate(source=HOPPER_ONLY, entry="kernel.cu::fence"))[1]
        self.assertTrue(result["ok"], result["log"])
        self.assertNotIn("compute_90.ptx", result["log"])

    def test_the_library_exports_the_extern_c_entry(self):
        backend, result = self.build(candidate())
        self.assertTrue(result["ok"], result["log"])
        library = ctypes.CDLL(os.path.abspath(backend._library))  # no CUDA call is made
        self.assertTrue(hasattr(library, "scale"))

    def test_spills_forced_by_a_register_cap_are_reported(self):
        source = KERNEL + r"""
__global__ void __launch_bounds__(1024, 2) heavy(const float* x, float* y) {
    float a[64];
#pragma unroll
    for (int i = 0; i < 64; i++) a[i] = x[threadIdx.x * 64 + i];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 64; i++) for (int j = 0; j < 64; j++) s += a[i] * a[(j * 7 + i) % 64];
#pragma unroll
    for (int i = 0; i < 64; i++) y[threadIdx.x * 64 + i] = a[i] * s;
}
"""
        _, result = self.build(candidate(source, extra=["-maxrregcount=32"]))
        self.assertTrue(result["ok"], result["log"])
        heavy = next(k for k in result["resources"] if "heavy" in k["name"])
        self.assertLessEqual(heavy["registers"], 32)
        self.assertGreater(heavy["spill_store_bytes"], 0)
        self.assertIn("-maxrregcount=32", result["command"])

    def test_a_compile_error_is_reported_with_the_compiler_log(self):
        broken = KERNEL.replace("tile[threadIdx.x] = i", "tile[threadIdx.x] = undefined_name + i")
        backend, result = self.build(candidate(broken))
        self.assertFalse(result["ok"])
        self.assertIn("undefined_name", result["log"])
        self.assertIn("kernel.cu", result["log"])
        self.assertIn("exited with status", result["log"])
        self.assertEqual(result["resources"], [])
        self.assertIsNone(backend._library)

    def test_the_cache_returns_the_same_build_and_report(self):
        cache = os.path.join(self.tmp.name, "cache")
        _, first = self.build(candidate(cache_dir=cache))
        _, second = self.build(candidate(cache_dir=cache))
        self.assertTrue(first["ok"] and second["ok"])
        self.assertFalse(first["cached"])
        self.assertTrue(second["cached"])
        self.assertEqual(second["resources"], first["resources"])
        self.assertEqual(second["log"], first["log"])
        # Another arch or other flags are another build.
        other = candidate(cache_dir=cache, extra=["-DUNUSED=1"])
        self.assertFalse(self.build(other)[1]["cached"])

    def test_a_damaged_cache_entry_is_rebuilt_not_loaded(self):
        cache = os.path.join(self.tmp.name, "cache")
        self.build(candidate(cache_dir=cache))
        (entry,) = [os.path.join(d, e) for d, _, files in os.walk(cache) for e in files
                    if e == "candidate.so"]
        with open(entry, "r+b") as f:
            f.write(b"\0" * 64)
        backend, result = self.build(candidate(cache_dir=cache))
        self.assertTrue(result["ok"], result["log"])
        self.assertFalse(result["cached"])

    def test_failed_builds_are_not_cached(self):
        cache = os.path.join(self.tmp.name, "cache")
        broken = KERNEL.replace("2.0f *", "2.0f * nope *")
        self.assertFalse(self.build(candidate(broken, cache_dir=cache))[1]["ok"])
        again = self.build(candidate(broken, cache_dir=cache))[1]
        self.assertFalse(again["ok"])
        self.assertIn("nope", again["log"])

    def test_a_missing_nvcc_is_a_setup_error_naming_it(self):
        old = os.environ.get("KSEARCH_NVCC")
        os.environ["KSEARCH_NVCC"] = "/nonexistent/nvcc"
        try:
            with self.assertRaises(SetupError) as caught:
                self.build(candidate())
        finally:
            if old is None:
                del os.environ["KSEARCH_NVCC"]
            else:
                os.environ["KSEARCH_NVCC"] = old
        self.assertIn("/nonexistent/nvcc", caught.exception.message)


class Refusals(unittest.TestCase):
    """Checked before nvcc runs, so these need no compiler."""

    def refused(self, cand):
        with tempfile.TemporaryDirectory() as workdir:
            result = cuda.Backend().build(cand, workdir, {})
        self.assertFalse(result["ok"])
        self.assertEqual(result["command"], [])
        return result["log"]

    def test_bad_paths_entries_and_languages(self):
        self.assertIn("is rejected", self.refused(
            {**candidate(), "sources": [{"path": "../k.cu", "content": KERNEL}]}))
        self.assertIn("no .cu source", self.refused(
            {**candidate(), "sources": [{"path": "k.cuh", "content": KERNEL}],
             "entry_point": "k.cuh::scale"}))
        self.assertIn("not among the sources", self.refused(candidate(entry="other.cu::scale")))
        self.assertIn("extern \"C\"", self.refused(candidate(entry="kernel.cu::not-a-name")))
        self.assertIn("language 'c'", self.refused({**candidate(), "language": "c"}))


class Arch(unittest.TestCase):
    def test_arch_specific_targets_where_the_newest_instructions_need_them(self):
        cases = {(8, 0): "sm_80", (8, 9): "sm_89", (9, 0): "sm_90a", (10, 0): "sm_100a",
                 (10, 3): "sm_103a", (12, 0): "sm_120a", (7, 5): "sm_75"}
        for (major, minor), arch in cases.items():
            self.assertEqual(gpu.arch_of(major, minor), arch)


if __name__ == "__main__":
    unittest.main()
