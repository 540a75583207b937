"""Backend c's build and load: the candidate compiled by the C compiler ($CC, default cc) to a
shared library in a child process, loaded with ctypes into the worker (worker.py) or this
process, and its call (`Kernel` in this process, `WorkerKernel` in the worker).

Compiled with -O3 -march=native -std=c11 -ffp-contract=fast (FMA contraction on; see _FLAGS).
"""

import ctypes
import functools
import os
import shlex
import subprocess
import time

from ...errors import CandidateError
from ..common import sources
from ..common.native import SCALARS as _SCALARS

# -std=c11 alone makes GCC stop contracting a*b+c into fused multiply-adds (ISO C mode implies
# -ffp-contract=off), which silently kept every candidate off the FMA units; contraction is
# chosen here explicitly. The correctness check compares with the float64 reference within
# the task's tolerance, which a fused or an unfused product meets alike. ksearch states these
# flags in the prompts (crates/run/src/contract/c.rs, whose tests keep the two lists equal).
_FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-std=c11", "-ffp-contract=fast"]
_LIBRARY = sources.LIBRARY


def compile_library(candidate, workdir, limits):
    """Compile in a child process. Returns (the `compile` event's fields, the compiler's version,
    (the library's path, its entry symbol, the entry point) when it was built, else None)."""
    cc = shlex.split(os.environ.get("CC") or "cc")
    compiler = _version(cc)
    log_bytes = int(limits.get("log_bytes", 65536))
    build = os.path.join(workdir, "build")
    try:
        checked = sources.check(candidate, "c", ".c", ".c source")
        if candidate.get("destination_passing_style", True) is not True:
            raise ValueError("backend c calls kernels in destination-passing style only; set "
                             "destination_passing_style to true and write outputs through "
                             "pointers")
        os.makedirs(build)
        sources.write(checked.sources, build)
    except ValueError as e:
        return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}, compiler, None
    c_files = [p for p, _ in checked.sources if p.endswith(".c")]
    openmp = bool(checked.build.get("openmp", False))
    command = (cc + _FLAGS + (["-fopenmp"] if openmp else []) + checked.extra_flags
               + ["-o", _LIBRARY] + c_files + ["-lm"])
    log_path = os.path.join(workdir, "compile.log")
    timeout = float(limits.get("compile_timeout_s", 30))
    start = time.perf_counter()
    try:
        rc, timed_out = sources.compile_in_child(command, build, log_path, timeout,
                                                 "C compiler")
    except RuntimeError:
        raise RuntimeError(f"C compiler {cc[0]!r} not found; set CC") from None
    seconds = time.perf_counter() - start
    ok, text = sources.outcome_text(sources.bounded(log_path, log_bytes), rc, timed_out,
                                    timeout, os.path.join(build, _LIBRARY))
    built = (os.path.join(build, _LIBRARY), checked.symbol, checked.entry) if ok else None
    return {"ok": ok, "seconds": seconds, "command": command, "log": text}, compiler, built


def load_library(path, symbol, entry, spec):
    """In this process: (the entry as a ctypes function, None), or (None, why it cannot be
    loaded). Loading runs the candidate's constructors."""
    try:
        library = ctypes.CDLL(path)  # runs the candidate's constructors
    except OSError as e:
        return None, f"loading the compiled candidate failed: {e}"
    except Exception as e:  # noqa: BLE001 - e.g. MemoryError after its constructors ran
        return None, (f"loading the compiled candidate failed: "
                      f"{type(e).__name__}: {e}")
    try:
        function = getattr(library, symbol)
    except AttributeError:
        return None, missing_symbol(symbol, entry)
    function.argtypes = (
        [_SCALARS[t.dtype_name] if t.is_scalar else ctypes.c_void_p
         for t in spec.inputs]
        + [ctypes.c_void_p] * len(spec.outputs)
        + [ctypes.c_int64] * len(spec.var))
    function.restype = None
    return function, None


def load_in_worker(worker, path, symbol, entry, spec):
    """In the worker: (the worker, which then calls the entry, None), or (None, why the library
    cannot be loaded there)."""
    kinds = ([t.dtype_name if t.is_scalar else "pointer" for t in spec.inputs]
             + ["pointer"] * len(spec.outputs) + ["int64"] * len(spec.var))
    try:
        worker.load(path, symbol, kinds, os.path.dirname(path), missing_symbol(symbol, entry))
    except CandidateError as e:
        return None, e.reason
    return worker, None


def missing_symbol(symbol, entry):
    return (f"the compiled candidate does not export the entry symbol '{symbol}' "
            f"(entry_point {entry!r}); define a non-static function with exactly "
            f"that name")


class Kernel:
    def __init__(self, function, input_kinds, axis_args):
        self._function = function
        self._input_kinds = input_kinds  # ctypes scalar type, or None for an array
        self._axis_args = axis_args

    def bind(self, inputs, outputs):
        """A zero-argument call with every ctypes argument converted once, up front."""
        args = []
        for kind, value in zip(self._input_kinds, inputs):
            args.append(kind(value.item()) if kind else ctypes.c_void_p(_address(value)))
        for array in outputs:
            args.append(ctypes.c_void_p(_address(array)))
        return functools.partial(self._function, *args, *self._axis_args)

    @staticmethod
    def results(raw, outputs, shapes):
        """Destination-passing style: the outputs are the buffers the harness passed."""
        return outputs


class WorkerKernel:
    """The c backend's kernel when the candidate runs in the worker."""

    def __init__(self, memory, input_dtypes, axis_values):
        self.memory = memory
        self.worker = memory.worker
        self._input_dtypes = input_dtypes  # dtype name for a scalar, None for an array
        self._axes = [["int64", int(v)] for v in axis_values]

    def bind(self, inputs, outputs):
        args = []
        for name, value in zip(self._input_dtypes, inputs):
            if name:
                args.append([name, value.item()])
            else:
                args.append(["array", *self.memory.locate(value)])
        for array in outputs:
            args.append(["array", *self.memory.locate(array)])
        return WorkerCall(self.worker, args + self._axes)

    @staticmethod
    def results(raw, outputs, shapes):
        return outputs


class WorkerCall:
    """One call of the candidate, run by the worker; keeps both clocks' view of it."""

    def __init__(self, worker_, args):
        self.worker, self.args = worker_, args
        self.ns = self.outer_ns = None

    def __call__(self):
        self.ns, self.outer_ns = self.worker.call(self.args)


def _address(array):
    if not array.flags.c_contiguous:
        raise RuntimeError("backend c was handed a non-contiguous array")
    return array.__array_interface__["data"][0]


def _version(cc):
    try:
        out = subprocess.run(cc + ["--version"], capture_output=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else None
