"""Backend cuda's import check (backends/imports.py): what the compiled objects call outside
themselves, whatever macros spelled it.

The rule tests need nothing; the build tests need nvcc (as test_cuda_build.py: skipped without
one, unless KSEARCH_REQUIRE_NVCC=1) and compile the GPU part of the adversarial suite
(tests/adversarial/cuda), whose hacks hide their names from the static checks, and every
built-in task's seed, which must not be refused.
"""

import glob
import os
import re
import tempfile
import unittest
from unittest import mock

from ksearch_harness.backends import cuda
from ksearch_harness.backends.cuda import imports
from ksearch_harness.errors import SetupError

from .test_cuda_build import require_nvcc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ADVERSARIAL = os.path.join(ROOT, "tests", "adversarial", "cuda")

# Imports seen in honest nvcc objects (launch stubs, registration, C++ runtime, allocation).
HONEST = ["cudaLaunchKernel", "__cudaPushCallConfiguration", "__cudaPopCallConfiguration",
          "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction",
          "__cudaUnregisterFatBinary", "atexit", "__cxa_atexit", "_Znwm", "_ZdlPvm", "memcpy",
          "memset", "malloc", "free", "cudaMalloc", "cudaFree", "cudaMemcpyAsync",
          "cudaFuncSetAttribute", "cudaGetDevice", "cudaDeviceGetAttribute",
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaGetLastError", "expf",
          "__stack_chk_fail", "__gxx_personality_v0", "_Unwind_Resume", "__gmon_start__",
          "cudaSetDevice", "timeline", "openmp_helper", "systematic", "clock_rate",
          "cudaGetDriverEntryPoint", "cuTensorMapEncodeTiled", "cuda_stream_helper"]


class Rules(unittest.TestCase):
    def test_honest_imports_pass(self):
        self.assertEqual(imports.violations(HONEST), [])

    def test_each_rule_refuses_its_calls_whatever_the_symbol_version(self):
        cases = {
            "dynamic lookup": ["dlsym", "dlopen@GLIBC_2.34", "dl_iterate_phdr", "_r_debug",
                               "getauxval"],
            "python": ["PyRun_SimpleString", "PyGILState_Ensure", "_PyEval_EvalFrameDefault"],
            "thread": ["pthread_create", "thrd_create",
                       "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_"
                       "deleteIS1_EEPFvvE", "timer_create"],
            "process": ["fork", "execve", "system", "popen", "posix_spawnp", "execv", "execveat",
                        "_Fork"],
            "files and network": ["fopen", "open64", "__open_2", "openat", "socket", "connect",
                                  "_ZNSt14basic_ifstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_"
                                  "Openmode", "truncate", "unlinkat", "memfd_create", "mkstemp",
                                  "tmpfile", "symlink"],
            "clock": ["clock_gettime", "nanosleep", "_ZNSt6chrono3_V212steady_clock3nowEv",
                      "clock_nanosleep", "getrusage"],
            "signals and process state": ["kill", "ptrace", "syscall", "sigaction", "sigset",
                                          "signalfd", "process_vm_writev"],
            "memory mapping": ["mprotect", "mmap64", "pkey_mprotect"],
            "environment": ["getenv", "environ"],
            "cuda streams": ["cudaStreamCreateWithFlags", "cudaLaunchHostFunc",
                             "cudaGraphLaunch", "cudaIpcOpenMemHandle", "cudaLaunchKernel_ptsz",
                             "cuStreamCreate", "cuLaunchHostFunc", "cuCtxCreate_v2",
                             "cuModuleLoadData", "cuGetProcAddress_v2"],
        }
        self.assertEqual(sorted(cases), sorted(name for name, _, _ in imports.RULES))
        for rule, symbols in cases.items():
            for symbol in symbols:
                found = imports.violations([symbol])
                self.assertEqual(len(found), 1, symbol)
                self.assertEqual(found[0][1], rule, symbol)
                self.assertEqual(found[0][0], symbol.split("@")[0])

    def test_the_description_names_each_symbol_and_its_source_once(self):
        text = imports.describe([
            ("a.cu", imports.violations(["dlsym", "dlopen", "memcpy"])),
            ("b.cu", imports.violations(["dlsym", "pthread_create"])),
        ])
        self.assertIn("dlsym (a.cu), dlopen (a.cu), dlsym (b.cu)", text)
        self.assertIn("pthread_create (b.cu)", text)
        self.assertIn("starts a host thread", text)
        self.assertEqual(text.count("looks up code at run time"), 1)

    def test_the_check_can_be_turned_off_and_is_on_by_default(self):
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("KSEARCH_IMPORT_CHECK", None)
            self.assertTrue(imports.enabled())
            os.environ["KSEARCH_IMPORT_CHECK"] = "off"
            self.assertFalse(imports.enabled())


def _entry(source):
    found = re.findall(r'extern "C"\s+void\s+(\w+)\s*\(', source)
    return found[0] if found else "missing"


