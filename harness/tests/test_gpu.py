"""The GPU backends end to end on a CUDA device: cuda, triton and python candidates, event
timing with its host cross-check, L2 flush, CUDA graphs, bfloat16, device errors and
compute-sanitizer. Skipped (printing why) without torch and a CUDA device, or without nvcc for
the cuda backend; KSEARCH_REQUIRE_GPU=1 turns the skips into failures."""

import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest

from ksearch_harness.backends.cuda import nvcc
from tests import gpu_support as g
from tests.support import HARNESS_DIR, Run, run


def gpu_run(req):
    return run(req, timeout=600)


def reasons(result):
    """What a failed assertion shows: every workload's reason and the log's tail."""
    return "; ".join(f"{w['uuid']}: {w.get('reason')}" for w in result.workloads) + \
        "\n" + result.stderr[-2000:]


class CudaBackend(unittest.TestCase):
    def setUp(self):
        self.torch = g.torch_or_skip(self, cuda=True)
        if nvcc.find() is None:
            self.skipTest("no nvcc")

    def test_a_correct_kernel_passes_with_events_host_times_and_resources(self):
        result = gpu_run(g.gpu_request("cuda", g.cuda_softmax()))
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        (compile_event,) = result.of("compile")
        names = [k["name"] for k in compile_event["resources"]]
        self.assertTrue(any("softmax_rows" in n for n in names), names)
        self.assertTrue(compile_event["arch"].startswith("sm_"))
        timing = result.workloads[0]["timing"]
        self.assertEqual(timing["clock"], "cuda_event")
        self.assertEqual(len(timing["candidate_ns"]), len(timing["candidate_host_ns"]))
        self.assertEqual(len(timing["reference_ns"]), len(timing["reference_host_ns"]))
        self.assertGreaterEqual(len(timing["candidate_ns"]), 3)
        self.assertFalse(timing["cuda_graph"])
        l2 = self.torch.cuda.get_device_properties(0).L2_cache_size
        self.assertGreaterEqual(timing["l2_flush_bytes"], 2 * l2)
        # The host clock spans the events plus launch and synchronise.
        self.assertLess(statistics.median(timing["candidate_ns"]),
                        statistics.median(timing["candidate_host_ns"]))
        device = result.events[-1]["environment"]["device"]
        self.assertEqual(device["name"], self.torch.cuda.get_device_name(0))
        self.assertIsNotNone(device["cuda_runtime"])

    def test_unwritten_and_mutated_arrays_are_caught(self):
        result = gpu_run(g.gpu_request("cuda", g.cuda_softmax(cut="- 1")))
        self.assertEqual(result.statuses[0], "incorrect_numerical")
        self.assertIn("NaN poison", result.workloads[0]["reason"])
        mutate = "if (threadIdx.x == 0) ((float*)row)[0] = 0.0f;"
        result = gpu_run(g.gpu_request("cuda", g.cuda_softmax(extra=mutate)))
        self.assertEqual(result.statuses[0], "incorrect_numerical")
        self.assertIn("modified its input 'x'", result.workloads[0]["reason"])

    def test_an_illegal_address_fails_the_workload_and_stops_the_rest(self):
        prelude = "__global__ void poke(float* p) { p[threadIdx.x] = 1.0f; }"
        launch = g.LAUNCH + " poke<<<1, 1>>>((float*)0x10);"
        result = gpu_run(g.gpu_request("cuda", g.cuda_softmax(prelude=prelude, launch=launch)))
        self.assertEqual(result.statuses, ["runtime_error", "runtime_error"], reasons(result))
        self.assertIn("illegal", result.workloads[0]["reason"].lower())
        self.assertIn("not run", result.workloads[1]["reason"])
        self.assertEqual(result.events[-1]["event"], "done")

    def test_work_on_another_stream_shows_as_host_time_far_above_event_time(self):
        prelude = ("__global__ void spin(long long cycles) {\n"
                   "    long long t0 = clock64(); while (clock64() - t0 < cycles) {}\n}\n"
                   "static cudaStream_t side = nullptr;")
        launch = ("if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);\n"
                  "softmax_rows<<<(unsigned)M, 256, 0, side>>>(x, y, N);\n"
                  "spin<<<1, 1, 0, side>>>(2000000);")
        req = g.gpu_request("cuda", g.cuda_softmax(prelude=prelude, launch=launch))
        # The import check refuses the side stream before anything is linked ...
        refused = gpu_run(req)
        self.assertEqual(refused.statuses, [], reasons(refused))
        (compile_event,) = refused.of("compile")
        self.assertFalse(compile_event["ok"])
        self.assertIn("cudaStreamCreateWithFlags", compile_event.get("refused", ""), compile_event)
        # ... and without it, the runtime cross-check of the two clocks still shows the work.
        result = run(req, env={"KSEARCH_IMPORT_CHECK": "off"}, timeout=600)
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        timing = result.workloads[0]["timing"]
        self.assertLess(5 * statistics.median(timing["candidate_ns"]),
                        statistics.median(timing["candidate_host_ns"]))

    def test_bfloat16_in_and_out(self):
        definition = {
            "name": "scale_bf16", "op_type": "elementwise",
            "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N"], "dtype": "bfloat16"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "bfloat16"}},
            "reference": ("import torch\n"
                          "def run(x):\n"
                          "    return (x.float() * 2 + 1).to(torch.bfloat16)\n"),
        }
        source = (
            "#include <cstdint>\n#include <cuda_bf16.h>\n"
            "__global__ void k(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n) {\n"
            "    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n"
            "    if (i < n) y[i] = __float2bfloat16(__bfloat162float(x[i]) * 2.0f + 1.0f);\n}\n"
            "extern \"C\" void scale(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n) {\n"
            "    k<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);\n}\n")
        workloads = [{"uuid": "b0", "axes": {"N": 5000}}]
        req = g.gpu_request("cuda", source, entry="scale", definition=definition,
                            workloads=workloads)
        req["correctness"]["tolerance"] = {"bfloat16": {"atol": 1e-2, "rtol": 1e-2}}
        result = gpu_run(req)
        self.assertEqual(result.statuses, ["passed"], reasons(result))
        self.assertEqual(result.workloads[0]["correctness"]["max_abs_error"], 0.0)
        # Dropping the + 1 is caught in bfloat16 too.
        wrong = source.replace("__float2bfloat16(__bfloat162float(x[i]) * 2.0f + 1.0f)",
                               "__float2bfloat16(__bfloat162float(x[i]) * 2.0f)")
        req = g.gpu_request("cuda", wrong, entry="scale", definition=definition,
                            workloads=workloads)
        req["correctness"]["tolerance"] = {"bfloat16": {"atol": 1e-2, "rtol": 1e-2}}
        self.assertEqual(gpu_run(req).statuses, ["incorrect_numerical"])

    def test_a_numpy_reference_runs_on_the_host(self):
        definition = copy.deepcopy(g.SOFTMAX)
        definition["reference"] = ("import numpy as np\n"
                                   "def run(x):\n"
                                   "    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))\n"
                                   "    return (e / e.sum(-1, keepdims=True)).astype(np.float32)\n")
        req = g.gpu_request("cuda", g.cuda_softmax(), definition=definition)
        req["timing"]["cuda_graph"] = True
        result = gpu_run(req)
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        self.assertFalse(result.workloads[0]["timing"]["cuda_graph"])
        self.assertIn("legacy default stream", result.workloads[0]["timing"]["cuda_graph_note"])


