"""Definition dtype names: their NumPy form, default tolerances and the poison of unwritten outputs.

bfloat16 has no NumPy dtype. The GPU backends hold it on the device as torch.bfloat16 and on
the host as float32 (`host_numpy`): inputs are drawn in float32 and rounded to bfloat16 where
they are copied to the device; outputs come back as their 16-bit patterns and are widened to
float32 exactly (`bfloat16_bits_to_float32`), so the comparison sees the values the kernel
wrote. The CPU backend has no bfloat16 at all.
"""

import numpy as np

from .errors import TaskError

_NUMPY = {
    "float64": np.float64, "float32": np.float32, "float16": np.float16,
    "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
    "uint8": np.uint8, "bool": np.bool_,
}
_NO_NUMPY = ("bfloat16", "float8_e4m3", "float8_e5m2", "float4_e2m1")

# ksearch's default tolerances (docs/task-format.md); Rust normally sends a complete table, these only cover a gap.
# Integers and bool compare exactly. fp8/fp4 have no default: the task must choose.
_DEFAULT_TOLERANCE = {"float64": 1e-4, "float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}

POISON_BOOL_BYTE = 0xAA


def known(name):
    return name in _NUMPY or name in _NO_NUMPY


def has_numpy(name):
    return name in _NUMPY


def to_numpy(name, field):
    try:
        return np.dtype(_NUMPY[name])
    except KeyError:
        pass
    if name in _NO_NUMPY:
        raise TaskError(field, f"dtype {name} has no NumPy equivalent, so this harness cannot "
                               f"create its arrays without a backend that supports it")
    raise TaskError(field, f"unknown dtype {name!r}; expected one of "
                           f"{', '.join(list(_NUMPY) + list(_NO_NUMPY))}")


def host_numpy(name, field, bfloat16_as_float32=False):
    """The NumPy dtype holding `name` on the host; bfloat16 as float32 where the backend allows."""
    if name == "bfloat16" and bfloat16_as_float32:
        return np.dtype(np.float32)
    return to_numpy(name, field)


def float32_to_bfloat16_bits(values):
    """Round float32 values to bfloat16 (to nearest, ties to even), as uint16 bit patterns.

    NaNs stay NaN (quiet, sign kept); infinities and overflow to infinity behave as in torch.
    """
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    with np.errstate(over="ignore"):
        rounded = ((bits + rounding) >> 16).astype(np.uint16)
    quiet = ((bits >> 16) | 0x0040).astype(np.uint16)
    return np.where(nan, quiet, rounded)


def bfloat16_bits_to_float32(bits):
    """Widen bfloat16 bit patterns (uint16 or int16) to float32; exact for every value."""
    wide = np.ascontiguousarray(bits).view(np.uint16).astype(np.uint32) << 16
    return wide.view(np.float32)


def is_float(dtype):
    return dtype.kind == "f"


def tolerance(name, table):
    """(atol, rtol) for outputs of dtype `name`, from the request's table or the defaults."""
    if name == "bool":
        return 0.0, 0.0
    entry = (table or {}).get(name)
    if entry is not None:
        return float(entry.get("atol", 0.0)), float(entry.get("rtol", 0.0))
    if name in _DEFAULT_TOLERANCE:
        return _DEFAULT_TOLERANCE[name], _DEFAULT_TOLERANCE[name]
    if name.startswith("float"):
        raise TaskError(f"correctness.tolerance.{name}",
                        f"outputs of dtype {name} need a tolerance set by the task")
    return 0.0, 0.0


def poison(array):
    """Fill with a value a correct kernel overwrites and the comparison rejects."""
    kind = array.dtype.kind
    if kind == "f":
        array.fill(np.nan)
    elif kind == "b":
        array.view(np.uint8).fill(POISON_BOOL_BYTE)
    else:
        array.fill(np.iinfo(array.dtype).max)


def poison_description(dtype):
    kind = dtype.kind
    if kind == "f":
        return "the NaN poison"
    if kind == "b":
        return f"the poison byte 0x{POISON_BOOL_BYTE:X}"
    return f"the poison value {np.iinfo(dtype).max}"
