"""Backend python on a CPU-only torch (device "cpu"): the calling conventions, returned outputs
checked for count, shape and dtype, and the candidate's exceptions. Skipped without torch."""

import unittest

from tests.gpu_support import gpu_request, torch_or_skip
from tests.support import run

RETURNS = "import torch\ndef softmax(x):\n    return torch.softmax(x, dim=-1)\n"


def python_request(source, **kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("calling", "returns")
    return gpu_request("python", source, **kw)


class Conventions(unittest.TestCase):
    def setUp(self):
        torch_or_skip(self)

    def passes(self, req):
        result = run(req, timeout=300)
        self.assertEqual(result.statuses, ["passed", "passed"], result.stderr[-3000:])
        return result

    def test_dps_writes_the_outputs_in_place_and_gets_var_axes(self):
        source = ("import torch\n"
                  "def softmax(x, y, M, N):\n"
                  "    assert isinstance(M, int) and (M, N) == tuple(x.shape)\n"
                  "    y.copy_(torch.softmax(x, dim=-1))\n")
        result = self.passes(python_request(source, calling="dps"))
        timing = result.workloads[0]["timing"]
        self.assertEqual(timing["clock"], "perf_counter_ns")  # no events on the CPU
        device = result.events[-1]["environment"]["device"]
        self.assertEqual(device["kind"], "cpu")
        self.assertIsNotNone(device["torch"])

    def test_a_flashinfer_bench_dps_entry_gets_no_var_axes(self):
        # FlashInfer-Bench calls a destination-passing entry as run(*inputs, *outputs).
        source = ("import torch\n"
                  "def run(x, y):\n"
                  "    y.copy_(torch.softmax(x, dim=-1))\n")
        self.passes(python_request(source, entry="run", calling="dps"))

    def test_returns_tuple_and_a_class_entry(self):
        self.passes(python_request(RETURNS))
        self.passes(python_request("import torch\ndef softmax(data):\n    (x,) = data\n"
                                   "    return (torch.softmax(x, dim=-1),)\n", calling="tuple"))
        model = ("import torch\n"
                 "class Model(torch.nn.Module):\n"
                 "    def __init__(self, scale):\n"
                 "        super().__init__()\n"
                 "        self.w = torch.nn.Parameter(torch.randn(1))\n"
                 "        self.scale = scale\n"
                 "    def forward(self, x):\n"
                 "        # init.seed fixes the parameter: torch.manual_seed(7); randn(1)\n"
                 "        torch.manual_seed(7)\n"
                 "        assert torch.equal(self.w.data, torch.randn(1))\n"
                 "        return torch.softmax(x * self.scale, dim=-1)\n")
        self.passes(python_request(model, entry="Model", init={"args": [1.0], "seed": 7},
                                   calling="dps"))

    def test_init_eval_dropout_puts_the_class_entry_s_dropout_in_eval_mode(self):
        # A KernelBench model with dropout (task.toml [kernel].init.eval_dropout, set by the
        # importer): its dropout must pass the input through, as in the task's reference.
        model = ("import torch\n"
                 "class Model(torch.nn.Module):\n"
                 "    def __init__(self):\n"
                 "        super().__init__()\n"
                 "        self.drop = torch.nn.Sequential(torch.nn.Dropout(0.5))\n"
                 "    def forward(self, x):\n"
                 "        assert not self.drop[0].training and self.training\n"
                 "        return torch.softmax(self.drop(x), dim=-1)\n")
        self.passes(python_request(model, entry="Model",
                                   init={"args": [], "seed": 7, "eval_dropout": True}))
        # Without it the module stays in training mode (nn.Module's default) and drops.
        result = run(python_request(model, entry="Model", init={"args": [], "seed": 7}),
                     timeout=300)
        self.assertNotIn("passed", result.statuses, result.stderr[-3000:])

    def test_returned_outputs_are_checked(self):
        cases = [
            ("return torch.softmax(x, -1)[:1]", "incorrect_shape", "has shape"),
            ("return torch.softmax(x, -1).double()", "incorrect_dtype", "torch.float64"),
            ("return torch.softmax(x, -1), x", "incorrect_shape", "returned 2 value(s)"),
            ("return [1.0]", "incorrect_dtype", "not a tensor"),
            ("return torch.softmax(x, 0)", "incorrect_numerical", "differ"),
            ("raise KeyError('boom')", "runtime_error", "KeyError: 'boom' (at kernel.py:3)"),
            ("x.add_(1); return torch.softmax(x, -1)", "incorrect_numerical",
             "modified its input 'x'"),
        ]
        for body, status, needle in cases:
            source = f"import torch\ndef softmax(x):\n    {body}\n"
            result = run(python_request(source), timeout=300)
            self.assertEqual(result.statuses[0], status, body)
            self.assertIn(needle, result.workloads[0]["reason"], body)

    def test_syntax_errors_and_missing_entries(self):
        result = run(python_request("def softmax(x:\n"))
        (compile_event,) = result.of("compile")
        self.assertFalse(compile_event["ok"])
        self.assertIn("kernel.py", compile_event["log"])
        self.assertIn("SyntaxError", compile_event["log"])
        result = run(python_request("import torch\n", entry="softmax"))
        self.assertEqual(result.statuses, ["runtime_error", "runtime_error"])
        self.assertIn("defines no 'softmax'", result.workloads[0]["reason"])

    def test_gpu_only_backends_refuse_the_cpu(self):
        for backend in ("cuda", "triton"):
            req = gpu_request(backend, "", device="cpu")
            (error,) = run(req).of("harness_error")
            self.assertIn("CUDA device", error["message"])


class Bfloat16OnTheHost(unittest.TestCase):
    def test_conversions_match_torch(self):
        torch = torch_or_skip(self)
        import numpy as np
        from ksearch_harness import dtypes
        rng = np.random.default_rng(3)
        x = np.concatenate([rng.standard_normal(10000).astype(np.float32) * 100,
                            np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, 1e-40, 1.00390625],
                                     np.float32)])
        ours = dtypes.float32_to_bfloat16_bits(x)
        theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(ours, theirs)
        back = torch.from_numpy(ours.view(np.int16)).view(torch.bfloat16).float().numpy()
        np.testing.assert_array_equal(dtypes.bfloat16_bits_to_float32(ours), back)


