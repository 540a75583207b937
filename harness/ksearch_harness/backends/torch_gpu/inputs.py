"""Inputs drawn on a CUDA device with a seeded torch generator (the GPU backends' InputMaker).

The rules are inputs.py's, drawn where the kernels run instead of with NumPy on the host: trial
t of workload i draws from a torch generator on the device seeded with the first 64-bit word of
SeedSequence([seed, i, t]).generate_state (vetting: SeedSequence([seed, 0, 0, 1])), array
inputs in definition order. A random scalar (a Python number for the call) is drawn on the host
from NumPy's generator of the same SeedSequence. The distributions and their parameters are
inputs.py's: normal and uniform in float32 (float64 for float64 inputs); heavy_tailed as
Student t, z / sqrt(v / df) with v ~ chi-square(df) (a sum of df squared normals for a whole df
up to 8, else 2 * Gamma(df / 2)); randint, coin flips, offsets (sorted cut points) and unique
(a random permutation's head) as on the host. Values are then converted to the input's dtype on
the device (float16 and bfloat16 rounded from float32, integers from rounded floats).

Reproducible for a given seed, torch version and device kind (torch's Philox generator), not
bit-equal to the NumPy draws of the CPU backends. Drawing 33.5 M normal values takes about
0.1 ms on an H200 where NumPy on the host took about a second (bench/results/eval-cost-gpu.md).

Timing (`feed`, backends/common/device_feed.py, shared with the mlx backend): the same pools,
windows and offsets as inputs.py's Feed, with the pools on the device (so a call's contents are
copied device to device) and the offsets drawn by NumPy from SeedSequence([seed, i, trials]) as
before.
"""

import math

import numpy as np

from ... import inputs as host
from ...errors import TaskError
from ..common import device_feed

# Above this many values a `unique` input is drawn on the host (a permutation of the whole range
# on the device would be too large); below it, torch.randperm on the device.
_UNIQUE_ON_DEVICE = 1 << 26
_WHOLE_DF = 8


def torch_seed(entropy):
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])


class DeviceInputs:
    """Draws of an InputMaker (inputs.py) made on a torch device."""

    def __init__(self, maker, torch, device, upload):
        self.maker = maker
        self.torch = torch
        self.device = device
        self.upload = upload  # (host array, tensor spec) -> device tensor

    def _generators(self, entropy):
        gen = self.torch.Generator(device=self.device)
        gen.manual_seed(torch_seed(entropy))
        return gen, np.random.default_rng(np.random.SeedSequence(entropy))

    def draw(self, index, workload, trial, axes, stream=None):
        maker = self.maker
        entropy = [maker.seed, index, trial] + ([] if stream is None else [stream])
        gen, rng = self._generators(entropy)
        values = []
        for t, kind, desc, shape, field, override in maker._described(index, workload, axes):
            if kind != "random":
                values.append(self._given(kind, desc, t, shape, index, field))
            elif shape is None:
                values.append(maker._random(rng, t, None, trial, axes, override))
            else:
                values.append(self._random(gen, t, shape, trial, axes, override))
        return values

    def feed(self, index, workload, trial, axes, calls):
        gen, rng = self._generators([self.maker.seed, index, trial])

        def draw(t, shape, override):  # a pool or a structured input's draw, on the device
            return self._random(gen, t, shape, trial, axes, override)

        return device_feed.feed(self.maker, index, workload, trial, axes, calls, rng,
                                given=self._given, draw_whole=draw, draw_pool=draw)

    def _given(self, kind, desc, t, shape, index, field):
        value = self.maker._given(kind, desc, t, shape, index, field)
        if isinstance(value, np.ndarray):
            return self.upload(value, t)
        return value

    def _random(self, gen, t, shape, trial, axes, override):
        maker = self.maker
        float_dist = maker.distributions[trial % len(maker.distributions)]
        field = (override or {}).get("field") or f"correctness.input_overrides.{t.name}"
        return sample(self.torch, gen, self.device, t, shape, override, float_dist, axes, field)


