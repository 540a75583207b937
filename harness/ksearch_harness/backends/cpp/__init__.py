"""Backend `cpp`: FlashInfer-Bench's C++ solution built through its binding into an extension
module (build.py: tvm-ffi's `tvm_ffi.cpp.build`, the default, or torch's
`torch.utils.cpp_extension.load`), loaded into this process and called on the CPU.

Calling convention (FlashInfer-Bench's): positional, the inputs in definition order (arrays as
contiguous NumPy arrays, which tvm-ffi takes through DLPack as `tvm::ffi::TensorView`, or as
torch CPU tensors sharing their memory for the torch binding; scalars as Python int, float or
bool), then, destination-passing (`destination_passing_style`, the default), the outputs,
preallocated; otherwise the entry returns the output, or a tuple of outputs in definition order.
No var axes are passed: the tensors carry their shapes.

The module runs in the harness's process, not in c's sandboxed worker (which calls plain C
symbols through ctypes); its build runs in a child process, as c's and cuda's do.
"""

import numpy as np

from ...errors import CandidateError, TaskError
from ..base import Backend as Base
from ..c import cpu_info
from ..common.native import SCALARS as _SCALARS
from . import build, memory, timing

_ARRAYS = set(_SCALARS) | {"float16"}


class Backend(Base):
    name = "cpp"
    bfloat16_as_float32 = False  # no bfloat16 NumPy arrays on the host

    def __init__(self):
        self.compiler = None
        self._built = None
        self._function = None
        self._load_error = None
        self._torch = None

    def open(self, request):
        """Nothing to claim: the module runs in this process, on the CPU."""

    def describe(self):
        return cpu_info.describe()

    def check_definition(self, spec):
        for t in spec.inputs + spec.outputs:
            if t.dtype_name not in _ARRAYS:
                raise TaskError(f"{t.field}.dtype", f"dtype {t.dtype_name} is not supported by "
                                                    f"backend cpp ('{t.name}')")

    def memory(self, spec, reference):
        return memory.memory()

    def build(self, candidate, workdir, limits, arch=None):
        result, built, tools = build.compile_module(candidate, workdir, limits, "cpp", self.name)
        if tools is not None:
            self.compiler = ", ".join(f"{k} {v}" for k, v in tools.items() if k != "ninja")
        if built is not None:
            self._built = built
        return result

    def load(self, spec):
        self._load()

    def prepare(self, spec, axes):
        function = self._load()
        torch_binding = self._built.binding == "torch"
        if torch_binding and self._torch is None:
            import torch
            self._torch = torch
        torch = self._torch

        def to_arg(a):
            return torch.from_numpy(a) if torch_binding else a

        def from_result(v):
            if torch_binding and isinstance(v, torch.Tensor):
                return v.detach().cpu().numpy()
            try:
                return np.from_dlpack(v)
            except Exception:  # noqa: BLE001 - not a tensor: reported by check
                return v

        return build.Kernel(function, spec, self._built.dps, [t.is_scalar for t in spec.inputs],
                            to_arg, from_result, _check_host)

    def time_pairs(self, session, settings):
        return timing.time_pairs(session, settings)

    def _load(self):
        if self._function is None and self._load_error is None:
            self._function, self._load_error = build.load(self._built)
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function


def _check_host(value, t, shape):
    if not isinstance(value, np.ndarray):
        raise CandidateError("incorrect_dtype", f"output '{t.name}' is a {type(value).__name__}, "
                                                f"not a tensor")
    if tuple(value.shape) != tuple(shape):
        raise CandidateError("incorrect_shape", f"output '{t.name}' has shape "
                                                f"{list(value.shape)}, expected {list(shape)}")
    if value.dtype != np.dtype(t.dtype):
        raise CandidateError("incorrect_dtype", f"output '{t.name}' has dtype {value.dtype}, "
                                                f"expected {np.dtype(t.dtype)}")
