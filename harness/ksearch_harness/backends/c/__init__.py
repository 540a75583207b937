"""Backend `c`: the candidate is C11 compiled to a shared library and called through ctypes.

Calling convention (docs/protocol.md): inputs in definition order (arrays as pointers to
contiguous data, scalars by value), then outputs as pointers, then every var axis as int64_t.
Compiled with -O3 -march=native -std=c11 -ffp-contract=fast (FMA contraction on; see
build.py's _FLAGS).

On Linux the library is loaded and called in the worker process forked at start-up (worker.py,
memory.py), never in the harness's own; elsewhere (or with KSEARCH_IN_PROCESS=1) in this
process, as the GPU backends do.
"""

import ctypes

from ... import worker
from ...errors import CandidateError, TaskError
from ...memory import HostMemory
from ..base import Backend as Base
from ..common.native import SCALARS as _SCALARS
from . import build, cpu_info, timing
from .memory import SharedMemory

_ARRAYS = set(_SCALARS) | {"float16"}


class Backend(Base):
    name = "c"
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

    def describe(self):
        """The CPU the candidate runs on (cpu_info.py): `done.environment.device`."""
        return cpu_info.describe()

    def memory(self, spec, reference):
        if self._worker is not None:
            self._memory = SharedMemory(self._worker)
            return self._memory
        return HostMemory()

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

    def build(self, candidate, workdir, limits, arch=None):
        result, self.compiler, built = build.compile_library(candidate, workdir, limits)
        if built is not None:
            self._library, self._symbol, self._entry = built
        return result

    def load(self, spec):
        """Load the built library (this runs the candidate's constructors) and find the entry.

        Raises CandidateError (runtime_error) when that fails; later calls raise it again.
        """
        self._load(spec)

    def prepare(self, spec, axes):
        if self._worker is not None:
            self._load(spec)
            scalars = [t.dtype_name if t.is_scalar else None for t in spec.inputs]
            return build.WorkerKernel(self._memory, scalars, [axes[name] for name in spec.var])
        function = self._load(spec)
        kinds = [_SCALARS[t.dtype_name] if t.is_scalar else None for t in spec.inputs]
        axis_args = tuple(ctypes.c_int64(axes[name]) for name in spec.var)
        return build.Kernel(function, kinds, axis_args)

    def time_pairs(self, session, settings):
        if self._worker is not None:
            return timing.in_worker(session, settings)
        return timing.time_pairs(session, settings)

    def _load(self, spec):
        if self._worker is not None:
            return self._load_in_worker(spec)
        if self._function is None and self._load_error is None:
            self._function, self._load_error = build.load_library(self._library, self._symbol,
                                                                  self._entry, spec)
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function

    def _load_in_worker(self, spec):
        if self._function is None and self._load_error is None:
            self._function, self._load_error = build.load_in_worker(
                self._worker, self._library, self._symbol, self._entry, spec)
        if self._worker.dead is not None:
            raise CandidateError(self._worker.status, f"not run: {self._worker.dead}")
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function