if __name__ == "__main__":
    unittest.main()


class Signature(unittest.TestCase):
    """Which dps entries are called without the var axes (no torch needed)."""

    def test_exactly_the_inputs_and_outputs(self):
        from ksearch_harness.backends.python.build import _takes_exactly
        self.assertTrue(_takes_exactly(lambda x, y: None, 2))
        self.assertTrue(_takes_exactly(lambda x, y, **kw: None, 2))
        self.assertFalse(_takes_exactly(lambda x, y, M, N: None, 2))
        self.assertFalse(_takes_exactly(lambda x, *args: None, 2))
        self.assertFalse(_takes_exactly(print, 2))


class PrecisionFlagsPutBack(unittest.TestCase):
    """What a candidate leaves of PyTorch's precision switches is undone (build.PrecisionFlags):
    with a stand-in for torch's attributes here, and through a real evaluation where torch is."""

    def test_switches_are_put_back_and_others_left_alone(self):
        from types import SimpleNamespace
        from ksearch_harness.backends.python.build import PrecisionFlags
        state = {"precision": "highest"}
        fake = SimpleNamespace(
            backends=SimpleNamespace(
                cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False)),
                cudnn=SimpleNamespace(allow_tf32=True, deterministic=False, benchmark=False,
                                      enabled=True)),
            get_float32_matmul_precision=lambda: state["precision"],
            set_float32_matmul_precision=lambda p: state.update(precision=p))
        with PrecisionFlags(fake):
            fake.backends.cuda.matmul.allow_tf32 = True
            fake.backends.cudnn.benchmark = True
            fake.backends.cudnn.enabled = False  # not a precision switch: not the guard's
            fake.set_float32_matmul_precision("medium")
        self.assertFalse(fake.backends.cuda.matmul.allow_tf32)
        self.assertFalse(fake.backends.cudnn.benchmark)
        self.assertTrue(fake.backends.cudnn.allow_tf32)
        self.assertFalse(fake.backends.cudnn.enabled)
        self.assertEqual(state["precision"], "highest")

    def test_a_candidate_that_leaves_tf32_on_does_not_change_it_for_the_reference(self):
        torch_or_skip(self)
        # The candidate turns TF32 on at load and in each call; the reference (a trusted
        # baseline run in the same process) fails if it ever sees it on.
        source = ("import torch\n"
                  "torch.backends.cuda.matmul.allow_tf32 = True\n"
                  "def softmax(x):\n"
                  "    torch.backends.cuda.matmul.allow_tf32 = True\n"
                  "    torch.backends.cudnn.benchmark = True\n"
                  "    return torch.softmax(x, dim=-1)\n")
        import copy
        from tests.gpu_support import SOFTMAX
        definition = copy.deepcopy(SOFTMAX)
        definition["reference"] = (
            "import torch\n"
            "def run(x):\n"
            "    assert not torch.backends.cuda.matmul.allow_tf32, 'TF32 left on'\n"
            "    assert not torch.backends.cudnn.benchmark, 'benchmark left on'\n"
            "    return torch.softmax(x.double(), dim=-1).float()\n")
        result = run(python_request(source, definition=definition), timeout=300)
        self.assertEqual(result.statuses, ["passed", "passed"], result.stderr[-3000:])
