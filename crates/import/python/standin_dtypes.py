"""ksearch's shape-only stand-in for PyTorch, part 1: dtypes, devices, and `Missing`.

Tensors (standin_tensor.py) carry a shape, a dtype, a device name and, when a factory made them, an
origin (which factory and its parameters), never values. Whatever the stand-in does not implement
raises `Missing(name)`, which the probe reports as "install PyTorch to import this problem".
standin_ops.py adds the torch functions, standin_torch.py the nn modules and the install.
"""

import builtins
import math

# This module defines torch's dtype names (float, int, bool), which hide the builtins.
_builtin_bool, _builtin_int, _builtin_float = builtins.bool, builtins.int, builtins.float


class Missing(Exception):
    """The stand-in lacks `what` (a torch name, a tensor method, or a data-dependent value)."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


# ---------------------------------------------------------------------------------------------
# dtypes and devices

class dtype:
    def __init__(self, name, kind, bits):
        self.name, self.kind, self.bits = name, kind, bits

    @property
    def is_floating_point(self):
        return self.kind == "f"

    @property
    def itemsize(self):
        return max(1, self.bits // 8)

    def __repr__(self):
        return f"torch.{self.name}"


float64 = double = dtype("float64", "f", 64)
float32 = float = dtype("float32", "f", 32)  # noqa: A001 - torch.float is float32
float16 = half = dtype("float16", "f", 16)
bfloat16 = dtype("bfloat16", "f", 16)
int64 = long = dtype("int64", "i", 64)
int32 = int = dtype("int32", "i", 32)  # noqa: A001 - torch.int is int32
int16 = short = dtype("int16", "i", 16)
int8 = dtype("int8", "i", 8)
uint8 = dtype("uint8", "u", 8)
bool = dtype("bool", "b", 8)  # noqa: A001 - torch.bool
_default_float = float32


def _rank(d):
    return {"b": 0, "u": 1, "i": 1, "f": 2}[d.kind]


def _promote(a, b):
    if a is b:
        return a
    if _rank(a) != _rank(b):
        return a if _rank(a) > _rank(b) else b
    if a.kind == "f" and {a.name, b.name} == {"float16", "bfloat16"}:
        return float32
    return a if a.bits >= b.bits else b


def _scalar_dtype(value):
    if isinstance(value, _builtin_bool):
        return bool
    if isinstance(value, _builtin_int):
        return int64
    if isinstance(value, _builtin_float):
        return _default_float
    raise Missing(f"an operand of type {type(value).__name__}")


class device:
    def __init__(self, kind="cpu", index=None):
        if isinstance(kind, device):
            kind = kind.type
        self.type = str(kind).split(":")[0]
        self.index = index

    def __repr__(self):
        return f"device(type='{self.type}')"

    def __eq__(self, other):
        return isinstance(other, device) and other.type == self.type

    __hash__ = object.__hash__


class Size(tuple):
    def numel(self):
        return math.prod(self)


class finfo:
    def __init__(self, d=None):
        d = d or _default_float
        self.bits = d.bits
        self.eps, self.max, self.min, self.tiny = {
            "float64": (2.2e-16, 1.8e308, -1.8e308, 2.2e-308),
            "float32": (1.19e-07, 3.4e38, -3.4e38, 1.18e-38),
            "float16": (9.77e-04, 65504.0, -65504.0, 6.1e-05),
            "bfloat16": (7.8e-03, 3.39e38, -3.39e38, 1.18e-38),
        }[d.name]


class iinfo:
    def __init__(self, d):
        self.bits = d.bits
        signed = d.kind == "i"
        self.max = 2 ** (d.bits - 1) - 1 if signed else 2 ** d.bits - 1
        self.min = -(2 ** (d.bits - 1)) if signed else 0
