"""Seeded input generation: trial t of workload i draws from SeedSequence([seed, i, t]).

Every call returns freshly allocated arrays; the caller keeps earlier trials' arrays alive while
the next are drawn, so no trial can be served from an address a candidate saw before.

Timing draws differently (`feed`): one pool per random input, from which every timed call gets
its own window, so no two calls see the same contents (docs/protocol.md, Timing). Structured
integer inputs (`offsets`, `unique`) cannot be windows of a pool, since a window of offsets is
not offsets: each timed call gets its own draw instead.
"""

import ast
import math
import os

import numpy as np

from . import safetensors_reader
from .errors import TaskError

DISTRIBUTIONS = ("normal", "uniform", "heavy_tailed", "randint", "offsets", "unique")
# Integer distributions whose elements depend on each other: drawn whole, never windowed.
STRUCTURED = ("offsets", "unique")
_DEFAULTS = {
    "normal": {"mean": 0.0, "std": 1.0},
    "uniform": {"low": -1.0, "high": 1.0},
    "heavy_tailed": {"df": 3.0, "scale": 1.0},
    "randint": {"low": 0, "high": 100},
    "offsets": {},
    "unique": {"low": 0},
}
# A timing pool holds an input's n elements plus extra = max(calls, min(n, this many bytes'
# worth)) more: twice the input up to 64 MiB of extra, and at least one extra element per call.
POOL_EXTRA_BYTES = 64 << 20


