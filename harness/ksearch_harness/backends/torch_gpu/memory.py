"""A CUDA device through PyTorch: the candidate's tensors on it, and its errors (claiming the
device, describing it and reading its errors: device.py).

On a CUDA device everything stays on the device: inputs are drawn there with a seeded torch
generator (inputs.py), the candidate's copies and the reference's inputs (a trial's pristine
draw once the candidate's inputs are checked; the timing stage's own buffers) are separate
device allocations, outputs are poisoned there, and the comparison (compare.py's tensor
functions: the CPU's rules, element for element) runs there, so only a handful of scalars per
check cross to the host.
bfloat16 is compared exactly as its widened values. A NumPy reference still gets host arrays
(copied from the device draws) and its results are copied to the device for the comparison. On
a CPU device (the python backend with a CPU-only torch) the host path is the CPU's: NumPy draws
and comparisons.

Device errors: an illegal address or a trap in a kernel is reported by CUDA at the next
synchronise, and it is sticky: the CUDA context can do nothing afterwards. Such an error fails
the workload it happened in as a runtime_error, and marks the memory `broken`, so the remaining
workloads are reported as not run instead of failing one by one with confusing messages.
"""

import os

import numpy as np

from ... import compare, dtypes
from ...errors import CandidateError, TaskError
from ...memory import changed_text
from . import gate as gpu_gate
from .device import first_line, is_device_error, torch_dtype


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
        # True while timing.py captures a CUDA graph: CUDA refuses synchronising calls then, so
        # an error is no sign of a lost context until the capture has ended.
        self.capturing = False
        self._flush = None
        # On a CUDA device, inputs are drawn, checked and compared on the device.
        # KSEARCH_TORCH_NATIVE=1 does the same on a CPU device (torch's CPU tensors), so the
        # device path's logic can be tested where there is no GPU.
        self.device_native = self.is_cuda or os.environ.get("KSEARCH_TORCH_NATIVE") == "1"
        self.ops = DeviceOps(self) if self.device_native else None
        self._gate = self._gate_note = None
        self._gate_made = False

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
        """Fresh device copies: device tensors cloned, host arrays uploaded."""
        return [v.clone() if isinstance(v, self.torch.Tensor) else self.upload(v, t)
                for v, t in zip(values, self.spec.inputs)]

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
        """Copies of what the candidate produced: on the device (device_native), else host
        arrays. `into`: the buffers of an earlier take, refilled."""
        if self.device_native:
            if into is None:
                return [r.detach().clone() for r in results]
            for r, t in zip(results, into):
                t.copy_(r.detach())
            return into
        hosts = [to_host(self.torch, r) for r in results]
        if into is None:
            return hosts
        for h, t in zip(hosts, into):
            np.copyto(t, h)
        return into

    def changed_input(self, spec, pristine, mine):
        """Bitwise comparison on the device with the pristine contents (device tensors as they
        are, host arrays uploaded afresh)."""
        torch = self.torch
        for t, before, after in spec.read_only(pristine, mine):
            if isinstance(before, torch.Tensor):
                if before.numel() == 0:
                    continue
                fresh = _bytes(torch, before)
                n = before.numel()
            elif not isinstance(before, np.ndarray) or before.size == 0:
                continue
            else:
                fresh = _bytes(torch, self.upload(before, t))
                n = before.size
            now = _bytes(torch, after)
            if torch.equal(fresh, now):
                continue
            changed = int((fresh.view(n, -1) != now.view(n, -1)).any(dim=1).sum().item())
            return changed_text(t.name, changed, n)
        return None

    def reference_inputs(self, values):
        # The caller's pristine draw, read no more once the candidate's inputs are checked:
        # device tensors are passed as they are (a clone was one more whole copy of every input
        # at the correctness trials' peak), host arrays uploaded for a device reference and
        # device tensors copied to the host for a host one.
        torch = self.torch
        if self.reference_on_device:
            return [v if isinstance(v, torch.Tensor) else self.upload(v, t)
                    for v, t in zip(values, self.spec.inputs)]
        return [to_host(torch, v) if isinstance(v, torch.Tensor) else v for v in values]

    def gate(self):
        """(gpu_gate.Gate, None) or (None, why not): made once, at the first timing."""
        if not self._gate_made:
            self._gate_made = True
            if self.is_cuda:
                self._gate, self._gate_note = gpu_gate.make(self.torch)
            else:
                self._gate_note = "not a CUDA device"
        return self._gate, self._gate_note

    def release_reference(self, raw, kept=()):
        """Poison the reference's device results once copied (host copies are scrubbed by the
        caller); tensors on the CPU may share memory with those host copies, so not them.
        `kept`: the results DeviceOps.reference_outputs handed on as they are (not copied);
        the caller scrubs those once compared, so whatever shares their memory is left."""
        if not self.is_cuda:
            return
        handed_on = {_storage(k) for k in kept if isinstance(k, self.torch.Tensor)}
        for value in _tensors(self.torch, raw):
            if value.device.type == "cuda" and value.numel() and \
                    _storage(value) not in handed_on:
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
            if isinstance(expected, self.torch.Tensor):
                if isinstance(buffer, np.ndarray):  # a NumPy reference's host buffer
                    np.copyto(buffer, to_host(self.torch, expected))
                else:
                    buffer.copy_(expected)
            elif isinstance(buffer, np.ndarray):
                np.copyto(buffer, expected)
            elif source.tensor.dtype_name == "bfloat16":
                buffer.copy_(self.upload(expected, source.tensor))  # rounded as in upload
            else:
                buffer.copy_(self.torch.from_numpy(np.ascontiguousarray(expected)))
            values.append(buffer)
        return values

    def flush_l2(self):
        """Evict the L2 cache: read and write a buffer twice its size (docs/protocol.md, timing on a GPU)."""
        if not self.is_cuda:
            return
        if self._flush is None:
            size = 2 * (self.l2_bytes or (64 << 20))
            self._flush = self.torch.zeros(size, dtype=self.torch.uint8, device=self.device)
        self._flush.add_(1)

    def flush_bytes(self):
        return None if self._flush is None else self._flush.numel()


