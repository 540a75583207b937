"""What the GPU backends (cuda, triton, python) share: the device, its memory, timing, the
sanitizer's log, and the dtypes a torch tensor can hold.

Not a backend itself (no registry name): the base class of those three, with the same files as
a backend package: device.py (claiming and describing the device), memory.py (TorchMemory),
timing.py (CUDA events and the gate, gate.py), inputs.py (draws on the device), info.py (NVML),
and build.py a stub (each backend builds its own). NumPy is not imported here, only in
memory(): `backends.cuda.nvcc` must import without it (ksearch doctor looks for nvcc with
whatever python3 there is).
"""

from ...errors import TaskError
from ..base import Backend
from . import device as gpu
from . import timing as gpu_timing


class GpuBackend(Backend):
    bfloat16_as_float32 = True  # bfloat16 is drawn in float32 and rounded on the device
    allow_cpu = False           # the python backend may also run on a CPU-only torch

    def __init__(self):
        self.compiler = None
        self.torch = None
        self.device = None
        self.mem = None

    def before_open(self, request):
        device_name = (request.get("device") or {}).get("name")
        if (device_name or "cuda").startswith("cuda"):
            gpu.warm_context(device_name)  # the context is made while torch is imported

    def open(self, request):
        name = (request.get("device") or {}).get("name")
        self.torch, self.device = gpu.open_device(self.name, name, self.allow_cpu)

    def describe(self):
        return gpu.describe(self.torch, self.device)

    def properties(self):
        return self.torch.cuda.get_device_properties(self.device)

    def arch(self):
        props = self.properties()
        return gpu.arch_of(props.major, props.minor)

    def memory(self, spec, reference):
        from . import memory  # NumPy: see the module's notes
        l2 = getattr(self.properties(), "L2_cache_size", None) if self.device.type == "cuda" \
            else None
        self.mem = memory.TorchMemory(self.torch, self.device, spec, reference.torch is not None,
                                      l2)
        return self.mem

    def device_room(self):
        if self.device.type != "cuda":
            return None
        free, total = self.torch.cuda.mem_get_info(self.device)
        return free, (f"the {free / (1 << 30):.3g} GiB free of the device's "
                      f"{total / (1 << 30):.3g} GiB")

    def device_need(self, trials, inputs, output_bytes):
        # The arrays alive at once at the larger of two peaks, each held to a measurement on
        # the device path with a CPU torch by harness/tests/test_memory_peak.py. The
        # correctness stage's (its last trial, inside the reference): the candidate's inputs
        # and outputs of each earlier trial (kept so no trial reuses an earlier one's
        # addresses), this trial's pristine inputs (the reference's) and the candidate's copy
        # of them, its outputs, the copy taken of them, and the reference's result. The timing
        # stage's: each input's pool (the input and up to POOL_EXTRA_BYTES more for the calls'
        # windows) held twice (one never handed out), and the same three outputs. Every input
        # is taken as drawn (pooled), as KernelBench's are. The reference's own temporaries
        # come on top.
        from ... import inputs as host_inputs  # NumPy: imported where used, as memory is
        input_bytes = sum(inputs)
        earlier = max(int(trials) - 1, 0) * (input_bytes + output_bytes)
        correctness = earlier + 2 * input_bytes + 3 * output_bytes
        pools = sum(2 * (b + min(b, host_inputs.POOL_EXTRA_BYTES)) for b in inputs)
        timing = pools + 3 * output_bytes
        if correctness >= timing:
            return correctness, (
                f"the arrays the harness holds at once with {trials} correctness trial(s): "
                f"the candidate's inputs and outputs of each earlier trial, the pristine "
                f"inputs and the candidate's copy, its outputs, a copy of them and the "
                f"reference's result")
        return timing, ("the arrays the harness holds at once while timing: each input's "
                        "pool of the calls' windows, twice, the candidate's outputs, a copy of "
                        "them and the reference's result")

    def sanitizer(self, settings):
        if not settings:
            return None
        if not isinstance(settings, dict) or not isinstance(settings.get("log"), str):
            raise TaskError("sanitize", "sanitize must be an object with the sanitizer's log "
                                        "file as 'log'")
        log = gpu.SanitizerLog(settings["log"], settings.get("tool", "memcheck"))
        self.mem.sanitizer = log
        return log

    def check_definition(self, spec):
        for t in spec.inputs + spec.outputs:
            if gpu.torch_dtype(self.torch, t.dtype_name) is None:
                raise TaskError(f"{t.field}.dtype", f"dtype {t.dtype_name} is not supported by "
                                                    f"backend {self.name} ('{t.name}'): the GPU "
                                                    f"backends hold {', '.join(gpu.TORCH_DTYPES)} "
                                                    f"tensors; fp8 and fp4 tensors are not built")

    def time_pairs(self, session, settings):
        return gpu_timing.time_pairs(session, settings)
