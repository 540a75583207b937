"""The mlx candidate format (backends/mlx_spec.py) without MLX: good launch specs in TOML and
JSON, every kind of bad one with an error naming the file and the field, the built-in MLX tasks'
seeds resolved for every workload in both dialects, and the harness's answer when MLX is absent.
"""

import copy
import importlib.util
import json
import os
import unittest

from ksearch_harness.backends.common import sources
from ksearch_harness.backends.mlx import spec as mlx_spec
from ksearch_harness.definition import Spec
from tests.mlx_support import WithoutMlx as without_mlx
from tests.support import HARNESS_DIR as HARNESS, run

TASKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "tasks")

DEFINITION = {
    "name": "scale_rows",
    "op_type": "elementwise",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float16"},
               "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M", "N"], "dtype": "float16"}},
    "reference": "def run(x, alpha):\n    return x * alpha\n",
}
WORKLOADS = [{"uuid": "w0", "axes": {"M": 8}}, {"uuid": "w1", "axes": {"M": 3}}]

GOOD = """
grid = ["M * N", 1, 1]
threadgroup = [64]
[template]
COLS = "N"
ROWS = "M"
T = { dtype = "float16" }
[cuda]
source = '''
const int i = blockIdx.x * blockDim.x + threadIdx.x;
if (i < ROWS * COLS) y[i] = (T)((float)x[i] * alpha[0]);
'''
[metal]
source_file = "kernel.metal"
"""


def candidate(files, entry="launch.toml::scale"):
    return {"language": "mlx", "sources": [{"path": p, "content": c} for p, c in files.items()],
            "entry_point": entry}


def parse(files, entry="launch.toml::scale", dialect="cuda", definition=DEFINITION):
    checked = sources.check(candidate(files, entry), "mlx", (".toml", ".json", ".py"),
                            "launch spec (.toml, .json) or Python launcher (.py)",
                            kind="an identifier", example="launch.toml")
    return mlx_spec.parse(checked, Spec(definition), dialect)


def spec_with(text, metal="y[0] = x[0];"):
    return {"launch.toml": text, "kernel.metal": metal}


