"""Seeded input generation: trial t of workload i draws from SeedSequence([seed, i, t]).

Every call returns freshly allocated arrays; the caller keeps earlier trials' arrays alive while
the next are drawn, so no trial can be served from an address a candidate saw before.
"""

import os

import numpy as np

from . import safetensors_reader
from .errors import TaskError

DISTRIBUTIONS = ("normal", "uniform", "heavy_tailed", "randint")
_DEFAULTS = {
    "normal": {"mean": 0.0, "std": 1.0},
    "uniform": {"low": -1.0, "high": 1.0},
    "heavy_tailed": {"df": 3.0, "scale": 1.0},
    "randint": {"low": 0, "high": 100},
}


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
            dist = o.get("distribution") if isinstance(o, dict) else None
            if dist not in DISTRIBUTIONS:
                raise TaskError(f"{field}.distribution", f"unknown distribution {dist!r}; expected "
                                                         f"one of {', '.join(DISTRIBUTIONS)}")
            self.overrides[name] = {**_DEFAULTS[dist], **o}
        self._loaded = {}

    def draw(self, index, workload, trial, axes):
        """Inputs in definition order: arrays as ndarrays, scalars as NumPy scalars."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, index, trial]))
        float_dist = self.distributions[trial % len(self.distributions)]
        given = workload.get("inputs") or {}
        values = []
        for t in self.spec.inputs:
            field = f"workloads[{index}].inputs.{t.name}"
            desc = given.get(t.name) or {"type": "random"}
            kind = desc.get("type") if isinstance(desc, dict) else None
            shape = None if t.is_scalar else self.spec.shape(t, axes)
            if kind == "random":
                override = self.overrides.get(t.name)
                value = _sample(rng, t.dtype, shape, override, float_dist, axes,
                                f"correctness.input_overrides.{t.name}")
            elif kind == "scalar":
                if not t.is_scalar:
                    raise TaskError(field, f"'{t.name}' is an array, but workload {index} gives "
                                           f"it as a scalar")
                value = _scalar(desc.get("value"), t.dtype, field)
            elif kind == "safetensors":
                value = self._from_file(desc, t, shape, field)
            else:
                raise TaskError(f"{field}.type", f"unknown input type {kind!r}; expected random, "
                                                 f"scalar or safetensors")
            values.append(value)
        return values

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
        low = _bound(params.get("low"), axes, f"{field}.low")
        high = _bound(params.get("high"), axes, f"{field}.high")
        if high <= low:
            raise TaskError(field, f"randint needs low < high, got [{low}, {high})")
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if low < info.min or high - 1 > info.max:
                raise TaskError(field, f"randint range [{low}, {high}) does not fit {dtype.name}")
        x = rng.integers(low, high, size=size, dtype=np.int64)
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


def _bound(value, axes, field):
    if isinstance(value, str):
        if value not in axes:
            raise TaskError(field, f"randint bound {value!r} is not an axis of the definition")
        return axes[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise TaskError(field, f"randint bound {value!r} must be an integer or an axis name")
    return int(value)


def _num(params, key, field):
    value = params.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TaskError(f"{field}.{key}", f"{key} must be a number, not {value!r}")
    return float(value)
