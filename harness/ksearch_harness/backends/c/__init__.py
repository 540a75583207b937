"""Backend `c`: the candidate is C11 compiled to a shared library and called through ctypes.

Calling convention (docs/protocol.md): inputs in definition order (arrays as pointers to
contiguous data, scalars by value), then outputs as pointers, then every var axis as int64_t.
Compiled with -O3 -march=native -std=c11 -ffp-contract=fast (FMA contraction on; see _FLAGS).

On Linux the library is loaded and called in the worker process forked at start-up (worker.py,
worker_memory.py), never in the harness's own; elsewhere (or with KSEARCH_IN_PROCESS=1) in this
process, as the GPU backends do.
"""

import ctypes
import functools
import os
import shlex
import subprocess
import time

from ... import timing, worker
from ...errors import CandidateError, TaskError
from ...memory import HostMemory
from ..common import sources
from . import cpu_info
from . import memory as worker_memory

_SCALARS = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "bool": ctypes.c_bool, "int16": ctypes.c_int16,
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8,
}
_ARRAYS = set(_SCALARS) | {"float16"}
# -std=c11 alone makes GCC stop contracting a*b+c into fused multiply-adds (ISO C mode implies
# -ffp-contract=off), which silently kept every candidate off the FMA units; contraction is
# chosen here explicitly. The correctness check compares with the float64 reference within
# the task's tolerance, which a fused or an unfused product meets alike. ksearch states these
# flags in the prompts (crates/run/src/contract/c.rs, whose tests keep the two lists equal).
_FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-std=c11", "-ffp-contract=fast"]
_LIBRARY = sources.LIBRARY


class Backend:
    name = "c"
    time_pairs = staticmethod(timing.time_pairs)
    bfloat16_as_float32 = False  # no bfloat16 on the host

    def __init__(self):
        self.compiler = None
        self._library = None  # path of the built .so
        self._symbol = None
        self._entry = None
        self._function = None
        self._load_error = None
        self._worker = None
        self._memory = None

    def open(self, request):
        """Nothing to claim; the candidate runs in the worker where there is one."""
        self._worker = worker.take()
        if self._worker is not None:
            self.time_pairs = worker_memory.time_pairs

    def describe(self):
        """The CPU the candidate runs on (cpu_info.py): `done.environment.device`."""
        return cpu_info.describe()

    def memory(self, spec, reference):
        if self._worker is not None:
            self._memory = worker_memory.SharedMemory(self._worker)
            return self._memory
        return HostMemory()

    def device_room(self):
        return None

    def sanitizer(self, settings):
        if settings:
            raise TaskError("sanitize", "compute-sanitizer checks GPU kernels; backend c has "
                                        "none (leave sanitize unset)")
        return None

    def check_definition(self, spec):
        for t in spec.inputs + spec.outputs:
            if t.dtype_name not in _ARRAYS:
                raise TaskError(f"{t.field}.dtype", f"dtype {t.dtype_name} is not supported by "
                                                    f"backend c ('{t.name}')")
        for t in spec.inputs:
            if t.is_scalar and t.dtype_name not in _SCALARS:
                raise TaskError(f"{t.field}.dtype", f"backend c cannot pass scalar input "
                                                    f"'{t.name}' of dtype {t.dtype_name} by value")

    # ---- build -------------------------------------------------------------------------------

    def build(self, candidate, workdir, limits):
        cc = shlex.split(os.environ.get("CC") or "cc")
        self.compiler = _version(cc)
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
            return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}
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
        if ok:
            self._library = os.path.join(build, _LIBRARY)
            self._symbol = checked.symbol
            self._entry = checked.entry
        return {"ok": ok, "seconds": seconds, "command": command, "log": text}

    # ---- call --------------------------------------------------------------------------------

    def load(self, spec):
        """Load the built library (this runs the candidate's constructors) and find the entry.

        Raises CandidateError (runtime_error) when that fails; later calls raise it again.
        """
        self._load(spec)

    def prepare(self, spec, axes):
        if self._worker is not None:
            self._load(spec)
            scalars = [t.dtype_name if t.is_scalar else None for t in spec.inputs]
            return worker_memory.WorkerKernel(self._memory, scalars,
                                              [axes[name] for name in spec.var])
        function = self._load(spec)
        kinds = [_SCALARS[t.dtype_name] if t.is_scalar else None for t in spec.inputs]
        axis_args = tuple(ctypes.c_int64(axes[name]) for name in spec.var)
        return _Kernel(function, kinds, axis_args)

    def _load(self, spec):
        if self._worker is not None:
            return self._load_in_worker(spec)
        if self._function is None and self._load_error is None:
            try:
                library = ctypes.CDLL(self._library)  # runs the candidate's constructors
            except OSError as e:
                self._load_error = f"loading the compiled candidate failed: {e}"
            except Exception as e:  # noqa: BLE001 - e.g. MemoryError after its constructors ran
                self._load_error = (f"loading the compiled candidate failed: "
                                    f"{type(e).__name__}: {e}")
            else:
                try:
                    function = getattr(library, self._symbol)
                except AttributeError:
                    self._load_error = (
                        f"the compiled candidate does not export the entry symbol "
                        f"'{self._symbol}' (entry_point {self._entry!r}); define a non-static "
                        f"function with exactly that name")
                else:
                    function.argtypes = (
                        [_SCALARS[t.dtype_name] if t.is_scalar else ctypes.c_void_p
                         for t in spec.inputs]
                        + [ctypes.c_void_p] * len(spec.outputs)
                        + [ctypes.c_int64] * len(spec.var))
                    function.restype = None
                    self._function = function
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function


    def _load_in_worker(self, spec):
        if self._function is None and self._load_error is None:
            kinds = ([t.dtype_name if t.is_scalar else "pointer" for t in spec.inputs]
                     + ["pointer"] * len(spec.outputs) + ["int64"] * len(spec.var))
            try:
                self._worker.load(self._library, self._symbol, kinds,
                                  os.path.dirname(self._library), self._missing_symbol())
                self._function = self._worker
            except CandidateError as e:
                self._load_error = e.reason
        if self._worker.dead is not None:
            raise CandidateError(self._worker.status, f"not run: {self._worker.dead}")
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function

    def _missing_symbol(self):
        return (f"the compiled candidate does not export the entry symbol '{self._symbol}' "
                f"(entry_point {self._entry!r}); define a non-static function with exactly "
                f"that name")


class _Kernel:
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