def sample(torch, gen, device, t, shape, override, float_dist, axes, field):
    """One draw of tensor `t` of `shape` on `device`, in t's torch dtype."""
    target = getattr(torch, t.dtype_name)
    kind = "f" if t.dtype_name == "bfloat16" else t.dtype.kind
    size = tuple(shape)
    if override is not None:
        dist, params = override["distribution"], override
    elif kind == "f":
        dist, params = float_dist, host._DEFAULTS[float_dist]
    elif kind == "b":
        dist, params = "coin", None
    else:
        dist, params = "randint", host._DEFAULTS["randint"]
    work = torch.float64 if t.dtype_name == "float64" else torch.float32
    on = {"device": device, "generator": gen}
    if dist == "coin":
        return torch.randint(0, 2, size, dtype=torch.uint8, **on).to(torch.bool)
    if dist == "randint":
        low, high = host._range(params, t.dtype, axes, field, "randint")
        return torch.randint(low, high, size, dtype=torch.int64, **on).to(target)
    if dist == "unique":
        low, high = host._range(params, t.dtype, axes, field, "unique")
        n = math.prod(size)
        if kind not in "iu":
            raise TaskError(field, f"unique needs an integer input, not {t.dtype_name}")
        if n > high - low:
            raise TaskError(field, f"unique cannot draw {n} distinct values from [{low}, "
                                   f"{high}) ({high - low} values)")
        if high - low > _UNIQUE_ON_DEVICE:
            rng = np.random.default_rng(int(torch.randint(0, 2 ** 62, (1,), **on).item()))
            x = host._sample(rng, t.dtype, size, override, float_dist, axes, field)
            return torch.from_numpy(x).to(device)
        x = torch.randperm(high - low, dtype=torch.int64, **on)[:n] + low
        return x.reshape(size).to(target)
    if dist == "offsets":
        if kind not in "iu":
            raise TaskError(field, f"offsets needs an integer input, not {t.dtype_name}")
        if len(size) != 1:
            raise TaskError(field, f"offsets needs a 1-D input, not shape {list(size)}")
        total = host._bound(params.get("total"), axes, f"{field}.total")
        n = size[0]
        if total < 0:
            raise TaskError(f"{field}.total", f"offsets total must not be negative, got {total}")
        if n == 0 or (n == 1 and total != 0):
            raise TaskError(field, f"offsets ending at {total} need at least 2 elements, the "
                                   f"input has {n}")
        if total > np.iinfo(t.dtype).max:
            raise TaskError(f"{field}.total", f"offsets total {total} does not fit "
                                              f"{t.dtype_name}")
        x = torch.empty(n, dtype=torch.int64, device=device)
        x[0] = 0
        if n > 1:
            cuts = torch.randint(0, total + 1, (n - 2,), dtype=torch.int64, **on)
            x[1:-1] = torch.sort(cuts).values
            x[-1] = total
        return x.to(target)
    if dist == "normal":
        x = torch.randn(size, dtype=work, **on)
        x.mul_(host._num(params, "std", field)).add_(host._num(params, "mean", field))
    elif dist == "uniform":
        low, high = host._num(params, "low", field), host._num(params, "high", field)
        x = torch.rand(size, dtype=work, **on)
        x.mul_(high - low).add_(low)
    else:  # heavy_tailed: Student t
        df = host._num(params, "df", field)
        if not df > 0:
            raise TaskError(f"{field}.df", f"df must be positive, got {df:g}")
        x = torch.randn(size, dtype=work, **on)
        x.div_(torch.sqrt(_chi_square(torch, size, work, df, on).div_(df)))
        x.mul_(host._num(params, "scale", field))
    if kind in "iu":
        x = x.round_()
    return x.to(target)


def _chi_square(torch, size, work, df, on):
    if float(df).is_integer() and df <= _WHOLE_DF:
        v = torch.randn(size, dtype=work, **on).square_()
        for _ in range(int(df) - 1):
            v.add_(torch.randn(size, dtype=work, **on).square_())
        return v
    alpha = torch.full(size, df / 2.0, dtype=work, device=on["device"])
    return torch._standard_gamma(alpha, generator=on["generator"]).mul_(2.0)
