"""Backend mlx's build and load: the candidate checked in full without MLX (a launch spec against
the definition and every workload, or a launcher's syntax: spec.py) and written to the build
folder; at load, a launcher's module run once, or the mx.fast kernel object made (MLX compiles
it at its first call, a correctness call); and its call, `KernelRun` or `LauncherRun`.
`candidate_at` reads a candidate from files for load_callable (bench scripts).
"""

import inspect
import json
import os
import sys
import time

import numpy as np

from ...definition import Spec
from ...errors import CandidateError, TaskError
from ..common import pyloader, sources
from . import spec as mlx_spec
from .memory import evaluate, mx_dtype, poison_value

_MODULE = "ksearch_mlx_candidate"


def check_and_write(request, dialect, workdir):
    """Check the candidate fully (no MLX call): the launch spec against the definition and
    every workload, or the launcher's syntax; write the sources to the build folder. Returns
    (the `compile` event's fields, (spec.py's spec, the folder) when checked, else None)."""
    start = time.perf_counter()
    try:
        checked, spec, launches = check_candidate(request, dialect)
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
                "log": str(e)}, None
    return {"ok": True, "seconds": time.perf_counter() - start, "command": [],
            "log": log}, (spec, folder)


def compiler(mx, spec):
    """The `done` event's compiler for a built candidate (`mx`: None in mode build)."""
    version = f"MLX {mx.__version__}" if mx is not None else "MLX (build only)"
    return (f"{version}, mx.fast.{spec.dialect}_kernel"
            if isinstance(spec, mlx_spec.KernelSpec) else
            f"{version}, Python {sys.version.split()[0]}")


def make_kernel(fast, ks, shared_memory):
    """The mx.fast kernel object of KernelSpec `ks` (construction compiles nothing; the first
    call does); `fast` is mx.fast."""
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
    return kernel


def import_launcher(folder, spec):
    """Run a launcher's module (its code runs here) and return its entry function."""
    entry = pyloader.import_symbol(folder, spec.file, _MODULE, spec.symbol)
    if entry is None:
        raise CandidateError("runtime_error", f"{spec.file} defines no '{spec.symbol}'")
    if inspect.isclass(entry) or not callable(entry):
        raise CandidateError("runtime_error", (
            f"'{spec.symbol}' in {spec.file} is a {type(entry).__name__}; the launcher's "
            f"entry is a function taking the inputs and returning the outputs"))
    return entry


class KernelRun:
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


class LauncherRun:
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
            # Exactly an array: a subclass could answer for its shape, its dtype and the
            # arithmetic of the timed calls' checks (checks.py) without holding the values.
            if type(value) is not mx.array:
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
    sources, spec.py's spec, the launches of every workload). A ValueError says what is wrong."""
    checked = sources.check(request.get("candidate"), "mlx", mlx_spec.SPEC_SUFFIXES + (".py",),
                            "launch spec (.toml, .json) or Python launcher (.py)",
                            kind="an identifier", example="launch.toml")
    definition = Spec(request.get("definition"))
    spec, launches = mlx_spec.check(checked, definition, dialect, request.get("workloads") or [])
    if isinstance(spec, mlx_spec.LauncherSpec):
        sources.check_python_syntax(checked.sources)
    return checked, spec, launches


def problem(request, dialect):
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