class GoodSpecs(unittest.TestCase):
    def test_toml_kernel_for_each_dialect(self):
        cuda = parse(spec_with(GOOD))
        self.assertIsInstance(cuda, mlx_spec.KernelSpec)
        self.assertEqual((cuda.dialect, cuda.name, cuda.inputs), ("cuda", "scale", ["x", "alpha"]))
        self.assertIn("alpha[0]", cuda.source)
        self.assertRegex(cuda.kernel_name, r"^scale_[0-9a-f]{12}$")
        launch = cuda.launch({"M": 8, "N": 64})
        self.assertEqual((launch.grid, launch.threadgroup), ((512, 1, 1), (64, 1, 1)))
        self.assertEqual(launch.template, [("COLS", "expr", 64), ("ROWS", "expr", 8),
                                           ("T", "dtype", "float16")])
        self.assertEqual((launch.output_shapes, launch.shared_memory), ([(8, 64)], 0))
        self.assertIsNone(cuda.init_value)
        self.assertTrue(cuda.ensure_row_contiguous)
        metal = parse(spec_with(GOOD, metal="y[0] = x[0];"), dialect="metal")
        self.assertEqual((metal.dialect, metal.source), ("metal", "y[0] = x[0];"))
        # The same spec, the other body: a different kernel name, so MLX never reuses the other.
        self.assertNotEqual(metal.kernel_name, cuda.kernel_name)

    def test_a_changed_body_gets_a_new_kernel_name(self):
        a = parse(spec_with(GOOD)).kernel_name
        b = parse(spec_with(GOOD.replace("alpha[0]", "alpha[0] * 1.0f"))).kernel_name
        self.assertNotEqual(a, b)

    def test_json_spec_with_files_scratch_outputs_overrides_and_expressions(self):
        spec = {
            "name": "two_pass", "inputs": ["x"], "init_value": "nan",
            "grid": ["cdiv(M, 4) * 32", "min(M, 2)", "max(1, N // 64)"], "threadgroup": [32, 1, 1],
            "outputs": [{"name": "y", "shape": ["M", "N"], "dtype": "float16"},
                        {"name": "partial", "shape": ["M", "N / 2"], "dtype": "float32"}],
            "cuda": {"source_file": "k.cu", "header_file": "k.cuh", "shared_memory": "N * 4",
                     "threadgroup": [64], "template": {"FAST": True}},
        }
        got = parse({"spec.json": json.dumps(spec), "k.cu": "body", "k.cuh": "helpers"},
                    entry="spec.json::ignored")
        self.assertEqual((got.name, got.source, got.header, got.inputs),
                         ("two_pass", "body", "helpers", ["x"]))
        self.assertTrue(got.init_value != got.init_value)  # NaN
        self.assertEqual([(o.name, o.dtype, o.scratch) for o in got.outputs],
                         [("y", "float16", False), ("partial", "float32", True)])
        launch = got.launch({"M": 9, "N": 64})
        self.assertEqual(launch.grid, (96, 2, 1))
        self.assertEqual(launch.threadgroup, (64, 1, 1))  # the dialect's own
        self.assertEqual(launch.template, [("FAST", "bool", True)])
        self.assertEqual(launch.output_shapes, [(9, 64), (9, 32)])
        self.assertEqual(launch.shared_memory, 256)

    def test_a_python_launcher(self):
        got = parse({"launcher.py": "def run(x, alpha):\n    return x\n"},
                    entry="launcher.py::run", dialect=None)
        self.assertIsInstance(got, mlx_spec.LauncherSpec)
        self.assertEqual((got.file, got.symbol), ("launcher.py", "run"))

    def test_the_platform_picks_the_dialect(self):
        self.assertEqual(mlx_spec.platform_dialect("darwin"), "metal")
        self.assertEqual(mlx_spec.platform_dialect("linux"), "cuda")

    def test_axes_from_the_inputs_shapes(self):
        spec = Spec(DEFINITION)
        self.assertEqual(mlx_spec.axes_from_shapes(spec, [(5, 64), None]), {"N": 64, "M": 5})
        with self.assertRaisesRegex(ValueError, "along 'N', expected 64"):
            mlx_spec.axes_from_shapes(spec, [(5, 63), None])


