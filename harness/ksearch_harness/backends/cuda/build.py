"""Backend cuda's build and load: the candidate's sources checked, compiled and linked by nvcc in
child processes (nvcc.py: the commands, the import check of imports.py, ptxas's report of
ptxas.py, the build cache), the library loaded into this process with ctypes, and its call
(`Kernel`)."""

import ctypes
import functools
import os

from ...errors import SetupError
from ..common import sources
from ..common.native import SCALARS as _SCALARS
from . import nvcc


def compile_library(candidate, workdir, limits, arch, device_arch):
    """Compile in a child process; `arch` (or build.arch, else `device_arch()`, the device's) is
    nvcc's -arch. Returns (nvcc.build's fields, `compiler` and `library` among them, the checked
    sources), or (the `compile` event's fields, None) for sources that cannot be built."""
    try:
        checked = sources.check(candidate, "cuda", ".cu", ".cu source",
                                kind="a C identifier (an extern \"C\" function)",
                                example="kernel.cu")
    except ValueError as e:
        return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}, None
    arch = arch or checked.build.get("arch") or device_arch()
    cache_dir = checked.build.get("cache_dir")
    try:
        result = nvcc.build(checked, workdir, limits, arch, cache_dir)
    except FileNotFoundError as e:
        named = f" ({e.args[0]!r} is not an executable)" if e.args[0] != "nvcc" else ""
        raise SetupError(f"the cuda backend needs nvcc{named}: set KSEARCH_NVCC or CUDA_HOME, "
                         f"or put nvcc on PATH (pip install nvidia-cuda-nvcc "
                         f"nvidia-cuda-runtime nvidia-cuda-cccl provides one)") from None
    except ValueError as e:  # a source that cannot be written
        return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}, None
    return result, checked


def load_library(path, symbol, entry, spec):
    """(the entry as a ctypes function, None), or (None, why it cannot be loaded). Loading runs
    the library's constructors."""
    try:
        library = ctypes.CDLL(os.path.abspath(path))  # runs its constructors
    except Exception as e:  # noqa: BLE001 - OSError, or MemoryError after constructors
        return None, f"loading the compiled candidate failed: {e}"
    else:
        try:
            function = getattr(library, symbol)
        except AttributeError:
            return None, (
                f"the compiled candidate does not export the entry symbol "
                f"'{symbol}' (entry_point {entry!r}); define it as a host "
                f"function with C linkage: extern \"C\" void {symbol}(...)")
        else:
            function.argtypes = (
                [_SCALARS[t.dtype_name] if t.is_scalar else ctypes.c_void_p
                 for t in spec.inputs]
                + [ctypes.c_void_p] * len(spec.outputs)
                + [ctypes.c_int64] * len(spec.var))
            function.restype = None
            return function, None


class Kernel:
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
