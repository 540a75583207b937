"""Where a candidate's arrays live, and the handful of things evaluate.py does to them.

`HostMemory` is the CPU's world (NumPy arrays; the `c` backend). The GPU backends use
`TorchMemory` (backends/torch_gpu/memory.py), with the same methods over torch tensors on the
device. evaluate.py draws inputs and compares outputs on the host in both cases; only these
steps differ (each backend's memory.py says which object it uses):

  inputs(values)              the candidate's own copies of a trial's pristine inputs
  outputs(shapes)             fresh, poisoned output buffers
  poison(outputs)             poison them again (before every timed call)
  run(call)                   call the candidate and wait until its work is finished
  take(results, into)         host copies of what the candidate produced
  changed_input(spec, p, m)   a reason when the candidate changed its inputs, else None
  reference_inputs(values)    the reference's inputs, where the reference runs, from values
                              the caller reads no more (host arrays passed as they are)
  release_reference(raw, kept)  poison what the reference returned before it is freed (not
                              `kept`: the results handed on, which the caller scrubs)
  feed_buffers(feed, for_reference)  input buffers of the timing stage (the candidate's or
                              the reference's)
  fill(feed, k, buffers)      call k's contents copied into buffers; the values to pass
  synchronize()               wait for the device (nothing on the host)

What is done with the reference's results (compare, the degenerate guard's magnitude, the fast
test of timing calls, scrubbing) is the memory's `ops`: HostOps here, over NumPy arrays;
torch_gpu's DeviceOps on a CUDA device, over device tensors. A memory without `ops` (the mlx
backend's) gets HostOps (`ops_of`).
"""

import ctypes

import numpy as np

from . import dtypes
from .compare import FastCheck, compare, largest_finite_magnitude


class HostOps:
    """The reference's results as host NumPy arrays, compared by compare.py."""

    @staticmethod
    def compare(out, ref, atol, rtol):
        return compare(out, ref, atol, rtol)

    @staticmethod
    def largest(ref):
        return largest_finite_magnitude(ref)

    @staticmethod
    def fast_check(shape, tensor, atol, rtol):
        return FastCheck(shape, tensor.dtype, atol, rtol)

    @staticmethod
    def scrub(refs):
        scrub(refs)

    @staticmethod
    def reference_outputs(reference, raw, shapes, where):
        return reference.outputs(raw, shapes, where)


HOST_OPS = HostOps()


def ops_of(mem):
    return getattr(mem, "ops", None) or HOST_OPS


class HostMemory:
    device = "cpu"
    is_cuda = False
    broken = None  # a reason once the device can no longer run anything (never on the host)

    def inputs(self, values):
        return [clone(v) for v in values]

    def outputs(self, shapes, tensors):
        return [poisoned(s, t.dtype) for s, t in zip(shapes, tensors)]

    def poison(self, outputs):
        for o in outputs:
            dtypes.poison(o)

    def run(self, call):
        return call()

    def take(self, results, into=None):
        if into is None:
            return [r.copy() for r in results]
        for r, t in zip(results, into):
            np.copyto(t, r)
        return into

    def changed_input(self, spec, pristine, mine):
        return changed_input(spec, pristine, mine)

    def reference_inputs(self, values):
        # evaluate.py's pristine copy, read no more once the candidate's inputs are checked; a
        # clone would be one more whole copy of every input.
        return list(values)

    def release_reference(self, raw, kept=()):
        pass  # the reference's arrays are the host copies evaluate.py scrubs

    def feed_buffers(self, feed, for_reference=False):
        return feed.buffers()

    def fill(self, feed, k, buffers):
        return feed.fill(k, buffers)

    def synchronize(self):
        pass


def changed_input(spec, pristine, mine):
    """Bitwise (NaN-safe) comparison of the candidate's inputs with the pristine copy."""
    for t, before, after in spec.read_only(pristine, mine):
        if not isinstance(before, np.ndarray) or before.size == 0 or _same_bytes(before, after):
            continue
        b = before.reshape(-1).view(np.uint8)
        a = after.reshape(-1).view(np.uint8)
        n = before.size
        changed = int(np.count_nonzero(
            (a.reshape(n, -1) != b.reshape(n, -1)).any(axis=1)))
        return changed_text(t.name, changed, n)
    return None


def changed_text(name, changed, n):
    return (f"the candidate modified its input '{name}' ({changed} of {n} elements "
            f"changed); inputs are read-only, write results only to the outputs")


def _load_memcmp():
    try:
        memcmp = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    memcmp.restype = ctypes.c_int
    return memcmp


_memcmp = _load_memcmp()


def _same_bytes(a, b):
    if a.nbytes != b.nbytes:
        return False
    if _memcmp is not None and a.flags.c_contiguous and b.flags.c_contiguous:
        return _memcmp(a.__array_interface__["data"][0], b.__array_interface__["data"][0],
                       a.nbytes) == 0
    return np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


def scrub(arrays, protected=()):
    """Poison reference results before they are freed, so no candidate finds them in memory."""
    for a in arrays:
        if a.flags.writeable and a.size and not any(np.may_share_memory(a, p) for p in protected):
            dtypes.poison(a)


def clone(value):
    return value.copy() if isinstance(value, np.ndarray) else value


def poisoned(shape, dtype):
    array = np.empty(shape, dtype)
    dtypes.poison(array)
    return array
