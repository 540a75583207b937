"""A CUDA device through PyTorch: claiming it, the candidate's tensors on it, and its errors.

Inputs are drawn with NumPy on the host exactly as for the CPU (inputs.py), then copied to the
device outside every timed interval; outputs are poisoned on the device and copied back to the
host for the comparison (compare.py), so the correctness rules are the CPU's, word for word.
bfloat16 is drawn as float32 and rounded on the device; it comes back as its 16-bit patterns,
widened to float32 exactly (dtypes.py).

Device errors: an illegal address or a trap in a kernel is reported by CUDA at the next
synchronise, and it is sticky: the CUDA context can do nothing afterwards. Such an error fails
the workload it happened in as a runtime_error, and marks the memory `broken`, so the remaining
workloads are reported as not run instead of failing one by one with confusing messages.
"""

import os
import sys

import numpy as np

from . import dtypes, gpu_info
from .errors import CandidateError, SetupError
from .memory import changed_text, clone

_TORCH_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                 "uint8", "bool")


def open_device(backend, name, allow_cpu=False):
    """(torch, torch.device) for a device name "cuda", "cuda:N" (or "cpu" where allowed).

    Raises SetupError with what to install or change when torch or CUDA is missing.
    """
    needs = (f"the {backend} backend needs PyTorch with CUDA in the harness's Python "
             f"(KSEARCH_PYTHON=/path/to/python selects it)")
    try:
        import torch
    except ImportError as e:
        raise SetupError(f"{needs}: {sys.executable} cannot import torch ({e})",
                         missing="torch") from None
    name = name or "cuda:0"
    kind, _, index = name.partition(":")
    if kind == "cpu" and not index:
        if not allow_cpu:
            raise SetupError(f"the {backend} backend runs kernels on a CUDA device, not on "
                             f"{name!r}; set the device to cuda or cuda:N")
        return torch, torch.device("cpu")
    if kind != "cuda" or not (index == "" or index.isdigit()):
        raise SetupError(f"unknown device {name!r}; expected cuda, cuda:N"
                         + (" or cpu" if allow_cpu else ""))
    index = int(index or 0)
    if torch.version.cuda is None:
        raise SetupError(f"{needs}: {sys.executable} has torch {torch.__version__}, built "
                         f"without CUDA")
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise SetupError(f"{needs}: torch {torch.__version__} (CUDA {torch.version.cuda}) in "
                         f"{sys.executable} finds no usable CUDA device (is the driver loaded? "
                         f"CUDA_VISIBLE_DEVICES={visible!r})")
    count = torch.cuda.device_count()
    if index >= count:
        raise SetupError(f"device {name!r} does not exist: torch sees {count} CUDA "
                         f"device(s), cuda:0 to cuda:{count - 1}")
    torch.cuda.set_device(index)
    return torch, torch.device("cuda", index)


# Compute capabilities whose newest instructions exist only in the arch-specific target
# (`a`): Hopper's wgmma and TMA (9.0), Blackwell's tcgen05 and tensor memory (10.0, 10.3, and
# 11.0, called 10.1 before CUDA 13), and the consumer Blackwell parts (12.0, 12.1).
ARCH_SPECIFIC = {(9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1)}


