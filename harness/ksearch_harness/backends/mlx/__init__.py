"""Backend `mlx`: kernels run through MLX, on an Apple GPU (Metal) or an NVIDIA GPU (MLX's CUDA
backend), and Python launchers of MLX operations (also on MLX's CPU device).

The candidate format is mlx_spec.py's (docs/mlx.md): a launch spec that becomes one
mx.fast.metal_kernel (macOS) or mx.fast.cuda_kernel (Linux) call, or a Python launcher module.
The dialect is the platform's unless the request names one (`device.dialect`); apart from that
choice, which picks the body and the mx.fast constructor, both dialects take the same code path.

MLX is imported here and nowhere else in the harness, with MLX_ENABLE_TF32=0 set first: MLX may
run float32 matrix products in TF32 (its default on hardware that has it), which would round a
reference's operands to 10 mantissa bits. Compilation (NVRTC or the Metal compiler) happens
inside MLX at a kernel's first call, which is a correctness call: a body that does not compile
fails that workload as a runtime_error carrying the compiler's message, and later workloads
with the same kernel fail with the same message without compiling again.
"""

import inspect
import json
import os
import sys
import time

import numpy as np

from ...definition import Spec
from ...errors import CandidateError, SetupError, TaskError
from ..common import pyloader, sources
from . import memory as mlx_memory
from . import spec as mlx_spec
from .memory import MlxMemory, evaluate, mx_dtype, poison_value

_MODULE = "ksearch_mlx_candidate"
_DEVICES = {"mlx": "gpu", "mlx:gpu": "gpu", "gpu": "gpu", "mlx:cpu": "cpu", "cpu": "cpu"}


def import_mlx():
    """mlx.core, imported with full-precision float32 products; SetupError when absent."""
    os.environ["MLX_ENABLE_TF32"] = "0"
    try:
        import mlx.core as mx
    except ImportError as e:
        raise SetupError(
            f"the mlx backend needs MLX in the harness's Python (KSEARCH_PYTHON=/path/to/python "
            f"selects it): {sys.executable} cannot import mlx.core ({e}); install it with pip: "
            f"'mlx' on Apple Silicon, 'mlx[cuda13]' on Linux with an NVIDIA GPU, 'mlx[cpu]' for "
            f"launchers on the CPU", missing="mlx") from None
    return mx


def gpu_dialects(mx):
    """The kernel dialects this MLX build can run on a GPU."""
    found = []
    if getattr(getattr(mx, "metal", None), "is_available", lambda: False)():
        found.append("metal")
    if getattr(getattr(mx, "cuda", None), "is_available", lambda: False)():
        found.append("cuda")
    return found


