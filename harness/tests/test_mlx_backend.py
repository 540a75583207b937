"""Backend mlx end to end, through the harness process. Without MLX these skip, printing why,
unless KSEARCH_REQUIRE_MLX=1 (.ci/run, which installs mlx[cpu]) makes that a failure.

On MLX's CPU device (the mlx[cpu] package is enough): Python launchers of MLX operations, the
checks of what they return, their failures, MLX and NumPy references, bfloat16, cached results
caught during timing, and a kernel refused on a device that cannot run one. Where MLX has a GPU
(Metal on macOS, its CUDA backend on Linux), kernels from launch specs in that platform's
dialect: a correct one passes, one that leaves an element unwritten fails on the poison, one that
does not compile fails with the compiler's message.
"""

import unittest

from tests.mlx_support import STATE, requires_mlx
from tests.support import request, run


MLX_REFERENCE = ("import mlx.core as mx\n"
                 "def run(x):\n"
                 "    return mx.softmax(x.astype(mx.float32), axis=-1, precise=True)\n")
SOFTMAX = "import mlx.core as mx\ndef softmax(x):\n    return mx.softmax(x, axis=-1)\n"


def mlx_request(files, entry, device="mlx:cpu", **kw):
    req = request(**kw)
    req["candidate"] = {"language": "mlx", "entry_point": entry,
                        "sources": [{"path": p, "content": c} for p, c in files.items()]}
    req["device"] = {"backend": "mlx", "name": device}
    return req


@requires_mlx()
class Launchers(unittest.TestCase):
    def statuses(self, req, expected):
        result = run(req, timeout=300)
        self.assertEqual(result.statuses, expected, result.stderr[-3000:])
        return result

    def test_a_launcher_passes_with_numpy_and_mlx_references(self):
        for reference in (None, MLX_REFERENCE):
            req = mlx_request({"launcher.py": SOFTMAX}, "launcher.py::softmax")
            if reference:
                req["definition"]["reference"] = reference
            result = self.statuses(req, ["passed"] * 3)
            compile_line = result.of("compile")[0]
            self.assertTrue(compile_line["ok"])
            self.assertIn("syntax checked", compile_line["log"])
            timing = result.workloads[0]["timing"]
            self.assertEqual(timing["clock"], "perf_counter_ns")
            self.assertGreaterEqual(len(timing["candidate_ns"]), 3)
            device = result.of("done")[0]["environment"]["device"]
            self.assertEqual((device["kind"], device["device"]), ("mlx", "cpu"))

    def test_what_a_launcher_returns_is_checked(self):
        for body, status, words in [
            ("return x, x", "incorrect_shape", "returned 2 value(s) for 1 output(s)"),
            ("return x[:, :10]", "incorrect_shape", "has shape"),
            ("return x.astype(mx.float16)", "incorrect_dtype", "has dtype mlx.core.float16"),
            ("import numpy as np\n    return np.array(x)", "incorrect_dtype", "not an mlx.core.array"),
            ("raise ValueError('no luck')", "runtime_error", "ValueError: no luck (at launcher.py:3)"),
            ("return mx.zeros_like(x)", "incorrect_numerical", "differ"),
        ]:
            source = f"import mlx.core as mx\ndef softmax(x):\n    {body}\n"
            result = self.statuses(mlx_request({"launcher.py": source}, "launcher.py::softmax"),
                                   [status] * 3)
            self.assertIn(words, result.workloads[0]["reason"], body)

    def test_syntax_errors_and_missing_entries(self):
        result = run(mlx_request({"launcher.py": "def softmax(x:\n"}, "launcher.py::softmax"))
        line = result.of("compile")[0]
        self.assertFalse(line["ok"])
        self.assertIn("launcher.py", line["log"])
        result = self.statuses(mlx_request({"launcher.py": SOFTMAX}, "launcher.py::nothing"),
                               ["runtime_error"] * 3)
        self.assertIn("defines no 'nothing'", result.workloads[0]["reason"])

    def test_cached_results_fail_during_timing(self):
        source = ("import mlx.core as mx\n_seen = {}\n"
                  "def softmax(x):\n"
                  "    key = x.shape\n"
                  "    if key not in _seen:\n"
                  "        _seen[key] = mx.softmax(x, axis=-1)\n"
                  "    return _seen[key]\n")
        req = mlx_request({"launcher.py": source}, "launcher.py::softmax",
                          correctness={"trials": 1, "distributions": ["normal"],
                                       "tolerance": {"float32": {"atol": 1e-4, "rtol": 1e-4}},
                                       "matched_ratio": 1.0})
        result = self.statuses(req, ["incorrect_numerical"] * 3)
        self.assertIn("during timing", result.workloads[0]["reason"])

    def test_a_subclass_of_mlx_array_is_not_an_output(self):
        # A subclass could answer for the timed calls' device checks (its own __sub__, astype)
        # without holding the values: only mlx.core.array itself is an output.
        source = ("import mlx.core as mx\n"
                  "class Answer(mx.array):\n"
                  "    pass\n"
                  "def softmax(x):\n"
                  "    return Answer(mx.softmax(x, axis=-1))\n")
        req = mlx_request({"launcher.py": source}, "launcher.py::softmax")
        result = self.statuses(req, ["incorrect_dtype"] * 3)
        self.assertIn("Answer, not an mlx.core.array", result.workloads[0]["reason"])

    def test_bfloat16_in_and_out(self):
        definition = {
            "name": "double", "op_type": "elementwise", "axes": {"N": {"type": "var"}},
            "inputs": {"x": {"shape": ["N"], "dtype": "bfloat16"}},
            "outputs": {"y": {"shape": ["N"], "dtype": "bfloat16"}},
            "reference": "import mlx.core as mx\ndef run(x):\n    return x * 2\n",
        }
        req = mlx_request({"l.py": "def double(x):\n    return x + x\n"}, "l.py::double",
                          definition=definition, workloads=[{"uuid": "a", "axes": {"N": 1000}}],
                          correctness={"trials": 3, "tolerance": {"bfloat16": {"atol": 0,
                                                                               "rtol": 0}}})
        self.statuses(req, ["passed"])
        req["candidate"]["sources"][0]["content"] = "def double(x):\n    return x * 2.01\n"
        self.statuses(req, ["incorrect_numerical"])

    def test_a_kernel_needs_a_gpu(self):
        spec = "grid = [1]\nthreadgroup = [1]\n[cuda]\nsource = 'y[0] = x[0];'\n"
        result = run(mlx_request({"launch.toml": spec}, "launch.toml::softmax"))
        line = result.of("compile")[0]
        self.assertFalse(line["ok"])
        self.assertIn("a kernel needs a GPU", line["log"])

    def test_the_launch_spec_is_checked_before_a_gpu_is_needed(self):
        # A kernel that asks for 2048 threads per threadgroup fails its compile stage with that,
        # on MLX's CPU device and, where this MLX has no GPU backend, on mlx:gpu.
        spec = ("grid = [\"M * 256\"]\nthreadgroup = [2048]\n[cuda]\nsource = 'y[0] = x[0];'\n"
                "[metal]\nsource = 'y[0] = x[0];'\n")
        for device in ("mlx:cpu", "mlx:gpu"):
            result = run(mlx_request({"launch.toml": spec}, "launch.toml::softmax",
                                     device=device))
            self.assertEqual(result.of("harness_error"), [], result.lines)
            line = result.of("compile")[0]
            self.assertFalse(line["ok"])
            self.assertIn("threadgroup: [2048, 1, 1] is 2048 threads for workload 0", line["log"])
            self.assertNotIn("a kernel needs a GPU", line["log"])
            self.assertEqual(result.workloads, [])

    def test_without_a_gpu_backend_the_gpu_is_a_harness_error(self):
        if STATE != "cpu":
            self.skipTest("this MLX has a GPU backend")
        result = run(mlx_request({"launcher.py": SOFTMAX}, "launcher.py::softmax",
                                 device="mlx:gpu"))
        errors = result.of("harness_error")
        self.assertEqual(len(errors), 1, result.lines)
        self.assertIn("cannot run cuda kernels on a GPU (this build has: no GPU backend)",
                      errors[0]["message"])


