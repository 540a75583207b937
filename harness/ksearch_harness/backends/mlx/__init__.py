"""Backend `mlx`: kernels run through MLX, on an Apple GPU (Metal) or an NVIDIA GPU (MLX's CUDA
backend), and Python launchers of MLX operations (also on MLX's CPU device).

The candidate format is spec.py's (docs/mlx.md): a launch spec that becomes one
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

import os
import sys

from ...definition import Spec
from ...errors import SetupError, TaskError
from ..base import Backend as Base
from ..common import pyloader
from . import build, timing
from . import spec as mlx_spec
from .build import candidate_at  # noqa: F401 - for the bench scripts, with load_callable
from .memory import MlxMemory

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


class Backend(Base):
    name = "mlx"
    bfloat16_as_float32 = True  # drawn in float32, rounded by MLX

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
        problem = build.problem(request, dialect)
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

    def build(self, candidate, workdir, limits, arch=None):
        """Check the candidate fully (no MLX call): the launch spec against the definition and
        every workload, or the launcher's syntax; write the sources to the build folder."""
        request = dict(self._request or {}, candidate=candidate)
        result, built = build.check_and_write(request, self.dialect, workdir)
        if built is not None:
            self._spec, self._folder = built
            self.compiler = build.compiler(self.mx, self._spec)
        return result

    def load(self, spec):
        if isinstance(self._spec, mlx_spec.LauncherSpec):
            self._launcher.get(self._folder)

    def prepare(self, spec, axes):
        if isinstance(self._spec, mlx_spec.LauncherSpec):
            return build.LauncherRun(self.mx, self._launcher.get(self._folder), spec,
                                     self._folder)
        launch = self._spec.launch(axes)
        return build.KernelRun(self, self._kernel(launch.shared_memory), launch, spec)

    def time_pairs(self, session, settings):
        return timing.time_pairs(session, settings)

    def _kernel(self, shared_memory):
        """The mx.fast kernel object (construction compiles nothing; the first call does)."""
        if shared_memory not in self._kernels:
            self._kernels[shared_memory] = build.make_kernel(self.mx.fast, self._spec,
                                                             shared_memory)
        return self._kernels[shared_memory]

    def _import(self):
        return build.import_launcher(self._folder, self._spec)


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