class BadSpecs(unittest.TestCase):
    def fails(self, files, pattern, dialect="cuda", entry="launch.toml::scale", workloads=None):
        with self.assertRaises(ValueError) as caught:
            spec = parse(files, entry=entry, dialect=dialect)
            mlx_spec.check_workloads(spec, Spec(DEFINITION), workloads or WORKLOADS)
        self.assertRegex(str(caught.exception), pattern)
        return str(caught.exception)

    def edit(self, old, new, **kw):
        self.assertIn(old, GOOD)
        return self.fails(spec_with(GOOD.replace(old, new)), **kw)

    def passes(self, text, dialect, metal="y[0] = x[0];", workloads=None):
        spec = parse(spec_with(text, metal), dialect=dialect)
        return mlx_spec.check_workloads(spec, Spec(DEFINITION), workloads or WORKLOADS)

    def test_syntax(self):
        self.fails({"launch.toml": "grid = [1"}, r"^launch\.toml: is not valid TOML")
        self.fails({"k.json": "{"}, r"^k\.json: is not valid JSON", entry="k.json::s")
        self.fails({"k.json": "[1]"}, r"^k\.json: must be a table", entry="k.json::s")

    def test_the_entry_must_be_a_spec_or_a_launcher(self):
        self.fails({"k.cu": "x"}, r"has no launch spec \(\.toml, \.json\) or Python launcher",
                   entry="k.cu::k")
        self.fails({"k.cu": "x", "launch.toml": GOOD}, r"entry_point 'k\.cu::k': an mlx "
                   r"candidate's entry is its launch spec \(\.toml or \.json\) or its Python "
                   r"launcher", entry="k.cu::k")

    def test_unknown_keys(self):
        self.edit("threadgroup = [64]", "threadgroup = [64]\nblock = [64]",
                  pattern=r"launch\.toml: block: unknown key")
        self.edit("[metal]", "[metal]\nshared_memory = 0",
                  pattern=r"metal\.shared_memory: unknown key \(shared_memory belongs to the cuda")
        self.edit("[cuda]", "[cuda]\natomic_outputs = true",
                  pattern=r"cuda\.atomic_outputs: unknown key \(atomic_outputs belongs to the metal")
        self.edit("threadgroup = [64]", "threadgroup = [64]\nshared_memory = 4096",
                  pattern=r"launch\.toml: shared_memory: unknown key \(shared_memory belongs in "
                          r"the \[cuda\] section: cuda\.shared_memory\)")

    def test_bodies(self):
        self.fails({"launch.toml": "grid = [1]\nthreadgroup = [1]\n"},
                   r"launch\.toml: has no kernel: add a \[cuda\] or \[metal\] section")
        only_metal = GOOD[:GOOD.index("[cuda]")] + "[metal]\nsource = 'y[0] = x[0];'\n"
        self.fails({"launch.toml": only_metal},
                   r"has no \[cuda\] section: this machine runs cuda kernels .* written for metal")
        self.fails(spec_with(GOOD), r"a kernel needs a GPU", dialect=None)
        self.edit("source = '''", "source_file = 'k.cu'\nsource = '''",
                  pattern=r"cuda\.source: give source or source_file, not both")
        self.fails({"launch.toml": GOOD}, r"metal\.source_file: 'kernel\.metal' is not among the "
                                          r"candidate's other sources \(none\)")
        self.edit("[metal]", "header = 3\n[metal]", pattern=r"cuda\.header: must be a string")
        self.fails(spec_with(GOOD, metal="  \n"), r"metal\.source: the kernel body is missing or "
                                                  r"empty", dialect="metal")

    def test_sizes(self):
        self.edit('grid = ["M * N", 1, 1]', "", pattern=r"launch\.toml: grid: is missing")
        self.edit('grid = ["M * N", 1, 1]', "grid = [1, 1, 1, 1]",
                  pattern=r"grid: must be a list of 1 to 3 sizes")
        self.edit('"M * N"', '"M * K"', pattern=r"grid\[0\]: 'M \* K': 'K' is not an axis of the "
                                                r"definition \(axes: M, N\)")
        self.edit('"M * N"', '"M * 1.5"', pattern=r"grid\[0\]: 'M \* 1\.5': 1\.5 is not an integer")
        self.edit('"M * N"', "\"__import__('os').getpid()\"",
                  pattern=r"grid\[0\]: .*: only integers, axis names")
        self.edit('"M * N"', '"M - 3"', pattern=r"grid\[0\]: is 0 for workload 1 \('w1'\); it "
                                                r"must be between 1")
        self.edit('"M * N"', '"M * N / 3"', pattern=r"grid\[0\]: 'M \* N / 3': 512 / 3 is not an "
                                                    r"integer \(use // or cdiv\) for workload 0")
        self.edit("threadgroup = [64]", "threadgroup = [64, 32]",
                  pattern=r"threadgroup: \[64, 32, 1\] is 2048 threads for workload 0 .*at most "
                          r"1024")
        self.edit("threadgroup = [64]", "threadgroup = [true]",
                  pattern=r"threadgroup\[0\]: True must be an integer")

    def test_device_limits_of_each_dialect(self):
        cuda_only = dict(dialect="cuda")
        # blockDim.z is at most 64 in CUDA; a Metal threadgroup may be 1024 deep.
        self.edit("threadgroup = [64]", "threadgroup = [1, 1, 128]",
                  pattern=r"threadgroup\[2\]: is 128 for workload 0 \('w0'\); CUDA \(H200, sm_90\) "
                          r"allows at most 64 threads along z", **cuda_only)
        self.passes(GOOD.replace("threadgroup = [64]", "threadgroup = [1, 1, 128]"), "metal")
        # At most 65535 blocks along y and z in CUDA (threads / threadgroup, rounded up).
        for grid, axis in (('[1, "M * 10000", 1]', 1), ('[1, 1, "M * 10000"]', 2)):
            self.edit('["M * N", 1, 1]', grid,
                      pattern=rf"grid\[{axis}\]: is 80000 threads, 80000 threadgroups of 1 for "
                              rf"workload 0 .*at most 65535 along {'xyz'[axis]}", **cuda_only)
            self.passes(GOOD.replace('["M * N", 1, 1]', grid), "metal")
        self.passes(GOOD.replace('["M * N", 1, 1]', '[1, "M * 10000", 1]')
                    .replace("threadgroup = [64]", "threadgroup = [1, 2]"), "cuda")  # 40000
        # Dynamic shared memory up to sharedMemPerBlockOptin (227 KiB), static arrays included.
        self.edit("[metal]", 'shared_memory = "240 * 1024"\n[metal]',
                  pattern=r"cuda\.shared_memory: is 245760 bytes for workload 0 .*at most 232448 "
                          r"bytes \(227 KiB\) of shared memory per block", **cuda_only)
        self.passes(GOOD.replace("[metal]", 'shared_memory = "227 * 1024"\n[metal]'), "cuda")
        static = GOOD.replace("const int i", "__shared__ float s[256];\nconst int i")
        self.fails(spec_with(static.replace("[metal]", 'shared_memory = "227 * 1024"\n[metal]')),
                   r"cuda\.shared_memory: is 232448 bytes for workload 0 \('w0'\), with 1024 "
                   r"bytes of static __shared__ arrays, 233472 in all")
        # Static __shared__ arrays: at most 48 KiB, counted per workload from template values.
        big = GOOD.replace("const int i", "__shared__ float big[ROWS * 2048];\nconst int i")
        self.fails(spec_with(big), r"cuda\.source: static __shared__ arrays take 65536 bytes for "
                                   r"workload 0 \('w0'\) \(big 65536 B\); .*at most 49152 bytes")
        self.passes(big, "cuda", workloads=WORKLOADS[1:])  # M = 3: 24576 bytes
        # Alternatives under #if / #else: a Hopper path and its fallback are one or the other,
        # so 40 KiB + 40 KiB passes; a conditional whose every branch is too big is refused
        # for its smallest branch (here the #else), and one without #else may declare nothing.
        arch = ("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n__shared__ float hop[10240];\n"
                "#elif defined(OTHER)\n__shared__ float mid[{}];\n"
                "#else\n__shared__ float old[10240];\n#endif\nconst int i")
        self.passes(GOOD.replace("const int i", arch.format(10240)), "cuda")
        self.passes(GOOD.replace("const int i", "#ifdef BIG\n__shared__ float b[20000];\n"
                                                "#endif\nconst int i"), "cuda")
        both = arch.format(12800).replace("[10240]", "[12800]", 1).replace("old[10240]", "old[12500]")
        self.fails(spec_with(GOOD.replace("const int i", both)),
                   r"cuda\.source: static __shared__ arrays take 50000 bytes for workload 0 "
                   r"\('w0'\) \(old 50000 B\)")
        # Metal threadgroup memory: 32 KiB on Apple GPUs, all of it static.
        for size, ok in (("COLS * 129", False), ("COLS * 128", True), ("n", True)):
            body = f"threadgroup float tile[{size}];\ny[0] = x[0];"
            if ok:  # at the limit, or of a size only the compiler knows: not counted
                self.passes(GOOD, "metal", metal=body)
            else:
                self.fails(spec_with(GOOD, metal=body),
                           r"metal\.source: threadgroup arrays take 33024 bytes for workload 0 "
                           r"\('w0'\) \(tile 33024 B\); Metal \(Apple GPUs\) allows at most "
                           r"32768 bytes \(32 KiB\) of threadgroup memory", dialect="metal")

    def test_without_a_gpu_every_dialect_is_checked_before_needing_one(self):
        def check(text, metal="y[0] = x[0];"):
            checked = sources.check(candidate(spec_with(text, metal)), "mlx",
                                    (".toml", ".json", ".py"), "spec", kind="an identifier",
                                    example="launch.toml")
            return mlx_spec.check(checked, Spec(DEFINITION), None, WORKLOADS)
        with self.assertRaises(mlx_spec.NeedsGpu) as caught:
            check(GOOD)
        self.assertEqual(caught.exception.dialects, ["cuda", "metal"])
        self.assertRegex(str(caught.exception), r"^launch\.toml: a kernel needs a GPU")
        for text, metal, pattern in [
            (GOOD.replace("threadgroup = [64]", "threadgroup = [2048]"), "y[0] = x[0];",
             r"threadgroup: \[2048, 1, 1\] is 2048 threads for workload 0 \('w0'\); at most 1024"),
            (GOOD.replace("threadgroup = [64]", "threadgroup = [1, 1, 128]"), "y[0] = x[0];",
             r"threadgroup\[2\]: is 128 .*at most 64 threads along z"),
            (GOOD, "threadgroup half t[20000];", r"metal\.source: threadgroup arrays take 40000"),
            (GOOD.replace('"M * N"', '"M - 3"'), "y[0] = x[0];",
             r"grid\[0\]: is 0 for workload 1"),
        ]:
            with self.assertRaises(ValueError) as caught:
                check(text, metal)
            self.assertNotIsInstance(caught.exception, mlx_spec.NeedsGpu)
            self.assertRegex(str(caught.exception), pattern)

    def test_inputs_outputs_and_template(self):
        self.edit("grid =", 'inputs = ["x", "beta"]\ngrid =',
                  pattern=r"inputs: 'beta' is not an input of the definition \(x, alpha\)")
        self.edit("grid =", 'inputs = ["x", "x"]\ngrid =', pattern=r"inputs: 'x' appears twice")
        outputs = '[[outputs]]\nname = "{name}"\nshape = {shape}\ndtype = "{dtype}"\n{extra}[cuda]'
        for fields, pattern in [
            (dict(name="z", shape='["M", "N"]', dtype="float16", extra=""),
             r"outputs: lacks the definition's output 'y'"),
            (dict(name="y", shape='["M", "N"]', dtype="float32", extra=""),
             r"outputs\.y\.dtype: is float32, but the definition's output 'y' is float16"),
            (dict(name="y", shape='["M", 64]', dtype="complex", extra=""),
             r"outputs\.y\.dtype: 'complex' is not an MLX dtype"),
            (dict(name="y", shape='["M"]', dtype="float16", extra=""),
             r"outputs\.y\.shape: has 1 dimensions, the definition's output has 2"),
            (dict(name="y", shape='["M", 32]', dtype="float16", extra=""),
             r"outputs\.y\.shape: is \[8, 32\] for workload 0 \('w0'\), but the definition's "
             r"output 'y' has shape \[8, 64\]"),
            (dict(name="y", shape='["M", "N"]', dtype="float16", extra="size = 3\n"),
             r"outputs\[0\]\.size: unknown key"),
            (dict(name="x", shape='["M", "N"]', dtype="float16",
                  extra='[[outputs]]\nname = "y"\nshape = ["M", "N"]\ndtype = "float16"\n'),
             r"outputs: 'x' names both an input and a output"),
        ]:
            self.edit("[cuda]", outputs.format(**fields), pattern=pattern)
        self.edit('COLS = "N"', "COLS = 1.5", pattern=r"template\.COLS: 1\.5 must be an integer")
        self.edit('T = { dtype = "float16" }', 'T = { dtype = "half" }',
                  pattern=r"template\.T\.dtype: 'half' is not an MLX dtype")
        self.edit('COLS = "N"', 'x = "N"', pattern=r"template: 'x' names both an input and a "
                                                 r"template argument")
        self.edit("grid =", "init_value = true\ngrid =",
                  pattern=r"init_value: True must be a number")
        self.edit("grid =", 'name = "9lives"\ngrid =', pattern=r"name: '9lives' must be an "
                                                              r"identifier")