class Backend:
    name = "mlx"
    bfloat16_as_float32 = True  # drawn in float32, rounded by MLX
    time_pairs = staticmethod(mlx_memory.time_pairs)

    def __init__(self):
        self.compiler = None
        self.mx = None
        self.dialect = None
        self.on_gpu = False
        self.mem = None
        self._request = None
        self._spec = None      # mlx_spec.KernelSpec or LauncherSpec, after build
        self._folder = None
        self._launcher = pyloader.LoadOnce("launcher", self._import)  # a launcher's entry
        self._kernels = {}     # shared memory size -> the mx.fast kernel object
        self._failed = {}      # template and launch key -> reason of a failed first call

    # ---- the device ---------------------------------------------------------------------------

    def prepare_build(self, request):
        """Harness mode `build`: what `build` reads (the request, the dialect), without MLX or a
        device: the candidate is checked as it would be before a run."""
        self._request = request
        device = request.get("device") or {}
        kind = _DEVICES.get(device.get("name") or "mlx:gpu")
        if kind is None:
            raise SetupError(f"unknown device {device.get('name')!r} for the mlx backend; "
                             f"expected mlx:gpu or mlx:cpu")
        self.dialect = (device.get("dialect") or mlx_spec.platform_dialect()) \
            if kind == "gpu" else None

    def open(self, request):
        self._request = request
        device = request.get("device") or {}
        name = device.get("name") or "mlx:gpu"
        kind = _DEVICES.get(name)
        if kind is None:
            raise SetupError(f"unknown device {name!r} for the mlx backend; expected mlx:gpu "
                             f"(Metal on macOS, CUDA on Linux) or mlx:cpu")
        asked = device.get("dialect")
        if asked is not None and asked not in mlx_spec.DIALECTS:
            raise SetupError(f"unknown kernel dialect {asked!r}; expected "
                             f"{' or '.join(mlx_spec.DIALECTS)}")
        dialect = (asked or mlx_spec.platform_dialect()) if kind == "gpu" else None
        # The candidate is checked before MLX is imported or a GPU required: what is wrong with
        # it is the first thing said, wherever it is evaluated.
        problem = _problem(request, dialect)
        try:
            mx = self.mx = import_mlx()
        except SetupError as e:
            if problem is None:
                raise
            raise SetupError(f"{problem}\n(the candidate was checked before MLX; to run it, the "
                             f"harness would also need MLX: {e.message})", missing="mlx") from None
        if kind == "gpu":
            have = gpu_dialects(mx)
            self.dialect = dialect
            if dialect in have:
                self.on_gpu = True
                mx.set_default_device(mx.gpu)
            elif problem is None:
                raise SetupError(
                    f"MLX {mx.__version__} in {sys.executable} cannot run {dialect} kernels on a "
                    f"GPU (this build has: {', '.join(have) or 'no GPU backend'}); "
                    + ("install mlx[cuda13] (MLX's CUDA backend) with an NVIDIA driver"
                       if dialect == "cuda" else "Metal kernels run only on Apple Silicon")
                    + ", or evaluate Python launchers on mlx:cpu")
            else:
                # The candidate fails its checks anyway: build() reports that as its compile
                # error; until then (the reference's vetting) MLX's CPU serves.
                mx.set_default_device(mx.cpu)
        else:
            mx.set_default_device(mx.cpu)

    def describe(self):
        mx = self.mx
        info = {}
        try:
            info = dict(mx.device_info())
        except Exception:  # noqa: BLE001 - older MLX: no device_info; the rest still describes
            pass
        return {"kind": "mlx", "mlx": mx.__version__, "dialect": self.dialect,
                "device": "gpu" if self.on_gpu else "cpu", "name": info.get("device_name"),
                "architecture": info.get("architecture"),
                "memory_bytes": info.get("memory_size") or info.get("total_memory")}

    def memory(self, spec, reference):
        self.mem = MlxMemory(self.mx, spec, reference.mlx is not None, self.on_gpu)
        return self.mem

    def device_room(self):
        if not self.on_gpu:
            return None
        total = self.describe().get("memory_bytes")
        if not isinstance(total, int) or total <= 0:
            return None
        return total, f"the {total / (1 << 30):.3g} GiB of the device's memory"

    def sanitizer(self, settings):
        if settings:
            raise TaskError("sanitize", "the mlx backend has no sanitizer (compute-sanitizer "
                                        "watches CUDA programs that ksearch compiles itself); "
                                        "evaluate without --sanitize")
        return None

    def check_definition(self, spec):
        for t in spec.inputs + spec.outputs:
            name = t.dtype_name
            if name == "float64" and not self.on_gpu:
                continue
            if name not in mlx_spec.DTYPES:
                where = "on the GPU" if name == "float64" else "in mx.fast kernels"
                raise TaskError(f"{t.field}.dtype", f"dtype {name} is not supported by backend "
                                                    f"mlx {where} ('{t.name}')")
        for t in spec.outputs:
            if t.dtype_name == "bool":
                raise TaskError(f"{t.field}.dtype", (
                    f"backend mlx cannot check bool output '{t.name}': MLX allocates outputs, "
                    f"and the only poison it can put there (init_value) is a valid bool, so an "
                    f"unwritten element could not be told from a written one"))

    # ---- build and load -----------------------------------------------------------------------

    def build(self, candidate, workdir, limits):
        """Check the candidate fully (no MLX call): the launch spec against the definition and
        every workload, or the launcher's syntax; write the sources to the build folder."""
        start = time.perf_counter()
        request = dict(self._request or {}, candidate=candidate)
        try:
            checked, spec, launches = check_candidate(request, self.dialect)
            folder = os.path.join(workdir, "build")
            os.makedirs(folder)
            sources.write(checked.sources, folder)
            if isinstance(spec, mlx_spec.LauncherSpec):
                log = (f"launcher {spec.file}::{spec.symbol}: syntax checked "
                       f"({', '.join(p for p, _ in checked.sources)})")
            else:
                log = _describe_kernel(spec, launches)
        except ValueError as e:
            return {"ok": False, "seconds": time.perf_counter() - start, "command": [],
                    "log": str(e)}
        self._spec, self._folder = spec, folder
        version = f"MLX {self.mx.__version__}" if self.mx is not None else "MLX (build only)"
        self.compiler = (f"{version}, mx.fast.{spec.dialect}_kernel"
                         if isinstance(spec, mlx_spec.KernelSpec) else
                         f"{version}, Python {sys.version.split()[0]}")
        return {"ok": True, "seconds": time.perf_counter() - start, "command": [], "log": log}

    def load(self, spec):
        if isinstance(self._spec, mlx_spec.LauncherSpec):
            self._launcher.get(self._folder)

    def prepare(self, spec, axes):
        if isinstance(self._spec, mlx_spec.LauncherSpec):
            return _LauncherRun(self.mx, self._launcher.get(self._folder), spec, self._folder)
        launch = self._spec.launch(axes)
        return _KernelRun(self, self._kernel(launch.shared_memory), launch, spec)

    def _kernel(self, shared_memory):
        """The mx.fast kernel object (construction compiles nothing; the first call does)."""
        if shared_memory not in self._kernels:
            ks, fast = self._spec, self.mx.fast
            common = dict(name=ks.kernel_name, input_names=list(ks.inputs),
                          output_names=[o.name for o in ks.outputs], source=ks.source,
                          header=ks.header, ensure_row_contiguous=ks.ensure_row_contiguous)
            try:
                if ks.dialect == "cuda":
                    kernel = fast.cuda_kernel(**common, shared_memory=shared_memory)
                else:
                    kernel = fast.metal_kernel(**common, atomic_outputs=ks.atomic_outputs)
            except Exception as e:  # noqa: BLE001 - MLX refused the kernel's description
                raise CandidateError("runtime_error", f"mx.fast.{ks.dialect}_kernel refused the "
                                                      f"kernel: {_text(e)}") from None
            self._kernels[shared_memory] = kernel
        return self._kernels[shared_memory]

    def _import(self):
        spec = self._spec
        entry = pyloader.import_symbol(self._folder, spec.file, _MODULE, spec.symbol)
        if entry is None:
            raise CandidateError("runtime_error", f"{spec.file} defines no '{spec.symbol}'")
        if inspect.isclass(entry) or not callable(entry):
            raise CandidateError("runtime_error", (
                f"'{spec.symbol}' in {spec.file} is a {type(entry).__name__}; the launcher's "
                f"entry is a function taking the inputs and returning the outputs"))
        return entry


