"""Backend `cuda`: CUDA C++ compiled by nvcc to a shared library and called through ctypes.

Calling convention (docs/protocol.md): the entry is an `extern "C"` host function in
destination-passing style, like backend c's: inputs in definition order (arrays as device
pointers, scalars by value), then outputs as device pointers, then every var axis as int64_t;
it returns void and launches its kernels on the default stream. The harness synchronises the
device after each call, so the kernels need not.
"""

import ctypes
import functools
import os

from ...errors import CandidateError, SetupError, TaskError
from ..c import _SCALARS
from ..common import sources
from ..torch_gpu import GpuBackend
from . import nvcc


class Backend(GpuBackend):
    name = "cuda"

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
        try:
            checked = sources.check(candidate, "cuda", ".cu", ".cu source",
                                    kind="a C identifier (an extern \"C\" function)",
                                    example="kernel.cu")
        except ValueError as e:
            return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}
        arch = arch or checked.build.get("arch") or self.arch()
        cache_dir = checked.build.get("cache_dir")
        try:
            result = nvcc.build(checked, workdir, limits, arch, cache_dir)
        except FileNotFoundError as e:
            named = f" ({e.args[0]!r} is not an executable)" if e.args[0] != "nvcc" else ""
            raise SetupError(f"the cuda backend needs nvcc{named}: set KSEARCH_NVCC or CUDA_HOME, "
                             f"or put nvcc on PATH (pip install nvidia-cuda-nvcc "
                             f"nvidia-cuda-runtime nvidia-cuda-cccl provides one)") from None
        except ValueError as e:  # a source that cannot be written
            return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}
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
        return _Kernel(function, kinds, axis_args)

    def _load(self, spec):
        if self._function is None and self._load_error is None:
            try:
                library = ctypes.CDLL(os.path.abspath(self._library))  # runs its constructors
            except Exception as e:  # noqa: BLE001 - OSError, or MemoryError after constructors
                self._load_error = f"loading the compiled candidate failed: {e}"
            else:
                try:
                    function = getattr(library, self._symbol)
                except AttributeError:
                    self._load_error = (
                        f"the compiled candidate does not export the entry symbol "
                        f"'{self._symbol}' (entry_point {self._entry!r}); define it as a host "
                        f"function with C linkage: extern \"C\" void {self._symbol}(...)")
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


class _Kernel:
    # The candidate launches on the legacy default stream, which CUDA cannot capture.
    graph_capturable = False

    def __init__(self, function, input_kinds, axis_args):
        self._function = function
        self._input_kinds = input_kinds  # ctypes scalar type, or None for a device array
        self._axis_args = axis_args

    def bind(self, inputs, outputs):
        """A zero-argument call with every argument converted once, up front."""
        args = []
        for kind, value in zip(self._input_kinds, inputs):
            args.append(kind(value.item()) if kind else ctypes.c_void_p(value.data_ptr()))
        for tensor in outputs:
            args.append(ctypes.c_void_p(tensor.data_ptr()))
        return functools.partial(self._function, *args, *self._axis_args)

    @staticmethod
    def results(raw, outputs, shapes):
        return outputs