class Builds(unittest.TestCase):
    def setUp(self):
        require_nvcc(self)
        self.tmp = tempfile.TemporaryDirectory(prefix="ksearch-imports-test-")
        self.addCleanup(self.tmp.cleanup)

    def build(self, path):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        candidate = {"language": "cuda", "sources": [{"path": "kernel.cu", "content": source}],
                     "entry_point": f"kernel.cu::{_entry(source)}",
                     "destination_passing_style": True, "build": {"arch": "sm_90a"}}
        workdir = tempfile.mkdtemp(dir=self.tmp.name)
        result = cuda.Backend().build(candidate, workdir, {"compile_timeout_s": 180})
        result["linked"] = os.path.exists(os.path.join(workdir, "build", "candidate.so"))
        return result

    def test_the_hidden_hacks_are_refused_naming_what_they_import(self):
        expected = {
            "reference_fallback.cu": ("dlsym (kernel.cu)", "looks up code at run time"),
            "host_thread.cu": ("_ZNSt6thread15_M_start_thread", "starts a host thread"),
            "side_stream.cu": ("cudaStreamCreateWithFlags (kernel.cu)",
                               "works outside the default stream"),
            "driver_stream.cu": ("cuStreamCreate (kernel.cu)", "works outside the default stream"),
            "raw_syscall.cu": ("the instruction syscall in", "makes a system call directly"),
        }
        for name, (symbol, why) in expected.items():
            with self.subTest(name):
                result = self.build(os.path.join(ADVERSARIAL, name))
                self.assertFalse(result["ok"])
                self.assertIn(symbol, result.get("refused", ""), result["log"])
                self.assertIn(why, result["refused"])
                self.assertFalse(result["linked"])  # refused before linking
                self.assertIn("refused before linking", result["log"])

    def test_a_system_call_behind_an_instruction_prefix_is_found(self):
        # objdump prints `data16 syscall` / `rex.W syscall` / `cs rdtsc`: still refused.
        source = ('#include <cstdint>\n__global__ void k(float* y) { y[0] = 1.0f; }\n'
                  'extern "C" void f(float* y) {\n  long r;\n'
                  '  __asm__ volatile(".byte 0x48, 0x0f, 0x05" : "=a"(r) : "a"(39L) : "rcx", "r11");\n'
                  '  __asm__ volatile(".byte 0x2e, 0x0f, 0x31" ::: "rax", "rdx");\n'
                  '  if (r > 0) k<<<1, 1>>>(y);\n}\n')
        path = os.path.join(self.tmp.name, "prefixed.cu")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        result = self.build(path)
        self.assertFalse(result["ok"])
        self.assertIn("syscall", result.get("refused", ""), result["log"])
        self.assertIn("rdtsc", result["refused"])

    def test_without_the_check_the_same_hack_builds(self):
        # The layer shown: what the check stops is a working library without it.
        with mock.patch.dict(os.environ, {"KSEARCH_IMPORT_CHECK": "off"}):
            result = self.build(os.path.join(ADVERSARIAL, "reference_fallback.cu"))
        self.assertTrue(result["ok"], result["log"])
        self.assertTrue(result["linked"])
        self.assertNotIn("refused", result)

    def test_kernels_that_compute_honestly_or_fail_at_run_time_are_not_refused(self):
        # Their hacks are caught by the runtime checks (bench/adversarial_gpu.sh), and the
        # built-in tasks' seeds are ordinary kernels: none imports anything refused.
        paths = [os.path.join(ADVERSARIAL, n) for n in
                 ("honest.cu", "pointer_cache.cu", "mutate_input.cu", "partial_write.cu",
                  "downcast.cu", "shape_cache.cu", "constant_output.cu", "infinite_loop.cu")]
        paths += sorted(glob.glob(os.path.join(ROOT, "tasks", "*", "seed.cu")))
        self.assertGreaterEqual(len(paths), 13)
        for path in paths:
            with self.subTest(os.path.relpath(path, ROOT)):
                result = self.build(path)
                self.assertTrue(result["ok"], result["log"])

    def test_the_driver_entry_point_for_tma_descriptors_is_allowed(self):
        # Hopper kernels encode TMA descriptors through it (CUTLASS does): not refused.
        source = ('#include <cuda.h>\n#include <cuda_runtime.h>\n'
                  'extern "C" void f(float* y) {\n  void* fn = nullptr;\n'
                  '  cudaDriverEntryPointQueryResult q;\n'
                  '  cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q);\n}\n')
        path = os.path.join(self.tmp.name, "tma.cu")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        result = self.build(path)
        self.assertTrue(result["ok"], result["log"])
        self.assertEqual(result["import_check"], "on")

    def test_the_record_says_when_the_check_was_off(self):
        with mock.patch.dict(os.environ, {"KSEARCH_IMPORT_CHECK": "off"}):
            result = self.build(os.path.join(ADVERSARIAL, "honest.cu"))
        self.assertEqual(result["import_check"], "off")

    def test_without_the_check_the_driver_stream_still_does_not_link(self):
        # -z defs: the driver library is not on the link line, so the symbol stays unresolved.
        with mock.patch.dict(os.environ, {"KSEARCH_IMPORT_CHECK": "off"}):
            result = self.build(os.path.join(ADVERSARIAL, "driver_stream.cu"))
        self.assertFalse(result["ok"])
        self.assertNotIn("refused", result)
        self.assertIn("cuStreamCreate", result["log"])

    def test_a_missing_nm_is_a_setup_error_naming_it(self):
        with mock.patch.dict(os.environ, {"KSEARCH_NM": "/nonexistent/nm"}):
            with self.assertRaises(SetupError) as caught:
                self.build(os.path.join(ADVERSARIAL, "honest.cu"))
        self.assertIn("/nonexistent/nm", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