class _KernelRun:
    """One workload's launches of the candidate's kernel."""

    def __init__(self, backend, kernel, launch, definition):
        self._backend, self._kernel, self._launch = backend, kernel, launch
        self._spec, self._definition = backend._spec, definition
        mx = backend.mx
        self.mx = mx
        ks = self._spec
        self._template = [(name, mx_dtype(mx, v) if kind == "dtype" else v)
                          for name, kind, v in launch.template]
        self._dtypes = [mx_dtype(mx, o.dtype) for o in ks.outputs]
        self._poison = poison_value([o.dtype for o in ks.outputs])
        # A failed first call is remembered by everything that determines the compiled kernel.
        self._key = (launch.shared_memory, tuple(launch.template))

    def bind(self, inputs, outputs):
        mx, by_name = self.mx, {}
        for t, v in zip(self._definition.inputs, inputs):
            if t.is_scalar:  # a 0-d array of the definition's dtype, made outside any timing
                v = mx.array(v.item() if hasattr(v, "item") else v,
                             dtype=mx_dtype(mx, t.dtype_name))
            by_name[t.name] = v
        args = [by_name[n] for n in self._spec.inputs]
        evaluate(mx, args)
        return _Call(self, args)

    def launch(self, args, init_value):
        failed = self._backend._failed.get(self._key)
        if failed is not None:
            raise CandidateError("runtime_error", failed)
        ks, launch, mx = self._spec, self._launch, self.mx
        try:
            outputs = self._kernel(inputs=args, template=self._template, grid=launch.grid,
                                   threadgroup=launch.threadgroup,
                                   output_shapes=launch.output_shapes, output_dtypes=self._dtypes,
                                   init_value=init_value)
            mx.eval(outputs)
        except Exception as e:  # noqa: BLE001 - compilation or launch of the candidate's kernel
            reason = (f"the kernel {ks.kernel_name} (mx.fast.{ks.dialect}_kernel) failed to "
                      f"compile or launch: {_text(e)}")
            self._backend._failed.setdefault(self._key, reason)
            raise CandidateError("runtime_error", reason) from None
        return outputs

    def results(self, raw, outputs, shapes):
        by_name = dict(zip((o.name for o in self._spec.outputs), raw))
        return [by_name[t.name] for t in self._definition.outputs]

    def lazy(self, inputs):
        """The outputs as unevaluated MLX arrays, for use inside a model (load_callable)."""
        mx, by_name = self.mx, {}
        for t, v in zip(self._definition.inputs, inputs):
            by_name[t.name] = v if isinstance(v, mx.array) else \
                mx.array(v, dtype=mx_dtype(mx, t.dtype_name))
        launch = self._launch
        raw = self._kernel(inputs=[by_name[n] for n in self._spec.inputs],
                           template=self._template, grid=launch.grid,
                           threadgroup=launch.threadgroup, output_shapes=launch.output_shapes,
                           output_dtypes=self._dtypes, init_value=self._spec.init_value)
        return self.results(raw, None, None)


