"""Arrays of the mlx backend: uploads, outputs, poisoning, the L2 flush (its timing loop is
timing.py's).

Inputs are drawn with NumPy on the host exactly as for the other backends and converted to
fresh MLX arrays (evaluated, so the copy is done) outside every timed interval, except on a GPU
with a reference in MLX operations, where MLX draws the float inputs on the device (inputs.py)
and the candidate gets a device copy of each; a timed call gets new arrays holding its own
contents. MLX arrays are immutable at the API level, so a call's
outputs are the arrays the candidate returns (MLX allocates them); they are copied back to NumPy
for the same comparison as everywhere else. bfloat16 is drawn in float32 and rounded by MLX
(astype); it comes back widened to float32 exactly.

Poisoning. MLX hands a new output the memory of an earlier array of a fitting size from its
buffer cache, so an element the kernel does not write holds whatever was there. Correctness
calls of a kernel candidate pass init_value = NaN (the dtype's largest value for integers), so
every unwritten element fails the comparison. Timed calls do not, since the fill would run inside
the timed interval; instead, before every call, arrays of the outputs' sizes filled with that
poison are made and freed, so that the buffers MLX is likely to hand out next hold poison (the
same is done before the correctness calls of a Python launcher, whose kernels are its own). The
reference's earlier results cannot be overwritten in place; they return to the same cache.

Residency. On MLX's CUDA backend arrays live in unified (managed) memory: an array made from a
NumPy array is written by the host, and the first kernel to read it pulls its pages across to the
GPU inside its own timed call. A timed call gets fresh inputs, so every call paid that: in the
first mlx_attention search on the H200 (session 8) flash-attention candidates whose kernels take
1.3 ms at L=4096 in a plain MLX process read 11-13 ms, with 30-40% spread, and the seed 64.5 ms
against 49.5 (bench/mlx_timing_probe.py). So on a GPU an upload is copied once more by a kernel
(`device_copy`, bit for bit) and the host-written array is dropped: what a timed call reads was
last written on the device, as in a model where inputs come from the layer before. The copy is
evaluated while the host array is still referenced: else MLX donates the host array's buffer to
the copy (an elementwise result takes over an operand nothing else holds), and until session 11
that is what happened, so inputs stayed in managed memory and sdpa at L=1024 read 327-363 us on
them against 164 on inputs made on the device (bench/results/raw-2026-12-02-session11/probe.txt).
Timing inputs on a GPU. The copy above still left the timed calls slow: sdpa at L=1024 read
317-345 us on per-call uploads against 147-215 on inputs made on the device, and it read as slow
(321-325 us) on device-made inputs when only the host's work (NumPy arrays to MLX, their copies,
their release) ran before each call, while a device-to-device copy before each call cost nothing
(213 us) (bench/results/raw-2026-12-02-session12/probe.txt). So the feed's pools live on the
device: each windowed input's pool (and each file input) is uploaded once per workload, and a
timed call gets a device copy of its window, as the torch GPU backends do; only inputs drawn
whole for each call (offsets, unique) are still uploaded per call. Each pool is held twice: the
calls' inputs are copied from one, and the other, never handed to a call, is what each call's
input is checked against, so a kernel that writes into the pool it was copied from (it has raw
pointers) is caught at the next call.
The L2 flush: before each timed call (timing.py) a 256 MiB buffer is read and written on the
device (`flush_l2`), which evicts the GPU's last-level cache (the H200's 50 MiB L2, an Apple
GPU's system-level cache).
"""

import math

import numpy as np

from ... import inputs as host_inputs
from ...errors import CandidateError
from ...memory import changed_text

FLUSH_BYTES = 256 << 20

# The largest value of each integer dtype that a float32 init_value represents exactly.
_INT_POISON = {"int8": 127, "uint8": 255, "int16": 32767, "uint16": 65535,
               "int32": 2 ** 31 - 128, "uint32": 2 ** 32 - 256, "int64": 2 ** 63 - 2 ** 39,
               "uint64": 2 ** 64 - 2 ** 40}


