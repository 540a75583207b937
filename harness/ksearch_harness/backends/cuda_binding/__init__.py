"""Backend `cuda_binding`: FlashInfer-Bench's CUDA solution built through its binding (tvm-ffi,
the default, or torch) into an extension module by cpp/build.py, nvcc compiling the .cu files
for the device's arch (or the request's `build.arch`; sm_90 for a build without a device), and
its entry called with torch tensors on a CUDA device: the inputs in definition order (scalars
as Python numbers), then the outputs when destination-passing, else it returns them. tvm-ffi
takes the torch tensors through DLPack. Arrays, timing and the sanitizer are torch_gpu's.
"""

from ...errors import CandidateError, TaskError
from ..common.native import SCALARS as _SCALARS
from ..cpp import build as binding_build
from ..torch_gpu import GpuBackend
from ..torch_gpu import device as gpu


class Backend(GpuBackend):
    name = "cuda_binding"

    def __init__(self):
        super().__init__()
        self._built = None
        self._function = None
        self._load_error = None

    def check_definition(self, spec):
        super().check_definition(spec)
        for t in spec.inputs:
            if t.is_scalar and t.dtype_name not in _SCALARS:
                raise TaskError(f"{t.field}.dtype", f"backend cuda_binding cannot pass scalar "
                                                    f"input '{t.name}' of dtype {t.dtype_name}")

    def build(self, candidate, workdir, limits, arch=None):
        if arch is None and self.device is not None and self.device.type == "cuda":
            arch = (candidate or {}).get("build", {}).get("arch") or self.arch()
        result, built, tools = binding_build.compile_module(candidate, workdir, limits,
                                                            "cuda_binding", self.name,
                                                            arch=arch, cuda=True)
        if tools is not None:
            self.compiler = tools.get("nvcc")
        if built is not None:
            self._built = built
        return result

    def load(self, spec):
        self._load()

    def prepare(self, spec, axes):
        function = self._load()
        torch, binding = self.torch, self._built.binding

        def from_result(v):
            if isinstance(v, torch.Tensor):
                return v
            try:
                return torch.from_dlpack(v)
            except Exception:  # noqa: BLE001 - not a tensor: reported by check
                return v

        def check(value, t, shape):
            if not isinstance(value, torch.Tensor):
                raise CandidateError("incorrect_dtype", f"output '{t.name}' is a "
                                                        f"{type(value).__name__}, not a tensor")
            if value.device != self.mem.device:
                raise CandidateError("runtime_error", f"output '{t.name}' is on {value.device}, "
                                                      f"not on {self.mem.device}")
            if tuple(value.shape) != tuple(shape):
                raise CandidateError("incorrect_shape", f"output '{t.name}' has shape "
                                                        f"{list(value.shape)}, expected "
                                                        f"{list(shape)}")
            expected = gpu.torch_dtype(torch, t.dtype_name)
            if value.dtype != expected:
                raise CandidateError("incorrect_dtype", f"output '{t.name}' has dtype "
                                                        f"{value.dtype}, expected {expected}")

        del binding  # tvm-ffi and torch both take torch tensors as they are
        return binding_build.Kernel(function, spec, self._built.dps,
                                    [t.is_scalar for t in spec.inputs], lambda a: a,
                                    from_result, check)

    def _load(self):
        if self._function is None and self._load_error is None:
            self._function, self._load_error = binding_build.load(self._built)
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function