class _Call:
    """A zero-argument call of the kernel; `checked()` is the correctness form, with poisoned
    outputs (init_value) unless the spec sets its own init_value."""

    def __init__(self, run, args):
        self._run, self._args = run, args

    def __call__(self):
        return self._run.launch(self._args, self._run._spec.init_value)

    def checked(self):
        own = self._run._spec.init_value
        return self._run.launch(self._args, self._run._poison if own is None else own)


class _LauncherRun:
    """The launcher called as entry(*inputs): MLX arrays, scalars as Python numbers."""

    def __init__(self, mx, function, definition, folder):
        self.mx, self._function, self._definition, self._folder = mx, function, definition, folder

    def bind(self, inputs, outputs):
        values = [v.item() if isinstance(v, np.generic) else v for v in inputs]
        function, folder, mx = self._function, self._folder, self.mx

        def call():
            try:
                returned = function(*values)
                evaluate(mx, returned)
            except (Exception, SystemExit) as e:  # noqa: BLE001 - the candidate's failure
                raise CandidateError("runtime_error", f"the launcher raised "
                                                      f"{pyloader.describe(e, folder)}") from None
            return returned
        return call

    def results(self, raw, outputs, shapes):
        mx, spec = self.mx, self._definition
        values = pyloader.returned_values(raw, spec.outputs, "the launcher")
        for value, t, shape in zip(values, spec.outputs, shapes):
            if not isinstance(value, mx.array):
                raise CandidateError("incorrect_dtype", f"output '{t.name}' is a "
                                                        f"{type(value).__name__}, not an "
                                                        f"mlx.core.array")
            if tuple(value.shape) != tuple(shape):
                raise CandidateError("incorrect_shape", f"output '{t.name}' has shape "
                                                        f"{list(value.shape)}, expected "
                                                        f"{list(shape)}")
            expected = mx_dtype(mx, t.dtype_name)
            if value.dtype != expected:
                raise CandidateError("incorrect_dtype", f"output '{t.name}' has dtype "
                                                        f"{value.dtype}, expected {expected}")
        return values


    def lazy(self, inputs):
        returned = self._function(*inputs)
        return list(returned) if isinstance(returned, (tuple, list)) else [returned]


def check_candidate(request, dialect):
    """The request's candidate checked in full without MLX, for `dialect` (None: MLX's CPU
    device, where a kernel is checked for each of its dialects, then refused): (the checked
    sources, mlx_spec's spec, the launches of every workload). A ValueError says what is wrong."""
    checked = sources.check(request.get("candidate"), "mlx", mlx_spec.SPEC_SUFFIXES + (".py",),
                            "launch spec (.toml, .json) or Python launcher (.py)",
                            kind="an identifier", example="launch.toml")
    definition = Spec(request.get("definition"))
    spec, launches = mlx_spec.check(checked, definition, dialect, request.get("workloads") or [])
    if isinstance(spec, mlx_spec.LauncherSpec):
        sources.check_python_syntax(checked.sources)
    return checked, spec, launches


