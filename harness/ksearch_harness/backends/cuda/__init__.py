"""Backend `cuda`: CUDA C++ compiled by nvcc to a shared library and called through ctypes.

Calling convention (docs/protocol.md): the entry is an `extern "C"` host function in
destination-passing style, like backend c's: inputs in definition order (arrays as device
pointers, scalars by value), then outputs as device pointers, then every var axis as int64_t;
it returns void and launches its kernels on the default stream. The harness synchronises the
device after each call, so the kernels need not.
"""

import ctypes

from ...errors import CandidateError, TaskError
from ..common.native import SCALARS as _SCALARS
from ..torch_gpu import GpuBackend
from . import build


class Backend(GpuBackend):
    name = "cuda"
    builds_early = True  # nvcc runs in child processes while torch loads (evaluate.EarlyBuild)

    def __init__(self):
        super().__init__()
        self._library = None
        self._symbol = None
        self._entry = None
        self._function = None
        self._load_error = None

    def check_definition(self, spec):
        super().check_definition(spec)
        for t in spec.inputs:
            if t.is_scalar and t.dtype_name not in _SCALARS:
                raise TaskError(f"{t.field}.dtype", f"backend cuda cannot pass scalar input "
                                                    f"'{t.name}' of dtype {t.dtype_name} by value")

    def build(self, candidate, workdir, limits, arch=None):
        """Compile in a child process; `arch` (or build.arch, else the device's) is nvcc's -arch."""
        result, checked = build.compile_library(candidate, workdir, limits, arch, self.arch)
        if checked is None:
            return result
        self.compiler = result.pop("compiler")
        library = result.pop("library")
        if result["ok"]:
            self._library, self._symbol, self._entry = library, checked.symbol, checked.entry
        return result

    def load(self, spec):
        self._load(spec)

    def prepare(self, spec, axes):
        function = self._load(spec)
        kinds = [_SCALARS[t.dtype_name] if t.is_scalar else None for t in spec.inputs]
        axis_args = tuple(ctypes.c_int64(axes[name]) for name in spec.var)
        return build.Kernel(function, kinds, axis_args)

    def _load(self, spec):
        if self._function is None and self._load_error is None:
            self._function, self._load_error = build.load_library(self._library, self._symbol,
                                                                  self._entry, spec)
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function