class TorchCandidates(unittest.TestCase):
    def setUp(self):
        g.torch_or_skip(self, cuda=True)

    def test_triton_kernel_passes(self):
        result = gpu_run(g.gpu_request("triton", g.SOFTMAX_TRITON, calling="dps"))
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        self.assertEqual(result.workloads[0]["timing"]["clock"], "cuda_event")
        self.assertIsNotNone(result.events[-1]["environment"]["device"]["triton"])

    def test_tiny_kernels_gated_need_no_cuda_graphs(self):
        # With the timing gate (gpu_gate.py) a Python launch no longer lies inside the events,
        # so "auto" captures no graphs; a plain gated call of a tiny kernel reads what its graph
        # replay reads (before the gate, replays took 9 us against 22 us for plain calls on the
        # H200: bench/results/graph-replay.md).
        workloads = [{"uuid": "tiny", "axes": {"M": 4, "N": 64}},
                     {"uuid": "large", "axes": {"M": 4096, "N": 4096}}]
        req = g.gpu_request("triton", g.SOFTMAX_TRITON, calling="dps", workloads=workloads)
        req["timing"]["cuda_graph"] = "auto"
        result = gpu_run(req)
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        tiny, large = (w["timing"] for w in result.workloads)
        for timing in (tiny, large):
            self.assertFalse(timing["cuda_graph"])
            self.assertIn("gate", timing["cuda_graph_note"])
            self.assertEqual(timing["gate"]["candidate"], "gated")
        req["timing"]["cuda_graph"] = True
        replayed = gpu_run(req).workloads[0]["timing"]
        self.assertTrue(replayed["cuda_graph"], replayed["cuda_graph_note"])
        plain, graph = (statistics.median(t["candidate_ns"]) for t in (tiny, replayed))
        self.assertLess(abs(plain - graph), 0.2 * graph + 2_000,
                        (tiny["candidate_ns"], replayed["candidate_ns"]))
        # And far below a Python launch's 20-30 us.
        self.assertLess(plain, 15_000, tiny["candidate_ns"])

    def test_python_returns_and_a_module_class(self):
        source = "import torch\ndef softmax(x):\n    return torch.softmax(x, dim=-1)\n"
        result = gpu_run(g.gpu_request("python", source, calling="returns"))
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        model = ("import torch\n"
                 "class ModelNew(torch.nn.Module):\n"
                 "    def __init__(self, dim):\n"
                 "        super().__init__()\n"
                 "        self.dim = dim\n"
                 "        self.register_buffer('one', torch.ones(1))\n"
                 "    def forward(self, x):\n"
                 "        assert self.one.is_cuda\n"
                 "        return torch.softmax(x, dim=self.dim) * self.one\n")
        result = gpu_run(g.gpu_request("python", model, entry="ModelNew",
                                       init={"args": [-1], "seed": 0}))
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))

    def test_a_python_candidate_that_syncs_only_its_own_stream_is_still_checked(self):
        # It orders its stream after the inputs' copies but not the default stream after its
        # work: only the harness's device-wide synchronise makes its outputs complete.
        source = ("import torch\n"
                  "side = torch.cuda.Stream()\n"
                  "def softmax(x, y, M, N):\n"
                  "    side.wait_stream(torch.cuda.current_stream())\n"
                  "    with torch.cuda.stream(side):\n"
                  "        y.copy_(torch.softmax(x, dim=-1))\n")
        result = gpu_run(g.gpu_request("python", source, calling="dps"))
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))