def _problem(request, dialect):
    """What check_candidate finds wrong with an evaluation's candidate, or None (also where the
    definition itself is at fault: evaluate reports that as the task's error next)."""
    if request.get("mode", "evaluate") != "evaluate" or request.get("candidate") is None:
        return None
    try:
        check_candidate(request, dialect)
    except ValueError as e:
        return str(e)
    except TaskError:
        return None
    return None


def load_callable(candidate, definition, dialect=None):
    """A function(*inputs) -> [outputs] for a checked candidate, outside an evaluation (the
    bench scripts patch found kernels into models with it). `candidate` is a request's
    candidate object; inputs are MLX arrays in definition order (scalars as numbers), and the
    var axes are read off their shapes. MLX must be imported by the caller's process."""
    import tempfile
    backend = Backend()
    backend.mx = import_mlx()
    backend.dialect = dialect or mlx_spec.platform_dialect()
    backend.on_gpu = True
    spec = Spec(definition)
    backend._request = {"definition": definition, "workloads": []}
    folder = tempfile.mkdtemp(prefix="ksearch-mlx-")
    built = backend.build(candidate, folder, {})
    if not built["ok"]:
        raise ValueError(built["log"])
    mx = backend.mx
    runs = {}

    def call(*inputs):
        shapes = [tuple(v.shape) if isinstance(v, mx.array) else None for v in inputs]
        axes = mlx_spec.axes_from_shapes(spec, shapes)
        key = tuple(sorted(axes.items()))
        if key not in runs:
            runs[key] = backend.prepare(spec, axes)
        return runs[key].lazy(list(inputs))
    return call


def candidate_at(path, symbol):
    """A request's candidate object from files on disk, for load_callable: a launch spec
    (.toml, .json) or launcher (.py) with the files beside it, a folder holding one (a run's
    best/ folder, or the run folder itself), or a Solution JSON (a .json file with `sources`)."""
    if os.path.isdir(path):
        folder = os.path.join(path, "best") if os.path.isdir(os.path.join(path, "best")) else path
        names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
        entries = [n for n in names if n.endswith(mlx_spec.SPEC_SUFFIXES + (".py",))]
        if len(entries) != 1:
            raise ValueError(f"{folder}: expected one launch spec or launcher, found "
                             f"{', '.join(entries) or 'none'}")
        entry = entries[0]
    else:
        folder, entry = os.path.dirname(path) or ".", os.path.basename(path)
        if entry.endswith(".json"):
            with open(path) as f:
                document = json.load(f)
            if isinstance(document, dict) and "sources" in document:  # a Solution JSON
                return {"language": "mlx", "sources": document["sources"],
                        "entry_point": document["spec"]["entry_point"]}
        names = [n for n in sorted(os.listdir(folder))
                 if os.path.isfile(os.path.join(folder, n))
                 and (n == entry or not n.endswith(mlx_spec.SPEC_SUFFIXES + (".py",)))]
    files = []
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                files.append({"path": name, "content": f.read()})
        except UnicodeDecodeError:
            continue  # not a source
    return {"language": "mlx", "sources": files, "entry_point": f"{entry}::{symbol}"}


def _describe_kernel(spec, launches):
    lines = [f"kernel {spec.kernel_name}: {spec.dialect} body of {len(spec.source)} characters"
             f"{f', header of {len(spec.header)}' if spec.header else ''}, from {spec.file}",
             f"inputs {', '.join(spec.inputs)}; outputs "
             + ", ".join(f"{o.name} ({o.dtype}{', scratch' if o.scratch else ''})"
                         for o in spec.outputs)]
    for i, launch in enumerate(launches):
        template = ", ".join(f"{n}={v}" for n, _, v in launch.template)
        lines.append(f"workload {i}: grid {list(launch.grid)} threadgroup "
                     f"{list(launch.threadgroup)}" + (f" template {template}" if template else "")
                     + (f" shared_memory {launch.shared_memory}" if launch.shared_memory else ""))
    lines.append("compiled by MLX at the first call (a correctness call)")
    return "\n".join(lines)


def _text(error, limit=4000):
    text = str(error).strip() or type(error).__name__
    return text if len(text) <= limit else text[:limit] + " [...]"
