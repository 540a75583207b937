"""The timing feed of the backends that draw inputs on their device (torch_gpu/inputs.py's
DeviceInputs, mlx/inputs.py's MlxInputs): inputs.py's Feed, the same pools, windows and offsets,
with the arrays drawn where the backend says.

One implementation so that the two cannot drift apart: what a call's inputs are, and in which
order NumPy's generator is drawn from (each input's draws in definition order, a random
scalar's and whatever the backend draws with NumPy, then every window's offsets), is decided
here alone. The backends differ only in how an array is drawn or put on the device, and hand
those steps in.
"""

import math

from ... import inputs as host


def feed(maker, index, workload, trial, axes, calls, rng, given, draw_whole, draw_pool):
    """What `calls` timed calls of workload `index` get (inputs.py's InputMaker.feed), for
    `maker` (an InputMaker) drawing on a device.

    `rng`: NumPy's generator of SeedSequence([seed, index, trial]), the one the backend's
    device generator was seeded alongside; random scalars and the windows' offsets come from
    it. The backend's steps, each called in definition order:
    `given(kind, desc, t, shape, index, field)`: a scalar or safetensors input, as every call
    gets it; `draw_whole(t, shape, override)`: one draw of a structured input (a call's own);
    `draw_pool(t, size, override)`: a random array input's pool of `size` elements, ready on
    the device (the windows are slices of it).
    """
    sources = []
    for t, kind, desc, shape, field, override in maker._described(index, workload, axes):
        if kind != "random":
            sources.append(host._Fixed(t, given(kind, desc, t, shape, index, field)))
        elif shape is None:
            sources.append(host._Each(t, maker._random(rng, t, (calls,), trial, axes, override)))
        elif override is not None and override["distribution"] in host.STRUCTURED:
            sources.append(host._Draws(t, shape, [draw_whole(t, shape, override)
                                                  for _ in range(calls)]))
        else:
            n = math.prod(shape)
            extra = max(calls, min(n, host.POOL_EXTRA_BYTES // device_itemsize(t)))
            sources.append(host._Window(t, shape, draw_pool(t, (n + extra,), override), extra))
    # Offsets last, as inputs.py draws them: the NumPy draws a backend makes for its pools or
    # structured inputs (mlx's, of what MLX does not draw) come first from the same generator.
    for source in sources:
        if isinstance(source, host._Window):
            source.offsets = host._offsets(rng, source.extra, calls, source.row)
    return host.Feed(sources)


def device_itemsize(t):
    """Bytes per element of tensor `t` on the device: bfloat16 is held as float32 on the host
    but is 2 bytes there (so its pool's extra is the host rule's for 2-byte elements)."""
    return 2 if t.dtype_name == "bfloat16" else t.dtype.itemsize