class InputMaker:
    def __init__(self, spec, correctness, seed, task_dir):
        self.spec = spec
        self.seed = int(seed)
        self.task_dir = task_dir
        self.distributions = list(correctness.get("distributions") or ["normal"])
        for i, d in enumerate(self.distributions):
            if d not in DISTRIBUTIONS or d == "randint":
                raise TaskError(f"correctness.distributions[{i}]",
                                f"unknown float distribution {d!r}; expected normal, uniform "
                                f"or heavy_tailed")
        self.overrides = {}
        for name, o in (correctness.get("input_overrides") or {}).items():
            field = f"correctness.input_overrides.{name}"
            if name not in {t.name for t in spec.inputs}:
                raise TaskError(field, f"input_overrides names '{name}', which is not an input")
            self.overrides[name] = _distribution(o, field)
        self._loaded = {}
        self._device = None

    def on_device(self, torch, device, upload):
        """Draw array inputs on a torch device from now on (backends/torch_gpu/inputs.py): draw() returns
        device tensors for them and feed() keeps its pools there. `upload(array, tensor)`
        copies a host array (a safetensors input) to the device."""
        from .backends.torch_gpu.inputs import DeviceInputs
        self._device = DeviceInputs(self, torch, device, upload)

    def draw_with(self, device_inputs):
        """Draw with `device_inputs` (a backend's: backends/mlx/inputs.py) from now on: its
        draw() and feed() replace this maker's."""
        self._device = device_inputs

    def draw(self, index, workload, trial, axes, stream=None):
        """Inputs in definition order: arrays as ndarrays, scalars as NumPy scalars.

        `stream` (an int) selects a separate sequence, SeedSequence([seed, i, t, stream]), with
        trial t's distribution: used to vet the reference on inputs no candidate ever gets.
        """
        if self._device is not None:
            return self._device.draw(index, workload, trial, axes, stream)
        rng = self._rng(index, trial, stream)
        values = []
        for t, kind, desc, shape, field, override in self._described(index, workload, axes):
            if kind == "random":
                values.append(self._random(rng, t, shape, trial, axes, override))
            else:
                values.append(self._given(kind, desc, t, shape, index, field))
        return values

    def feed(self, index, workload, trial, axes, calls):
        """What `calls` timed calls get, drawn from SeedSequence([seed, i, trial]).

        Each random array input gets one pool of n + extra elements from its distribution
        (extra = max(calls, min(n, POOL_EXTRA_BYTES / itemsize))), drawn in definition order,
        then per input `calls` distinct window offsets into it (pairwise distinct modulo the
        innermost extent where that extent allows). Random scalars get `calls` fresh values.
        Scalar and safetensors inputs are the same in every call.
        """
        if self._device is not None:
            return self._device.feed(index, workload, trial, axes, calls)
        rng = self._rng(index, trial, None)
        sources = []
        for t, kind, desc, shape, field, override in self._described(index, workload, axes):
            if kind != "random":
                sources.append(_Fixed(t, self._given(kind, desc, t, shape, index, field)))
            elif shape is None:
                sources.append(_Each(t, self._random(rng, t, (calls,), trial, axes, override)))
            elif override is not None and override["distribution"] in STRUCTURED:
                sources.append(_Draws(t, shape, [self._random(rng, t, shape, trial, axes, override)
                                                 for _ in range(calls)]))
            else:
                n = math.prod(shape)
                extra = max(calls, min(n, POOL_EXTRA_BYTES // t.dtype.itemsize))
                pool = self._random(rng, t, (n + extra,), trial, axes, override)
                sources.append(_Window(t, shape, pool, extra))
        for source in sources:
            if isinstance(source, _Window):
                source.offsets = _offsets(rng, source.extra, calls, source.row)
        return Feed(sources)

    def _rng(self, index, trial, stream):
        entropy = [self.seed, index, trial] + ([] if stream is None else [stream])
        return np.random.default_rng(np.random.SeedSequence(entropy))

    def _described(self, index, workload, axes):
        """Per input: tensor, kind, descriptor, shape, field, and the fixed distribution of a
        random input (the task's override, else the workload's own, else None). The task's
        override wins so that a task author can correct what ksearch synthesised for an absent
        safetensors file."""
        given = workload.get("inputs") or {}
        for t in self.spec.inputs:
            field = f"workloads[{index}].inputs.{t.name}"
            desc = given.get(t.name) or {"type": "random"}
            kind = desc.get("type") if isinstance(desc, dict) else None
            if kind not in ("random", "scalar", "safetensors"):
                raise TaskError(f"{field}.type", f"unknown input type {kind!r}; expected random, "
                                                 f"scalar or safetensors")
            shape = None if t.is_scalar else self.spec.shape(t, axes)
            override = None
            if kind == "random" and t.name in self.overrides:
                override = self.overrides[t.name]
            elif kind == "random" and "distribution" in desc:
                override = _distribution({k: v for k, v in desc.items() if k != "type"}, field)
                override["field"] = field
            yield t, kind, desc, shape, field, override

    def _random(self, rng, t, shape, trial, axes, override):
        float_dist = self.distributions[trial % len(self.distributions)]
        field = (override or {}).get("field") or f"correctness.input_overrides.{t.name}"
        return _sample(rng, t.dtype, shape, override, float_dist, axes, field)

    def _given(self, kind, desc, t, shape, index, field):
        if kind == "scalar":
            if not t.is_scalar:
                raise TaskError(field, f"'{t.name}' is an array, but workload {index} gives "
                                       f"it as a scalar")
            return _scalar(desc.get("value"), t.dtype, field)
        return self._from_file(desc, t, shape, field)

    def _from_file(self, desc, tensor, shape, field):
        path, key = desc.get("path"), desc.get("tensor_key")
        if not isinstance(path, str) or not isinstance(key, str):
            raise TaskError(field, "a safetensors input needs 'path' and 'tensor_key' strings")
        root = os.path.realpath(self.task_dir or ".")
        full = os.path.realpath(os.path.join(root, path))
        if os.path.commonpath([root, full]) != root:
            raise TaskError(f"{field}.path", f"{path!r} points outside the task folder")
        cache_key = (full, key)
        if cache_key not in self._loaded:
            try:
                self._loaded[cache_key] = safetensors_reader.load(full, key)
            except (OSError, ValueError) as e:
                raise TaskError(f"{field}.path", f"cannot read {key!r} from {path}: {e}") from None
        array = self._loaded[cache_key]
        if array.dtype != tensor.dtype:
            raise TaskError(field, f"{path}:{key} holds {array.dtype.name}, but '{tensor.name}' "
                                   f"is {tensor.dtype_name}")
        if tensor.is_scalar:
            if array.size != 1:
                raise TaskError(field, f"{path}:{key} has shape {list(array.shape)}, but "
                                       f"'{tensor.name}' is a scalar")
            return array.reshape(())[()]
        if array.shape != shape:
            raise TaskError(field, f"{path}:{key} has shape {list(array.shape)}, but "
                                   f"'{tensor.name}' needs {list(shape)} for this workload")
        return array.copy()


def _distribution(o, field):
    """A distribution descriptor with its defaults filled in; `field` locates it in errors."""
    dist = o.get("distribution") if isinstance(o, dict) else None
    if dist not in DISTRIBUTIONS:
        raise TaskError(f"{field}.distribution", f"unknown distribution {dist!r}; expected "
                                                 f"one of {', '.join(DISTRIBUTIONS)}")
    return {**_DEFAULTS[dist], **o}


def _scalar(value, dtype, field):
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number or (isinstance(value, bool) and dtype.kind == "b")):
        raise TaskError(f"{field}.value", f"scalar value {value!r} is not a number")
    if dtype.kind in "iu" and not float(value).is_integer():
        raise TaskError(f"{field}.value", f"scalar value {value!r} is not an integer")
    return dtype.type(value)


def _sample(rng, dtype, shape, override, float_dist, axes, field):
    size = () if shape is None else shape
    if override is not None:
        dist, params = override["distribution"], override
    elif dtype.kind == "f":
        dist, params = float_dist, _DEFAULTS[float_dist]
    elif dtype.kind == "b":
        dist, params = "coin", None
    else:
        dist, params = "randint", _DEFAULTS["randint"]

    # float32 and float16 are drawn in float32: half the memory traffic of float64.
    work = np.float64 if dtype == np.float64 else np.float32
    if dist == "coin":
        x = rng.integers(0, 2, size=size, dtype=np.uint8).astype(np.bool_)
    elif dist == "randint":
        low, high = _range(params, dtype, axes, field, "randint")
        x = rng.integers(low, high, size=size, dtype=np.int64)
    elif dist == "unique":
        low, high = _range(params, dtype, axes, field, "unique")
        n = math.prod(size)
        if dtype.kind not in "iu":
            raise TaskError(field, f"unique needs an integer input, not {dtype.name}")
        if n > high - low:
            raise TaskError(field, f"unique cannot draw {n} distinct values from [{low}, {high}) "
                                   f"({high - low} values)")
        x = (rng.permutation(high - low)[:n] if n * 4 >= high - low
             else rng.choice(high - low, size=n, replace=False)) + low
        x = x.astype(np.int64).reshape(size)
    elif dist == "offsets":
        x = _offsets_array(rng, dtype, size, params, axes, field)
    elif dist == "normal":
        x = rng.standard_normal(size=size, dtype=work)
        x *= _num(params, "std", field)
        x += _num(params, "mean", field)
    elif dist == "uniform":
        low, high = _num(params, "low", field), _num(params, "high", field)
        x = rng.random(size=size, dtype=work)
        x *= high - low
        x += low
    else:  # heavy_tailed: Student t
        x = rng.standard_t(_num(params, "df", field), size=size) * _num(params, "scale", field)
    if dtype.kind in "iu" and x.dtype.kind == "f":
        x = np.rint(x)
    x = np.asarray(x).astype(dtype, copy=False)
    if not x.flags.writeable or not x.flags.c_contiguous or x.base is not None:
        x = x.copy()
    return x[()] if shape is None else x


def _range(params, dtype, axes, field, what):
    low = _bound(params.get("low"), axes, f"{field}.low")
    high = _bound(params.get("high"), axes, f"{field}.high")
    if high <= low:
        raise TaskError(field, f"{what} needs low < high, got [{low}, {high})")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if low < info.min or high - 1 > info.max:
            raise TaskError(field, f"{what} range [{low}, {high}) does not fit {dtype.name}")
    return low, high


def _offsets_array(rng, dtype, size, params, axes, field):
    """0, then non-decreasing values ending at `total`: the cut points of `total` elements into
    len - 1 segments, drawn uniformly (with repeats, so segments may be empty)."""
    if dtype.kind not in "iu":
        raise TaskError(field, f"offsets needs an integer input, not {dtype.name}")
    if len(size) != 1:
        raise TaskError(field, f"offsets needs a 1-D input, not shape {list(size)}")
    total = _bound(params.get("total"), axes, f"{field}.total")
    n = size[0]
    if total < 0:
        raise TaskError(f"{field}.total", f"offsets total must not be negative, got {total}")
    if n == 0 or (n == 1 and total != 0):
        raise TaskError(field, f"offsets ending at {total} need at least 2 elements, the input "
                               f"has {n}")
    if total > np.iinfo(dtype).max:
        raise TaskError(f"{field}.total", f"offsets total {total} does not fit {dtype.name}")
    x = np.empty(n, np.int64)
    x[0] = 0
    if n > 1:
        x[1:-1] = np.sort(rng.integers(0, total + 1, size=n - 2, dtype=np.int64))
        x[-1] = total
    return x


_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
              ast.Mult: lambda a, b: a * b, ast.Mod: lambda a, b: a % b}