def mx_dtype(mx, name):
    return mx.bool_ if name == "bool" else getattr(mx, name)


def poison_value(dtype_names):
    """The init_value that poisons outputs of these dtypes (one value serves all of them)."""
    ints = [_INT_POISON[d] for d in dtype_names if d in _INT_POISON]
    return float(min(ints)) if ints else float("nan")


def evaluate(mx, value):
    """mx.eval on every MLX array inside value (arrays, tuples, lists, dicts)."""
    arrays = list(_arrays(mx, value))
    if arrays:
        mx.eval(arrays)


def _arrays(mx, value):
    if isinstance(value, mx.array):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays(mx, v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _arrays(mx, v)


_UNSIGNED = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def device_copy(mx, array):
    """A copy of `array` written by a kernel on MLX's default device, bit for bit (NaN payloads,
    -0.0 and bool included): its bits OR 0 as an unsigned integer of the same width. Lazy, like
    every MLX operation; 0-d and empty arrays are returned as they are."""
    if array.ndim == 0 or array.size == 0:
        return array
    bits = getattr(mx, _UNSIGNED[array.itemsize])
    raw = array.view(bits)
    return mx.bitwise_or(raw, mx.zeros((), dtype=bits)).view(array.dtype)


def same_bits(mx, a, b):
    """Whether two MLX arrays hold the same bits (NaN payloads and -0.0 included), tested on
    their device."""
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    if a.size == 0:
        return True
    bits = getattr(mx, _UNSIGNED[a.itemsize])
    a, b = a.view(bits), b.view(bits)
    return bool(mx.array_equal(a, b).item())


def to_numpy(mx, array):
    """A host copy; bfloat16 widened to float32 exactly."""
    if array.dtype == mx.bfloat16:
        array = array.astype(mx.float32)
    return np.array(array, copy=True)


class MlxMemory:
    """The candidate's arrays as MLX arrays (see memory.py for the methods)."""

    is_cuda = False  # no CUDA events or graphs here (torch_gpu/timing.py); timing is timing.py's
    broken = None

    def __init__(self, mx, spec, reference_on_device, on_gpu):
        self.mx = mx
        self.spec = spec
        self.reference_on_device = reference_on_device
        self.on_gpu = on_gpu
        self._flush = None
        self._pools = None  # (feed, its device pools): the timing stage's current workload

    def upload(self, value, tensor):
        """A fresh MLX array holding a host array (bfloat16 rounded by MLX), or a copy of an
        MLX array made on the device (inputs.py's draws: the candidate gets a buffer of its
        own); scalars as given."""
        if isinstance(value, self.mx.array):
            copy = device_copy(self.mx, value)
            self.mx.eval(copy)
            return copy
        if not isinstance(value, np.ndarray):
            return value
        array = self.mx.array(np.ascontiguousarray(value))
        if tensor.dtype_name == "bfloat16":
            return array.astype(self.mx.bfloat16)  # written by a kernel already
        if self.on_gpu:
            # Evaluated here, while `array` is still referenced: MLX donates an operand's buffer
            # to the result when nothing else holds it, and the copy would then be the
            # host-written managed buffer itself (see the module's notes: residency).
            copy = device_copy(self.mx, array)
            self.mx.eval(copy)
            return copy
        return array

    def inputs(self, values):
        arrays = [self.upload(v, t) for v, t in zip(values, self.spec.inputs)]
        evaluate(self.mx, arrays)
        return arrays

    def outputs(self, shapes, tensors):
        """MLX allocates the candidate's outputs: these are placeholders (shape, tensor) that
        say what to poison in its cache."""
        placeholders = list(zip(shapes, tensors))
        self.poison(placeholders)
        return placeholders

    def poison(self, outputs):
        mx = self.mx
        filled = [mx.full(shape, poison_value([t.dtype_name]), dtype=mx_dtype(mx, t.dtype_name))
                  for shape, t in outputs if math.prod(shape)]
        if filled:
            mx.eval(filled)
        del filled  # back to MLX's buffer cache, for the candidate's outputs to reuse

    def run(self, call):
        checked = getattr(call, "checked", call)
        raw = checked()
        self.synchronize("after the candidate's call")
        return raw

    def synchronize(self, during="after the candidate's call"):
        try:
            self.mx.synchronize()
        except Exception as e:  # noqa: BLE001 - an error the device reported late is the candidate's
            raise CandidateError("runtime_error", f"MLX reported an error {during}: "
                                                  f"{type(e).__name__}: {_first_lines(e)}") from None

    def take(self, results, into=None):
        hosts = [to_numpy(self.mx, r) for r in results]
        if into is None:
            return hosts
        for h, t in zip(hosts, into):
            np.copyto(t, h)
        return into

    def changed_input(self, spec, pristine, mine):
        """Bitwise comparison of the candidate's arrays with the pristine contents: on the
        device against the pool's window where the call's input was copied from one (the timing
        stage on a GPU), else on the host."""
        windows = getattr(mine, "windows", None)
        for i, (t, before, after) in enumerate(zip(spec.inputs, pristine, mine)):
            if t.name in spec.writable:
                continue
            window = windows[i] if windows is not None else None
            if window is not None and same_bits(self.mx, window, after):
                continue
            if isinstance(before, self.mx.array) and same_bits(self.mx, before, after):
                continue
            changed = self._changed_on_host(t, before, after)
            if changed:
                return changed
        return None

    def _changed_on_host(self, t, before, after):
        mx = self.mx
        if isinstance(before, mx.array) and before.size:  # drawn by MLX (inputs.py)
            bits = getattr(mx, _UNSIGNED[before.itemsize])
            before, after = np.array(before.view(bits)), after.view(bits)
        if not isinstance(before, np.ndarray) or before.size == 0:
            return None
        if t.dtype_name == "bfloat16" and before.dtype != np.uint16:
            fresh = np.array(self.upload(before, t).view(mx.uint16))
            now = np.array(after.view(mx.uint16))
        else:
            fresh, now = before, np.array(after)
        n = before.size
        a = np.ascontiguousarray(now).reshape(n, -1).view(np.uint8)
        b = np.ascontiguousarray(fresh).reshape(n, -1).view(np.uint8)
        if a.shape == b.shape and np.array_equal(a, b):
            return None
        changed = n if a.shape != b.shape else int(np.count_nonzero((a != b).any(axis=1)))
        return changed_text(t.name, changed, n)

    def device_inputs(self, maker):
        """Draws made by MLX (inputs.py) on a GPU where the reference is MLX operations, or
        None for the host's NumPy draws (on MLX's CPU device NumPy draws faster: 0.5-2.4 s
        against 0.6-6.4 s for a trial of mlx_attention's L=4096 inputs on a 2-core host)."""
        if not (self.reference_on_device and self.on_gpu):
            return None
        from .inputs import MlxInputs, can_draw
        if not can_draw(self.mx):
            return None
        return MlxInputs(maker, self.mx, self.upload)

    def timing_checks(self, ctx):
        """The timing stage's per-call checks done by MLX (checks.py), or None for the host's."""
        from .checks import DeviceChecks
        return DeviceChecks.of(self, ctx)

    def reference_inputs(self, values):
        if self.reference_on_device:
            # Arrays MLX drew (inputs.py) are handed over as they are: the candidate has its own
            # copies, already checked, and a third copy of each was one more at the peak.
            return [v if isinstance(v, self.mx.array) else self.upload(v, t)
                    for v, t in zip(values, self.spec.inputs)]
        return list(values)  # host arrays the caller reads no more (memory.py's HostMemory)

    def release_reference(self, raw, kept=()):
        pass  # MLX arrays cannot be overwritten in place; see the module's notes

    def feed_buffers(self, feed, for_reference=False):
        if for_reference and not self.reference_on_device:
            return feed.buffers()
        if not self.on_gpu:
            return [None] * len(feed.sources)  # filled with new arrays for every call
        # On a GPU, the pools on the device (see the module's notes), shared by the candidate's
        # and the reference's calls of this feed.
        if self._pools is None or self._pools[0] is not feed:
            self._pools = (feed, [self._device_pool(s) for s in feed.sources])
        return _Buffers(self._pools[1])

    def _device_pool(self, source):
        if source.tensor.is_scalar:
            return None
        # Two copies of each pool on the device: the calls' inputs are copied from one, and
        # the other, which no call is given a view of, is what each call's input is checked
        # against; a kernel that wrote into the first (it gets raw pointers) is caught at the
        # next call, whose copy then differs from the second.
        if isinstance(source, host_inputs._Window):
            if isinstance(source.pool, self.mx.array):  # made on the device (inputs.py)
                return _DevicePool(self.upload(source.pool, source.tensor), source.pool, source)
            host = np.ascontiguousarray(source.pool)
            return _DevicePool(self.upload(host, source.tensor), self.upload(host, source.tensor),
                               source)
        if isinstance(source, host_inputs._Fixed):
            host = np.ascontiguousarray(source.expected(0))
            return _DevicePool(self.upload(host, source.tensor), self.upload(host, source.tensor),
                               None)
        return None  # drawn whole for each call: uploaded per call

    def fill(self, feed, k, buffers):
        values = []
        pools = getattr(buffers, "pools", None)
        for i, source in enumerate(feed.sources):
            buffer = buffers[i]
            pool = pools[i] if pools is not None else None
            if pool is not None:
                # changed_input compares the call's input with the pristine pool's window.
                buffers.windows[i] = pool.window_of(k, pristine=True)
                buffers[i] = device_copy(self.mx, pool.window_of(k))
                values.append(buffers[i])
                continue
            expected = source.expected(k)
            if isinstance(expected, self.mx.array):  # a window of a pool MLX drew
                buffers[i] = device_copy(self.mx, expected)
                values.append(buffers[i])
            elif isinstance(buffer, np.ndarray):
                np.copyto(buffer, expected)
                values.append(buffer)
            elif source.tensor.is_scalar:
                values.append(expected)
            else:
                buffers[i] = self.upload(np.ascontiguousarray(expected), source.tensor)
                values.append(buffers[i])
        evaluate(self.mx, values)
        return values

    def flush_l2(self):
        if not self.on_gpu:
            return
        mx = self.mx
        if self._flush is None:
            self._flush = mx.zeros((FLUSH_BYTES,), dtype=mx.uint8)
        self._flush = self._flush + 1
        mx.eval(self._flush)

    def flush_bytes(self):
        return FLUSH_BYTES if self.on_gpu else None


class _Buffers(list):
    """The arrays of the current call, one per input (what the session checks for changes),
    and the device pools they are copied from (`pools`, None where an input has none)."""

    def __init__(self, pools):
        super().__init__([None] * len(pools))
        self.pools = list(pools)
        self.windows = [None] * len(pools)  # each pooled input's window of the current call


class _DevicePool:
    """One input's timing contents on the device: a windowed input's whole pool (`window` is
    its host source, which holds the offsets) or a file input's one value (`window` None)."""

    def __init__(self, array, pristine, window):
        self.array, self.pristine, self.window = array, pristine, window

    def window_of(self, k, pristine=False):
        """Call k's contents on the device (a view of the pool, not a copy): of the pool the
        calls' inputs are copied from, or of the pristine one they are checked against."""
        array = self.pristine if pristine else self.array
        if self.window is None:
            return array
        o = int(self.window.offsets[k])
        return array[o:o + self.window.n].reshape(self.window.shape())


def _first_lines(error, limit=2000):
    text = " | ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return text[:limit] or "(no message)"