class Sanitizer(unittest.TestCase):
    def setUp(self):
        g.torch_or_skip(self, cuda=True)
        if nvcc.find() is None:
            self.skipTest("no nvcc")
        self.tool = shutil.which("compute-sanitizer") or next(
            (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.path.exists(p)), None)
        if self.tool is None:
            self.skipTest("no compute-sanitizer")

    def sanitized(self, source):
        with tempfile.TemporaryDirectory(prefix="ksearch-san-") as tmp:
            log = os.path.join(tmp, "sanitizer.log")
            req = g.gpu_request("cuda", source, sanitize={"tool": "memcheck", "log": log})
            env = dict(os.environ, PYTHONPATH=HARNESS_DIR, TMPDIR=tmp,
                       PYTORCH_NO_CUDA_MEMORY_CACHING="1")
            proc = subprocess.run([self.tool, "--tool", "memcheck", "--log-file", log,
                                   sys.executable, "-m", "ksearch_harness"],
                                  input=json.dumps(req).encode(), cwd=tmp, env=env,
                                  capture_output=True, timeout=600)
            return Run(proc)

    def test_memcheck_names_an_out_of_bounds_write(self):
        extra = "if (blockIdx.x == 0 && threadIdx.x == 0) y[(int64_t)1 << 28] = 1.0f;"
        result = self.sanitized(g.cuda_softmax(extra=extra))
        self.assertEqual(result.statuses[0], "runtime_error", reasons(result))
        self.assertIn("Invalid __global__ write", result.workloads[0]["reason"])

    def test_a_clean_kernel_passes_untimed(self):
        result = self.sanitized(g.cuda_softmax())
        self.assertEqual(result.statuses, ["passed", "passed"], reasons(result))
        self.assertNotIn("timing", result.workloads[0])


if __name__ == "__main__":
    unittest.main()