def _bound(value, axes, field):
    """An integer, an axis name, or an integer expression over the axes (+ - * / %, brackets;
    `/` must divide exactly)."""
    if isinstance(value, str):
        try:
            tree = ast.parse(value.strip(), mode="eval")
        except SyntaxError:
            raise TaskError(field, f"bound {value!r} is not an expression over axes") from None
        return _evaluate(tree.body, value, axes, field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise TaskError(field, f"bound {value!r} must be an integer, an axis name or an "
                               f"expression over axes")
    return int(value)


def _evaluate(node, text, axes, field):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in axes:
            if node.id == text.strip():
                raise TaskError(field, f"bound {text!r} is not an axis of the definition")
            raise TaskError(field, f"bound {text!r} uses {node.id!r}, which is not an axis of "
                                   f"the definition")
        return axes[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _evaluate(node.operand, text, axes, field)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a = _evaluate(node.left, text, axes, field)
        b = _evaluate(node.right, text, axes, field)
        if isinstance(node.op, (ast.Div, ast.Mod)) and b == 0:
            raise TaskError(field, f"bound {text!r} divides by zero")
        if isinstance(node.op, ast.Div):
            if a % b:
                raise TaskError(field, f"bound {text!r}: {a} / {b} is not an integer")
            return a // b
        if type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](a, b)
    raise TaskError(field, f"bound {text!r} may only use integers, axis names, + - * / % and "
                           f"parentheses")


def _num(params, key, field):
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TaskError(f"{field}.{key}", f"{key} must be a number, not {value!r}")
    return float(value)


class Feed:
    """The inputs of every timed call of one workload (see InputMaker.feed)."""

    def __init__(self, sources):
        self.sources = sources

    def buffers(self):
        """One array per array input, to be refilled for every call; None for scalars."""
        return [None if s.tensor.is_scalar else np.empty(s.shape(), s.tensor.dtype)
                for s in self.sources]

    def fill(self, k, buffers):
        """Copy call k's contents into `buffers`; returns the values to pass (definition order)."""
        values = []
        for source, buffer in zip(self.sources, buffers):
            expected = source.expected(k)
            if buffer is None:
                values.append(expected)
            else:
                np.copyto(buffer, expected)
                values.append(buffer)
        return values

    def expected(self, k):
        """Call k's contents: arrays (windows, not copies) and scalars, in definition order."""
        return [s.expected(k) for s in self.sources]

    @property
    def varies(self):
        """False when every input is the same in every call (scalars and files only)."""
        return any(not isinstance(s, _Fixed) for s in self.sources)


class _Fixed:
    def __init__(self, tensor, value):
        self.tensor, self.value = tensor, value

    def shape(self):
        return self.value.shape

    def expected(self, k):
        return self.value


class _Each:
    def __init__(self, tensor, values):
        self.tensor, self.values = tensor, values

    def expected(self, k):
        return self.values[k]


class _Draws:
    """One whole draw per call: structured inputs, whose windows would break the structure."""

    def __init__(self, tensor, shape, draws):
        self.tensor, self._shape, self.draws = tensor, shape, draws

    def shape(self):
        return self._shape

    def expected(self, k):
        return self.draws[k]


class _Window:
    def __init__(self, tensor, shape, pool, extra):
        self.tensor, self._shape, self.pool, self.extra = tensor, shape, pool, extra
        self.n = math.prod(shape)
        self.row = shape[-1] if shape else 1  # innermost extent
        self.offsets = None

    def shape(self):
        return self._shape

    def expected(self, k):
        o = int(self.offsets[k])
        return self.pool[o:o + self.n].reshape(self._shape)


def _offsets(rng, extra, calls, row):
    """`calls` distinct offsets in [0, extra]; distinct modulo `row` too when row allows it.

    Distinct residues mean no call sees a row (innermost run of `row` elements) that an earlier
    call saw at the same place in its input.
    """
    if calls <= 0:
        return np.zeros(0, np.int64)
    lanes = min(row, extra + 1)
    if row > 0 and lanes >= calls:
        residue = rng.choice(lanes, size=calls, replace=False)
        quotient = rng.integers(0, (extra - residue) // row + 1)
        return residue + row * quotient
    return rng.choice(extra + 1, size=calls, replace=False)