def arch_of(major, minor):
    """nvcc's -arch for a compute capability: sm_90a on Hopper, sm_100a on the B200 (their
    newest instructions exist only in the arch-specific target), sm_XY elsewhere."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) in ARCH_SPECIFIC else "")


def describe(torch, device):
    """Provenance of the device for the `done` event (docs/protocol.md, Environment)."""
    found = {"kind": device.type, **gpu_info.versions()}
    if device.type != "cuda":
        return found
    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    uuid = f"GPU-{uuid}" if uuid is not None and not str(uuid).startswith("GPU-") else uuid
    found.update({
        "name": props.name,
        "index": device.index,
        "capability": f"{props.major}.{props.minor}",
        "arch": arch_of(props.major, props.minor),
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "uuid": None if uuid is None else str(uuid),
        "cuda_runtime": torch.version.cuda,
        "driver": None, "clocks_mhz": None, "max_clocks_mhz": None,
    })
    # Without CUDA_VISIBLE_DEVICES, the CUDA index is NVML's index too.
    index = device.index if "CUDA_VISIBLE_DEVICES" not in os.environ else None
    found.update(gpu_info.nvml(found["uuid"], index))
    return found


def torch_dtype(torch, name):
    if name not in _TORCH_DTYPES:
        return None
    return getattr(torch, name)


def is_device_error(error):
    """True for errors CUDA reported (torch raises RuntimeError or AcceleratorError)."""
    text = str(error)
    return type(error).__name__ == "AcceleratorError" or "CUDA error" in text or \
        "CUDA driver error" in text or "cudaError" in text


def first_line(error, limit=400):
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line[:limit]


class TorchMemory:
    """The candidate's arrays as torch tensors on `device` (see memory.py for the methods)."""

    def __init__(self, torch, device, spec, reference_on_device, l2_bytes=None):
        self.torch = torch
        self.device = device
        self.is_cuda = device.type == "cuda"
        self.spec = spec
        # A torch reference runs on the device; a NumPy reference on the host.
        self.reference_on_device = reference_on_device
        self.l2_bytes = l2_bytes
        self.broken = None
        self.sanitizer = None  # a SanitizerLog when compute-sanitizer watches the process
        # True while gpu_timing captures a CUDA graph: CUDA refuses synchronising calls then, so
        # an error is no sign of a lost context until the capture has ended.
        self.capturing = False
        self._flush = None

    def dtype(self, tensor_spec):
        return torch_dtype(self.torch, tensor_spec.dtype_name)

    def upload(self, value, tensor_spec):
        """A fresh device tensor holding a host array (bfloat16 rounded on the device)."""
        if not isinstance(value, np.ndarray):
            return value
        x = self.torch.from_numpy(np.ascontiguousarray(value)).to(self.device, copy=True)
        if tensor_spec.dtype_name == "bfloat16":
            x = x.to(self.torch.bfloat16)
        return x

    def inputs(self, values):
        return [self.upload(v, t) for v, t in zip(values, self.spec.inputs)]

    def outputs(self, shapes, tensors):
        outs = [self.torch.empty(s, dtype=self.dtype(t), device=self.device)
                for s, t in zip(shapes, tensors)]
        self.poison(outs)
        return outs

    def poison(self, outputs):
        for o in outputs:
            poison_tensor(self.torch, o)

    def run(self, call):
        raw = call()
        self.synchronize("after the candidate's call")
        return raw

    def synchronize(self, during="after the candidate's call"):
        if not self.is_cuda:
            return
        try:
            self.torch.cuda.synchronize(self.device)
        except Exception as e:  # noqa: BLE001 - what CUDA reports is the candidate's
            raise self.device_error(e, during) from None

    def device_error(self, error, during):
        """The CandidateError for an exception raised by or after the candidate's work."""
        text = first_line(error)
        if not is_device_error(error):
            return CandidateError("runtime_error", f"the candidate raised "
                                                   f"{type(error).__name__}: {text} ({during})")
        reason = f"the GPU reported an error {during}: {text}"
        if not self.capturing and not self.usable():
            self.broken = f"the CUDA context is unusable after an earlier error ({text})"
            reason += "; the CUDA context is unusable after it, so later workloads are not run"
        if self.sanitizer is not None:
            lines = self.sanitizer.new_errors()
            if lines:
                reason += f"; compute-sanitizer: {' | '.join(lines)}"
        return CandidateError("runtime_error", reason)

    def usable(self):
        try:
            self.torch.cuda.synchronize(self.device)
            probe = self.torch.ones(1, device=self.device)
            return float(probe.add_(1).item()) == 2.0
        except Exception:  # noqa: BLE001 - any failure means the context is gone
            return False

    def take(self, results, into=None):
        hosts = [to_host(self.torch, r) for r in results]
        if into is None:
            return hosts
        for h, t in zip(hosts, into):
            np.copyto(t, h)
        return into

    def changed_input(self, spec, pristine, mine):
        """Bitwise comparison on the device with a fresh upload of the pristine contents."""
        torch = self.torch
        for t, before, after in spec.read_only(pristine, mine):
            if not isinstance(before, np.ndarray) or before.size == 0:
                continue
            fresh = _bytes(torch, self.upload(before, t))
            now = _bytes(torch, after)
            if torch.equal(fresh, now):
                continue
            n = before.size
            changed = int((fresh.view(n, -1) != now.view(n, -1)).any(dim=1).sum().item())
            return changed_text(t.name, changed, n)
        return None

    def reference_inputs(self, values):
        if self.reference_on_device:
            return self.inputs(values)
        return [clone(v) for v in values]

    def release_reference(self, raw):
        """Poison the reference's device results once copied (host copies are scrubbed by the
        caller); tensors on the CPU may share memory with those host copies, so not them."""
        if not self.is_cuda:
            return
        for value in _tensors(self.torch, raw):
            if value.device.type == "cuda" and value.numel():
                try:
                    poison_tensor(self.torch, value.detach())
                except RuntimeError:
                    pass  # an expanded or otherwise unwritable view: nothing of its own to hide

    def feed_buffers(self, feed, for_reference=False):
        if for_reference and not self.reference_on_device:
            return feed.buffers()
        return [None if s.tensor.is_scalar else
                self.torch.empty(s.shape(), dtype=self.dtype(s.tensor), device=self.device)
                for s in feed.sources]

    def fill(self, feed, k, buffers):
        values = []
        for source, buffer in zip(feed.sources, buffers):
            expected = source.expected(k)
            if buffer is None:
                values.append(expected)
                continue
            if isinstance(buffer, np.ndarray):
                np.copyto(buffer, expected)
            elif source.tensor.dtype_name == "bfloat16":
                buffer.copy_(self.upload(expected, source.tensor))  # rounded as in upload
            else:
                buffer.copy_(self.torch.from_numpy(np.ascontiguousarray(expected)))
            values.append(buffer)
        return values

    def flush_l2(self):
        """Evict the L2 cache: read and write a buffer twice its size (EVALUATION.md)."""
        if not self.is_cuda:
            return
        if self._flush is None:
            size = 2 * (self.l2_bytes or (64 << 20))
            self._flush = self.torch.zeros(size, dtype=self.torch.uint8, device=self.device)
        self._flush.add_(1)

    def flush_bytes(self):
        return None if self._flush is None else self._flush.numel()


