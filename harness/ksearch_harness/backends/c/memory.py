"""Backend c with the candidate in its own process (worker.py): its arrays in shared memory,
its calls sent to the worker, and the CPU timing loop over those calls.

The candidate's copies of the inputs, its outputs and the timing stage's input buffers live in
arenas (memfd) that the harness and the worker both map; the reference's clones, the pristine
copies, the timing pools and everything the comparison uses stay in the harness's private
memory. Each trial gets new arenas while the previous trial's are still mapped, so each trial's
arrays are at fresh addresses in the worker too.
"""

import math

import numpy as np

from ... import dtypes, timing, worker
from ...memory import HostMemory

PINGS = 5  # empty round trips per workload, to calibrate the timing cross-check


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


class WorkerKernel:
    """The c backend's kernel when the candidate runs in the worker."""

    def __init__(self, memory, input_dtypes, axis_values):
        self.memory = memory
        self.worker = memory.worker
        self._input_dtypes = input_dtypes  # dtype name for a scalar, None for an array
        self._axes = [["int64", int(v)] for v in axis_values]

    def bind(self, inputs, outputs):
        args = []
        for name, value in zip(self._input_dtypes, inputs):
            if name:
                args.append([name, value.item()])
            else:
                args.append(["array", *self.memory.locate(value)])
        for array in outputs:
            args.append(["array", *self.memory.locate(array)])
        return WorkerCall(self.worker, args + self._axes)

    @staticmethod
    def results(raw, outputs, shapes):
        return outputs


class WorkerCall:
    """One call of the candidate, run by the worker; keeps both clocks' view of it."""

    def __init__(self, worker_, args):
        self.worker, self.args = worker_, args
        self.ns = self.outer_ns = None

    def __call__(self):
        self.ns, self.outer_ns = self.worker.call(self.args)


def time_pairs(session, settings):
    """timing.time_pairs for a candidate in the worker.

    The same pairs in the same order (candidate first, every call on new contents and checked);
    the candidate's time is the worker's clock around its call, and the harness adds its own
    round trip of each timed call and the round trips of empty calls for ksearch's cross-check.
    """
    warmup, iterations, min_iterations, budget_ns = timing.loop_settings(settings)
    clock = timing.perf_counter_ns
    pings = [session.kernel.worker.ping() for _ in range(PINGS)]
    start = clock()
    ref_ns, cand_ns, outer_ns = [], [], []
    for k in range(warmup + iterations):
        candidate = session.candidate(k)
        candidate()
        session.candidate_done(k, None)
        reference = session.reference(k)
        t2 = clock(); result = reference(); t3 = clock()
        session.reference_done(k, result)
        del result
        if k >= warmup:
            cand_ns.append(candidate.ns)
            outer_ns.append(candidate.outer_ns)
            ref_ns.append(t3 - t2)
            if len(cand_ns) >= min_iterations and clock() - start >= budget_ns:
                break
    return {"clock": "perf_counter_ns", "candidate_ns": cand_ns, "reference_ns": ref_ns,
            "worker_outer_ns": outer_ns, "worker_ping_ns": pings}