class BuiltinSeeds(unittest.TestCase):
    """Every MLX task's seed resolves for every workload, in both dialects."""

    def test_seeds(self):
        for task in sorted(t for t in os.listdir(TASKS) if t.startswith("mlx_")):
            folder = os.path.join(TASKS, task)
            with open(os.path.join(folder, "definition.json")) as f:
                definition = json.load(f)
            with open(os.path.join(folder, "seed.toml")) as f:
                seed = f.read()
            with open(os.path.join(folder, "workloads.jsonl")) as f:
                workloads = [json.loads(line) for line in f if line.strip()]
            for dialect in mlx_spec.DIALECTS:
                spec = parse({"seed.toml": seed}, entry=f"seed.toml::{task}", dialect=dialect,
                             definition=definition)
                launches = mlx_spec.check_workloads(spec, Spec(definition), workloads)
                self.assertEqual(len(launches), len(workloads), task)
                for launch, w in zip(launches, workloads):
                    threads = launch.grid[0] * launch.grid[1] * launch.grid[2]
                    self.assertGreater(threads, 0, f"{task} {w['uuid']}")


class WithoutMlx(unittest.TestCase):
    """The harness in an interpreter that cannot import mlx (an import blocker in a subprocess,
    so this runs whether or not this Python has MLX)."""

    def test_a_missing_mlx_is_a_harness_error_that_names_it(self):
        for device in ("mlx:gpu", "mlx:cpu"):
            req = json.loads(json.dumps(REQUEST))
            req["device"]["name"] = device
            if device == "mlx:cpu":  # a launcher: nothing about the candidate is wrong
                del req["device"]["dialect"]
                req["candidate"] = candidate({"launcher.py": "def run(x, alpha):\n    return x\n"},
                                             "launcher.py::run")
            with without_mlx(HARNESS) as env:
                result = run(req, env=env)
            errors = result.of("harness_error")
            self.assertEqual(len(errors), 1, result.lines)
            self.assertEqual(errors[0].get("missing"), "mlx")
            self.assertIn("the mlx backend needs MLX", errors[0]["message"])
            self.assertIn("cannot import mlx.core (No module named 'mlx')", errors[0]["message"])
            self.assertIn("'mlx[cpu]' for launchers on the CPU", errors[0]["message"])
            self.assertEqual(result.events[-1]["event"], "done")
            self.assertEqual(result.workloads, [])

    def test_the_launch_spec_is_checked_before_mlx_is_needed(self):
        # What is wrong with the spec is said first, on either device, though MLX is missing.
        bad = GOOD.replace("threadgroup = [64]", "threadgroup = [2048]")
        for device in ("mlx:gpu", "mlx:cpu"):
            req = json.loads(json.dumps(REQUEST))
            req["device"] = {"backend": "mlx", "name": device}
            req["candidate"] = candidate(spec_with(bad))
            with without_mlx(HARNESS) as env:
                result = run(req, env=env)
            errors = result.of("harness_error")
            self.assertEqual(len(errors), 1, result.lines)
            message = errors[0]["message"]
            self.assertTrue(message.startswith(
                "launch.toml: threadgroup: [2048, 1, 1] is 2048 threads for workload 0 ('w0'); "
                "at most 1024\n"), message)
            self.assertIn("the candidate was checked before MLX", message)
            self.assertIn("cannot import mlx.core", message)
            self.assertNotIn("a kernel needs a GPU", message)
            self.assertEqual(result.workloads, [])


REQUEST = {
    "protocol": 1, "mode": "evaluate", "task_dir": TASKS, "definition": DEFINITION,
    "workloads": WORKLOADS, "seed": 1,
    "candidate": candidate(spec_with(GOOD)),
    "device": {"backend": "mlx", "name": "mlx:gpu", "dialect": "cuda"},
    "correctness": {"trials": 1, "tolerance": {"float16": {"atol": 1e-3, "rtol": 1e-3}}},
    "timing": {"warmup": 1, "iterations": 2}, "limits": {}, "fail_fast": False,
}


if __name__ == "__main__":
    unittest.main()