class DeviceOps:
    """What evaluate.py and session.py do with reference results, on the device (memory.HostOps
    is the host's): compare, the degenerate guard's magnitude, the fast test of timing calls,
    scrubbing, and the reference's results as device tensors."""

    def __init__(self, mem):
        self.mem = mem
        self.torch = mem.torch

    def compare(self, out, ref, atol, rtol):
        return compare.compare_tensors(self.torch, out, ref, atol, rtol)

    def largest(self, ref):
        return compare.largest_finite_magnitude_tensor(self.torch, ref)

    def fast_check(self, shape, tensor, atol, rtol):
        return compare.TensorFastCheck(self.torch, tensor.dtype_name, atol, rtol)

    def scrub(self, refs):
        for r in refs:
            if isinstance(r, self.torch.Tensor) and r.numel():
                try:
                    poison_tensor(self.torch, r.detach())
                except RuntimeError:
                    pass  # an expanded view: nothing of its own to hide

    def reference_outputs(self, reference, raw, shapes, where):
        """The reference's results as tensors on the device, in definition output order."""
        torch, mem = self.torch, self.mem
        found = []
        for name, value, shape in zip(*reference.named_values(raw, shapes, where)):
            if isinstance(value, torch.Tensor):
                t = value.detach()
                if t.is_complex():
                    raise TaskError("reference", f"the reference's output '{name}' has dtype "
                                                 f"{t.dtype}, not a real number ({where})")
                # Not copied on its own device (a clone was one more whole copy of every output
                # at the peak): release_reference leaves it (`kept`), the caller scrubs it.
                t = t.to(mem.device) if t.device != mem.device else t
            else:
                array = np.asarray(value)
                if array.dtype.kind not in "fiub":
                    raise TaskError("reference", f"the reference's output '{name}' has dtype "
                                                 f"{array.dtype}, not a number ({where})")
                t = torch.from_numpy(np.ascontiguousarray(array)).to(mem.device)
            if tuple(t.shape) != tuple(shape):
                raise TaskError("reference", f"the reference's output '{name}' has shape "
                                             f"{list(t.shape)}, but the definition gives "
                                             f"{list(shape)} ({where})")
            found.append(t)
        return found


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


def _storage(t):
    """The address of the memory a tensor views (shared by every view of it)."""
    return t.untyped_storage().data_ptr()


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
