"""Inputs drawn by MLX on its device (the mlx backend's counterpart of torch_gpu/inputs.py),
where the reference is MLX operations.

The rules are inputs.py's. Float inputs (float16, bfloat16, float32) with the normal, uniform or
heavy_tailed distribution are drawn with mx.random in float32 and rounded to their dtype by
MLX; trial t of workload i draws from a key seeded with the first 64-bit word of
SeedSequence([seed, i, t]).generate_state (vetting: SeedSequence([seed, 0, 0, 1])), split once
per array, arrays in definition order. heavy_tailed is Student t, z / sqrt(v / df), v a sum of df
squared normals, for a whole df up to 8. Every other input (integers, bools, offsets, unique,
float64, a heavy_tailed df MLX has no way to draw: it has no gamma distribution) is drawn by
NumPy on the host as inputs.py draws it, from NumPy's generator of the same SeedSequence, and
uploaded. Reproducible for a given seed and MLX version and device kind, not bit-equal to the
NumPy draws of the other backends.

Why: NumPy took 0.5-2.4 s per trial to draw mlx_attention's three 16.8 M-element inputs at
L=4096 on a 2-core host, and 2 s for a workload's timing pools (measured where this was
written), of the ~32 s an attention candidate's evaluation took on the H200 in session 14.

Timing (`feed`, backends/common/device_feed.py, shared with torch_gpu): the pools, windows and
offsets of inputs.py's Feed, with the pools made on the device (the memory uses them as its
device pools) and the offsets drawn by NumPy from SeedSequence([seed, i, trials]) as there.
"""

import numpy as np

from ... import inputs as host
from ..common import device_feed
from ..torch_gpu.inputs import torch_seed

_FLOATS = ("float16", "bfloat16", "float32")
_WHOLE_DF = 8


class MlxInputs:
    """Draws of an InputMaker (inputs.py) made by MLX."""

    def __init__(self, maker, mx, upload):
        self.maker, self.mx = maker, mx
        self.upload = upload  # (host array, tensor spec) -> MLX array on the device

    def _generators(self, entropy):
        return _Keys(self.mx, torch_seed(entropy)), np.random.default_rng(np.random.SeedSequence(entropy))

    def draw(self, index, workload, trial, axes, stream=None):
        maker = self.maker
        entropy = [maker.seed, index, trial] + ([] if stream is None else [stream])
        keys, rng = self._generators(entropy)
        values = []
        for t, kind, desc, shape, field, override in maker._described(index, workload, axes):
            if kind != "random":
                values.append(maker._given(kind, desc, t, shape, index, field))
            elif shape is None:
                values.append(maker._random(rng, t, None, trial, axes, override))
            else:
                values.append(self._random(keys, rng, t, shape, trial, axes, override))
        arrays = [v for v in values if isinstance(v, self.mx.array)]
        if arrays:
            self.mx.eval(arrays)
        return values

    def feed(self, index, workload, trial, axes, calls):
        maker = self.maker
        keys, rng = self._generators([maker.seed, index, trial])

        def draw_pool(t, size, override):
            pool = self._random(keys, rng, t, size, trial, axes, override)
            if isinstance(pool, self.mx.array):
                self.mx.eval(pool)
            return pool

        # Scalar and safetensors inputs and structured draws stay NumPy's, on the host: the
        # memory uploads them (memory.py, _device_pool and fill).
        return device_feed.feed(
            maker, index, workload, trial, axes, calls, rng, given=maker._given,
            draw_whole=lambda t, shape, override: maker._random(rng, t, shape, trial, axes,
                                                                override),
            draw_pool=draw_pool)

    def _random(self, keys, rng, t, shape, trial, axes, override):
        maker = self.maker
        float_dist = maker.distributions[trial % len(maker.distributions)]
        field = (override or {}).get("field") or f"correctness.input_overrides.{t.name}"
        drawn = sample(self.mx, keys, t, shape, override, float_dist, field)
        if drawn is None:  # not one MLX draws: NumPy's, as on the host, uploaded
            return self.upload(maker._random(rng, t, shape, trial, axes, override), t)
        return drawn


def can_draw(mx):
    """Whether this MLX draws on its default device (a build without random kernels there
    keeps NumPy's draws instead of failing every evaluation)."""
    try:
        key = mx.random.key(1)
        mx.eval(mx.random.normal((4,), key=key), mx.random.uniform(shape=(4,), key=key))
    except Exception:  # noqa: BLE001 - any failure means: draw on the host
        return False
    return True


class _Keys:
    """A key per draw, split from one seeded key in draw order."""

    def __init__(self, mx, seed):
        self.mx = mx
        self._key = mx.random.key(seed)

    def next(self):
        self._key, sub = self.mx.random.split(self._key)
        return sub


def sample(mx, keys, t, shape, override, float_dist, field):
    """One draw of float tensor `t` of `shape` by MLX, in t's dtype; None for what MLX does not
    draw here (see the module's notes)."""
    if t.dtype_name not in _FLOATS:
        return None
    if override is not None:
        dist, params = override["distribution"], override
    else:
        dist, params = float_dist, host._DEFAULTS[float_dist]
    size = tuple(int(s) for s in shape)
    f32 = mx.float32
    if dist == "normal":
        x = mx.random.normal(size, dtype=f32, key=keys.next())
        x = x * host._num(params, "std", field) + host._num(params, "mean", field)
    elif dist == "uniform":
        low, high = host._num(params, "low", field), host._num(params, "high", field)
        x = mx.random.uniform(low=low, high=high, shape=size, dtype=f32, key=keys.next())
    elif dist == "heavy_tailed":
        df = host._num(params, "df", field)
        if not (df > 0 and float(df).is_integer() and df <= _WHOLE_DF):
            return None  # a non-positive df is refused by the host's draw, with its message
        z = mx.random.normal(size, dtype=f32, key=keys.next())
        v = mx.zeros(size, dtype=f32)
        for _ in range(int(df)):
            v = v + mx.square(mx.random.normal(size, dtype=f32, key=keys.next()))
        x = z / mx.sqrt(v / df) * host._num(params, "scale", field)
    else:
        return None
    return x.astype(getattr(mx, t.dtype_name))
