"""The timing stage's per-call checks of an mlx candidate, done by MLX where the reference's
results are MLX arrays.

Every timed call is checked against the reference's result on the same contents (session.py).
The host way copies both results to NumPy and tests them there (compare.FastCheck): for
mlx_attention at L=4096 (16.8 M float16 elements an output) the test alone takes ~120 ms on a
2-core host (measured where this was written), against ~1 ms of kernel. In the stored H200
evaluations of session 14 the timing stage took ~10 s for 4 workloads, and the budget held only
5 to 7 timed calls per workload, whose medians spread 15-40% (IQR / median). Here the
test runs where the arrays are: |out - ref| <= atol' + rtol' |ref| in float32, atol' and rtol'
shrunk as FastCheck shrinks them, reduced to one boolean read back. Like FastCheck it is a
sufficient test: when it fails, the session copies both sides to the host and the comparison
of compare.py decides, as before. Only float16, bfloat16 and float32 outputs are tested here
(MLX's GPUs have no float64); a task with any other output keeps the host way.
"""

import numpy as np

from ...compare import FastCheck, _round_down
from .memory import to_numpy

_DTYPES = ("float16", "bfloat16", "float32")
CHUNK = 1 << 24  # elements per device test


class DeviceChecks:
    """What TimingSession asks of the timing stage's checks when MLX does them."""

    def __init__(self, mx, reference, outputs, tolerances):
        self.mx, self.reference = mx, reference
        margin = FastCheck._MARGIN
        self._bounds = []
        for t in outputs:
            atol, rtol = tolerances[t.name][:2]
            self._bounds.append((float(_round_down(atol * margin, np.dtype(np.float32))),
                                 float(_round_down(rtol * margin, np.dtype(np.float32)))))

    @classmethod
    def of(cls, mem, ctx):
        """The checks for `ctx`'s task, or None where the host way stays: a reference whose
        results are not MLX arrays, or an output MLX cannot test in float32."""
        if not mem.reference_on_device:
            return None
        if any(t.dtype_name not in _DTYPES for t in ctx.spec.outputs):
            return None
        return cls(mem.mx, ctx.reference, ctx.spec.outputs, ctx.tolerances)

    def take(self, results):
        """What is kept of a call's results: the arrays themselves (MLX arrays are immutable,
        so nothing the candidate does later changes them)."""
        return list(results)

    def host(self, taken):
        """Host copies of what `take` kept, for the host comparison."""
        return [to_numpy(self.mx, t) for t in taken]

    def passes(self, taken, raw, shapes, where):
        """Whether every output passes the test against the reference's result `raw`; None
        when a result is not an MLX array of the definition's shape (the host way says why)."""
        mx = self.mx
        _, values, shapes = self.reference.named_values(raw, shapes, where)
        for out, ref, shape in zip(taken, values, shapes):
            # Exactly arrays (a subclass could answer for the arithmetic below), of the shape.
            if type(out) is not mx.array or type(ref) is not mx.array:
                return None
            if tuple(out.shape) != tuple(shape) or tuple(ref.shape) != tuple(shape):
                return None
            if ref.dtype not in (mx.float16, mx.bfloat16, mx.float32):
                return None
        for out, ref, (atol, rtol) in zip(taken, values, self._bounds):
            o_all, r_all = out.reshape(-1), ref.reshape(-1)
            # In chunks, each reduced and read back before the next: the float32 temporaries
            # of a whole large output would be several times its size on the device.
            for start in range(0, o_all.size, CHUNK):
                o = o_all[start:start + CHUNK].astype(mx.float32)
                r = r_all[start:start + CHUNK].astype(mx.float32)
                # NaN on either side, or an infinity, makes it false: the host decides.
                if not mx.all(mx.abs(o - r) <= mx.abs(r) * rtol + atol).item():
                    return False
        return True