# A row softmax over N = 256 columns as a kernel: one thread per row, in each dialect.
KERNEL = """
grid = ["M", 1, 1]
threadgroup = [32, 1, 1]
[template]
ROWS = "M"
COLS = "N"
[cuda]
source = '''
const int row = blockIdx.x * blockDim.x + threadIdx.x;
if (row >= ROWS) return;
float m = -__int_as_float(0x7f800000);
for (int j = 0; j < COLS; j++) m = fmaxf(m, x[row * COLS + j]);
float s = 0.0f;
for (int j = 0; j < COLS; j++) s += expf(x[row * COLS + j] - m);
for (int j = FIRST; j < COLS; j++) y[row * COLS + j] = expf(x[row * COLS + j] - m) / s;
'''
[metal]
source = '''
const uint row = thread_position_in_grid.x;
if (row >= uint(ROWS)) return;
float m = -INFINITY;
for (int j = 0; j < COLS; j++) m = metal::max(m, x[row * COLS + j]);
float s = 0.0f;
for (int j = 0; j < COLS; j++) s += metal::precise::exp(x[row * COLS + j] - m);
for (int j = FIRST; j < COLS; j++) y[row * COLS + j] = metal::precise::exp(x[row * COLS + j] - m) / s;
'''
"""


@unittest.skipUnless(STATE in ("metal", "cuda"), "MLX has no GPU backend here")
class Kernels(unittest.TestCase):
    def kernel(self, first=0, breakage=""):
        spec = KERNEL.replace("[template]", f"[template]\nFIRST = {first}")
        spec = spec.replace("const int row", breakage + "const int row")
        spec = spec.replace("const uint row", breakage + "const uint row")
        return mlx_request({"launch.toml": spec}, "launch.toml::softmax_rows", device="mlx:gpu")

    def test_a_correct_kernel_passes(self):
        result = run(self.kernel(), timeout=300)
        self.assertEqual(result.statuses, ["passed"] * 3, result.stderr[-3000:])
        self.assertIn(f"mx.fast.{STATE}_kernel", result.of("done")[0]["environment"]["compiler"])
        timing = result.workloads[0]["timing"]
        self.assertEqual(timing["l2_flush_bytes"], 256 << 20)

    def test_an_unwritten_element_fails_on_the_poison(self):
        result = run(self.kernel(first=1), timeout=300)
        self.assertEqual(result.statuses, ["incorrect_numerical"] * 3, result.stderr[-3000:])
        self.assertIn("nan", result.workloads[0]["reason"].lower())

    def test_a_body_that_does_not_compile_fails_with_the_compilers_message(self):
        result = run(self.kernel(breakage="this is not code;\n"), timeout=300)
        self.assertEqual(result.statuses, ["runtime_error"] * 3, result.stderr[-3000:])
        for workload in result.workloads:  # each workload's template values differ (ROWS)
            self.assertIn("failed to compile or launch", workload["reason"])


if __name__ == "__main__":
    unittest.main()