def poison_tensor(torch, t):
    """NaN for floats, the largest value for integers, the byte 0xAA for bool (dtypes.poison)."""
    if t.numel() == 0:
        return
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.view(torch.uint8).fill_(dtypes.POISON_BOOL_BYTE)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def to_host(torch, tensor):
    """A host NumPy copy: bfloat16 widened exactly from its bit patterns, bools as their bytes
    (so an unwritten 0xAA stays visible to the comparison)."""
    t = tensor.detach().contiguous()
    if t.dtype == torch.bfloat16:
        bits = t.view(torch.int16).cpu().numpy()
        return dtypes.bfloat16_bits_to_float32(bits).reshape(tuple(t.shape))
    if t.dtype == torch.bool:
        return t.view(torch.uint8).cpu().numpy().view(np.bool_).copy()
    return np.array(t.cpu().numpy(), copy=True)


def _bytes(torch, t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _tensors(torch, value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(torch, v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(torch, v)


class SanitizerLog:
    """New error lines compute-sanitizer wrote to its log file since the last look.

    The supervisor runs the harness under `compute-sanitizer --tool memcheck --log-file PATH`;
    every line of its report starts with "=========". Its banner and summary are not errors.
    """

    MAX_LINES = 12

    def __init__(self, path, tool):
        self.path = path
        self.tool = tool
        self.offset = 0

    def new_errors(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = []
        for line in data.decode("utf-8", "replace").splitlines():
            if not line.startswith("========="):
                continue
            text = line[len("========="):].strip()
            if not text or text.startswith("COMPUTE-SANITIZER") or \
                    text.startswith("ERROR SUMMARY: 0 errors"):
                continue
            lines.append(text)
        return lines[:self.MAX_LINES]

    def check(self, during):
        lines = self.new_errors()
        if lines:
            raise CandidateError("runtime_error", f"compute-sanitizer ({self.tool}) reported "
                                                  f"errors during {during}: "
                                                  + " | ".join(lines))
