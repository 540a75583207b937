"""Backend c's arrays: in this process, the host's (memory.HostMemory, NumPy arrays); with the
candidate in its own process (worker.py), `SharedMemory`, below. Its calls to the worker are
build.py's WorkerKernel, the timing loop over them timing.py's.

The candidate's copies of the inputs, its outputs and the timing stage's input buffers live in
arenas (memfd) that the harness and the worker both map; the reference's clones, the pristine
copies, the timing pools and everything the comparison uses stay in the harness's private
memory. Each trial gets new arenas while the previous trial's are still mapped, so each trial's
arrays are at fresh addresses in the worker too.
"""

import math

import numpy as np

from ... import dtypes, worker
from ...memory import HostMemory


class SharedMemory(HostMemory):
    def __init__(self, worker_):
        self.worker = worker_
        self._arenas = {}  # id -> (address in this process, size)

    @property
    def broken(self):
        return self.worker.dead

    def _arena(self, specs):
        """Arrays of (shape, dtype) in one new arena, in order; (None, None) entries stay None."""
        sizes = [0 if s is None else math.prod(s[0]) * np.dtype(s[1]).itemsize for s in specs]
        offsets, total = worker.layout(sizes)
        ident, view = self.worker.arena(total)
        base = np.frombuffer(view, np.uint8, count=1).__array_interface__["data"][0]
        self._arenas[ident] = (base, total)
        import weakref
        weakref.finalize(view, self._arenas.pop, ident, None)
        arrays = []
        for spec, offset in zip(specs, offsets):
            if spec is None:
                arrays.append(None)
                continue
            shape, dtype = spec
            count = math.prod(shape)
            arrays.append(np.frombuffer(view, dtype, count=count, offset=offset).reshape(shape))
        return arrays

    def locate(self, array):
        """(arena id, offset) of an array this memory allocated."""
        address = array.__array_interface__["data"][0]
        for ident, (base, size) in self._arenas.items():
            if base <= address < base + size:
                return ident, address - base
        raise RuntimeError("backend c was handed an array outside the shared arenas")

    def inputs(self, values):
        specs = [(v.shape, v.dtype) if isinstance(v, np.ndarray) else None for v in values]
        if not any(specs):
            return list(values)
        arrays = self._arena(specs)
        out = []
        for value, array in zip(values, arrays):
            if array is None:
                out.append(value)
            else:
                np.copyto(array, value)
                out.append(array)
        return out

    def outputs(self, shapes, tensors):
        arrays = self._arena([(s, t.dtype) for s, t in zip(shapes, tensors)])
        for a in arrays:
            dtypes.poison(a)
        return arrays

    def feed_buffers(self, feed, for_reference=False):
        if for_reference:
            return feed.buffers()
        specs = [None if s.tensor.is_scalar else (s.shape(), s.tensor.dtype)
                 for s in feed.sources]
        return self._arena(specs) if any(specs) else [None] * len(specs)
