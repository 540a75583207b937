"""ksearch's shape-only stand-in for PyTorch, part 2: tensors, and the products their methods use.

A tensor carries a shape, a dtype, a device name and, when a factory made it, an origin (which
factory and its parameters), never values. standin_dtypes.py has the dtypes, devices and `Missing`.
"""

import math

import standin_dtypes as D
# `bool` is torch.bool here, as in standin_dtypes.py, which keeps the builtins as `_builtin_*`.
from standin_dtypes import (  # noqa: A004 - torch.bool
    Missing, Size, _builtin_int, _promote, _rank, _scalar_dtype, bfloat16, bool, device, dtype,
    float16, float32, float64, int32, int64)

# ---------------------------------------------------------------------------------------------
# tensors

def _dim(d, n):
    if not -max(n, 1) <= d < max(n, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d % max(n, 1)


def _sizes(args):
    """Sizes given as f(2, 3), f((2, 3)), f([2, 3]) or f(torch.Size)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    out = []
    for a in args:
        if isinstance(a, Tensor):
            raise Missing("a tensor used as a size")
        out.append(_builtin_int(a))
    return tuple(out)


def _broadcast(a, b):
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                               f"at non-singleton dimension {max(len(a), len(b)) - i}")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


class _Pair(tuple):
    """torch's (values, indices) results."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


class Tensor:
    __hash__ = object.__hash__

    def __init__(self, shape, dt=None, dev="cpu", origin=None):
        self._shape = tuple(_builtin_int(s) for s in shape)
        if any(s < 0 for s in self._shape):
            raise RuntimeError(f"negative dimension in {list(self._shape)}")
        self.dtype = dt or D._default_float
        self.device = dev if isinstance(dev, device) else device(dev or "cpu")
        self.origin = origin
        self.requires_grad = False
        self.grad = None

    def __repr__(self):
        return f"tensor(shape={list(self._shape)}, dtype={self.dtype})"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise Missing(f"Tensor.{name}")

    # --- metadata
    @property
    def shape(self):
        return Size(self._shape)

    def size(self, d=None):
        return Size(self._shape) if d is None else self._shape[_dim(d, len(self._shape))]

    def dim(self):
        return len(self._shape)

    ndim = property(dim)

    def numel(self):
        return math.prod(self._shape)

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def data(self):
        return self

    def is_floating_point(self):
        return self.dtype.kind == "f"

    def is_contiguous(self, *a, **k):
        return True

    def stride(self, d=None):
        strides, acc = [], 1
        for s in reversed(self._shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
        return strides if d is None else strides[_dim(d, len(self._shape))]

    def _like(self, shape=None, dt=None, keep_origin=False):
        return Tensor(self._shape if shape is None else shape, dt or self.dtype, self.device,
                      self.origin if keep_origin else None)

    # --- values the stand-in does not have
    def _no_value(self, *a, **k):
        raise Missing("a tensor's values (.item(), bool(), int(), .tolist(), .numpy()): the "
                      "stand-in knows only shapes")

    item = tolist = numpy = __bool__ = __float__ = __int__ = __index__ = _no_value

    # --- same shape, same origin (devices, layout, grad flags)
    def to(self, *args, **kwargs):
        dt = kwargs.get("dtype")
        for a in args:
            if isinstance(a, dtype):
                dt = a
            elif isinstance(a, Tensor):
                dt = a.dtype
        dev = kwargs.get("device", next((a for a in args if isinstance(a, (str, device))), None))
        out = self._like(dt=dt, keep_origin=dt in (None, self.dtype))
        if dev is not None:
            out.device = device(dev)
        return out

    def cuda(self, *a, **k):
        out = self._like(keep_origin=True)
        out.device = device("cuda")
        return out

    def cpu(self, *a, **k):
        out = self._like(keep_origin=True)
        out.device = device("cpu")
        return out

    def contiguous(self, *a, **k):
        return self._like(keep_origin=True)

    clone = detach = contiguous

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    def type(self, dt=None):
        return self.to(dt) if dt is not None else f"torch.{self.dtype.name}"

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def half(self):
        return self.to(float16)

    def bfloat16(self):
        return self.to(bfloat16)

    def int(self):
        return self.to(int32)

    def long(self):
        return self.to(int64)

    def bool(self):
        return self.to(bool)

    # --- in-place fills: same tensor, new origin
    def normal_(self, mean=0.0, std=1.0, generator=None):
        self.origin = {"fn": "normal", "mean": mean, "std": std}
        return self

    def uniform_(self, a=0.0, b=1.0, generator=None):
        self.origin = {"fn": "uniform", "low": a, "high": b}
        return self

    def random_(self, a=None, b=None, generator=None):
        low, high = (0, a) if b is None else (a, b)
        self.origin = {"fn": "random_", "low": low, "high": high}
        return self

    def fill_(self, value):
        self.origin = {"fn": "full", "value": value}
        return self

    def zero_(self):
        self.origin = {"fn": "zeros"}
        return self

    def _inplace(self, *a, **k):
        self.origin = None
        return self

    add_ = sub_ = mul_ = div_ = clamp_ = copy_ = masked_fill_ = exponential_ = bernoulli_ = \
        abs_ = neg_ = exp_ = relu_ = sigmoid_ = tanh_ = pow_ = _inplace

    def __setitem__(self, index, value):
        self.origin = None

    # --- element-wise
    def _unary(self, *a, **k):
        return self._like()

    abs = neg = exp = exp2 = expm1 = log = log2 = log10 = log1p = sqrt = rsqrt = sin = cos = \
        tan = tanh = sigmoid = relu = floor = ceil = round = trunc = sign = reciprocal = square = \
        erf = erfc = clamp = clamp_min = clamp_max = clip = nan_to_num = tril = triu = \
        masked_fill = cumsum = cumprod = sinh = cosh = atan = asin = acos = frac = \
        __neg__ = __pos__ = __abs__ = __invert__ = logical_not = _unary

    def softmax(self, dim=None, *a, **k):
        _dim(dim if dim is not None else -1, len(self._shape))
        return self._like(dt=k.get("dtype"))

    log_softmax = softmax

    def isnan(self):
        return self._like(dt=bool)

    isinf = isfinite = isnan

    def _binary(self, other, op, reverse=False):
        if isinstance(other, Tensor):
            shape = _broadcast(self._shape, other._shape)
            dt = _promote(self.dtype, other.dtype)
        else:
            shape = self._shape
            sd = _scalar_dtype(other)
            dt = self.dtype if _rank(sd) <= _rank(self.dtype) else (D._default_float if sd.kind == "f" else int64)
        if op == "cmp":
            dt = bool
        elif op == "div" and dt.kind != "f":
            dt = D._default_float
        return Tensor(shape, dt, self.device)

    def __add__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __radd__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __sub__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __rsub__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __mul__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __rmul__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __truediv__(self, o): return self._binary(o, "div")  # noqa: E704
    def __rtruediv__(self, o): return self._binary(o, "div")  # noqa: E704
    def __floordiv__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __mod__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __pow__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __rpow__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __and__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __or__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __xor__(self, o): return self._binary(o, "arith")  # noqa: E704
    def __lt__(self, o): return self._binary(o, "cmp")  # noqa: E704
    def __le__(self, o): return self._binary(o, "cmp")  # noqa: E704
    def __gt__(self, o): return self._binary(o, "cmp")  # noqa: E704
    def __ge__(self, o): return self._binary(o, "cmp")  # noqa: E704
    def __eq__(self, o): return self._binary(o, "cmp")  # noqa: E704
    def __ne__(self, o): return self._binary(o, "cmp")  # noqa: E704

    def add(self, o, alpha=1): return self._binary(o, "arith")  # noqa: E704
    def sub(self, o, alpha=1): return self._binary(o, "arith")  # noqa: E704
    def mul(self, o): return self._binary(o, "arith")  # noqa: E704
    def div(self, o, rounding_mode=None): return self._binary(o, "div" if rounding_mode is None else "arith")  # noqa: E704,E501
    def pow(self, o): return self._binary(o, "arith")  # noqa: E704
    def maximum(self, o): return self._binary(o, "arith")  # noqa: E704
    def minimum(self, o): return self._binary(o, "arith")  # noqa: E704
    def eq(self, o): return self._binary(o, "cmp")  # noqa: E704
    def ne(self, o): return self._binary(o, "cmp")  # noqa: E704
    def lt(self, o): return self._binary(o, "cmp")  # noqa: E704
    def gt(self, o): return self._binary(o, "cmp")  # noqa: E704
    def le(self, o): return self._binary(o, "cmp")  # noqa: E704
    def ge(self, o): return self._binary(o, "cmp")  # noqa: E704

    def where(self, cond, other):
        return where(cond, self, other)

    # --- reductions
    def _reduce(self, dim=None, keepdim=False, dtype=None, out_dtype=None, *, pair=False):
        n = len(self._shape)
        dims = None if dim is None else [_dim(d, n) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
        if dims is None:
            shape = tuple(1 for _ in self._shape) if keepdim else ()
        else:
            shape = tuple(1 if i in dims else s for i, s in enumerate(self._shape)
                          if keepdim or i not in dims)
        values = Tensor(shape, dtype or out_dtype or self.dtype, self.device)
        if pair:
            return _Pair((values, Tensor(shape, int64, self.device)))
        return values

    def sum(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(dim, keepdim, dtype, int64 if self.dtype.kind in "biu" else None)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(dim, keepdim, dtype)

    def prod(self, dim=None, keepdim=False, dtype=None):
        return self._reduce(dim, keepdim, dtype)

    def amax(self, dim=None, keepdim=False):
        return self._reduce(dim, keepdim)

    amin = amax

    def std(self, dim=None, *a, keepdim=False, **k):
        return self._reduce(dim, keepdim)

    var = std

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return self._reduce(dim, keepdim, dtype)

    def logsumexp(self, dim, keepdim=False):
        return self._reduce(dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return self._reduce(dim, keepdim, bool)

    any = all

    def argmax(self, dim=None, keepdim=False):
        return self._reduce(dim, keepdim, int64)

    argmin = argmax

    def max(self, dim=None, keepdim=False):
        if isinstance(dim, Tensor):
            return self._binary(dim, "arith")
        return self._reduce(dim, keepdim, pair=dim is not None)

    min = max

    def topk(self, k, dim=-1, largest=True, sorted=True):
        d = _dim(dim, len(self._shape))
        shape = tuple(k if i == d else s for i, s in enumerate(self._shape))
        return _Pair((Tensor(shape, self.dtype, self.device), Tensor(shape, int64, self.device)))

    def sort(self, dim=-1, descending=False, stable=False):
        return _Pair((self._like(), self._like(dt=int64)))

    def argsort(self, dim=-1, descending=False, stable=False):
        return self._like(dt=int64)

    # --- shapes
    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], dtype):
            raise Missing("Tensor.view(dtype)")
        shape = list(_sizes(shape))
        if shape.count(-1) > 1:
            raise RuntimeError("only one dimension can be inferred")
        known = math.prod(s for s in shape if s != -1)
        if -1 in shape:
            if known == 0 or self.numel() % known:
                raise RuntimeError(f"shape {shape} is invalid for input of size {self.numel()}")
            shape[shape.index(-1)] = self.numel() // known
        if math.prod(shape) != self.numel():
            raise RuntimeError(f"shape {shape} is invalid for input of size {self.numel()}")
        return self._like(tuple(shape), keep_origin=True)

    reshape = view

    def view_as(self, other):
        return self.view(other.shape)

    reshape_as = view_as

    def flatten(self, start_dim=0, end_dim=-1):
        n = len(self._shape)
        if n == 0:
            return self._like((1,))
        s, e = _dim(start_dim, n), _dim(end_dim, n)
        shape = self._shape[:s] + (math.prod(self._shape[s:e + 1]),) + self._shape[e + 1:]
        return self._like(shape, keep_origin=True)

    def permute(self, *dims):
        dims = _sizes(dims)
        n = len(self._shape)
        if sorted(_dim(d, n) for d in dims) != list(range(n)):
            raise RuntimeError(f"permute dims {list(dims)} do not match {n} dimensions")
        return self._like(tuple(self._shape[_dim(d, n)] for d in dims))

    def transpose(self, d0, d1):
        n = len(self._shape)
        shape = list(self._shape)
        a, b = _dim(d0, n), _dim(d1, n)
        shape[a], shape[b] = shape[b], shape[a]
        return self._like(tuple(shape))

    swapaxes = transpose

    def diagonal(self, offset=0, dim1=0, dim2=1):
        """A view of the diagonal: dim1 and dim2 removed, their diagonal's length last."""
        n = len(self._shape)
        a, b = _dim(dim1, n), _dim(dim2, n)
        if a == b:
            raise RuntimeError("diagonal dimensions cannot be identical")
        rows, cols = self._shape[a], self._shape[b]
        length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
        rest = [s for i, s in enumerate(self._shape) if i not in (a, b)]
        return self._like(tuple(rest) + (length,))

    def repeat_interleave(self, repeats, dim=None, output_size=None):
        if not isinstance(repeats, _builtin_int):
            if output_size is None:
                raise D.Missing("Tensor.repeat_interleave with per-element repeats")
            repeats = None
        if dim is None:
            n = math.prod(self._shape)
            return self._like((output_size if repeats is None else n * repeats,))
        d = _dim(dim, len(self._shape))
        shape = list(self._shape)
        shape[d] = output_size if repeats is None else shape[d] * repeats
        return self._like(tuple(shape))

    def diag_embed(self, offset=0, dim1=-2, dim2=-1):
        """Matrices with this tensor's last dimension on their diagonal (the default dims)."""
        if (dim1, dim2) not in ((-2, -1), (-1, -2)):
            raise D.Missing("Tensor.diag_embed with other dims than the last two")
        n = self._shape[-1] + abs(offset)
        return self._like(tuple(self._shape[:-1]) + (n, n))

    def t(self):
        if len(self._shape) > 2:
            raise RuntimeError("t() expects a tensor with <= 2 dimensions")
        return self._like(tuple(reversed(self._shape)))

    @property
    def T(self):
        return self._like(tuple(reversed(self._shape)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def unsqueeze(self, d):
        n = len(self._shape) + 1
        d = _dim(d, n)
        return self._like(self._shape[:d] + (1,) + self._shape[d:], keep_origin=True)

    def squeeze(self, d=None):
        if d is None:
            return self._like(tuple(s for s in self._shape if s != 1), keep_origin=True)
        dims = [_dim(x, len(self._shape)) for x in (d if isinstance(d, (tuple, list)) else [d])]
        return self._like(tuple(s for i, s in enumerate(self._shape) if not (i in dims and s == 1)),
                          keep_origin=True)

    def expand(self, *sizes):
        sizes = _sizes(sizes)
        own = (1,) * (len(sizes) - len(self._shape)) + self._shape
        shape = tuple(o if s == -1 else s for s, o in zip(sizes, own))
        _broadcast(own, shape)
        return self._like(shape)

    def expand_as(self, other):
        return self.expand(other.shape)

    def repeat(self, *sizes):
        sizes = _sizes(sizes)
        own = (1,) * (len(sizes) - len(self._shape)) + self._shape
        return self._like(tuple(a * b for a, b in zip(own, sizes)))

    def narrow(self, dim, start, length):
        d = _dim(dim, len(self._shape))
        return self._like(self._shape[:d] + (length,) + self._shape[d + 1:])

    def chunk(self, chunks, dim=0):
        d = _dim(dim, len(self._shape))
        size = -(-self._shape[d] // chunks)
        return self.split(size, d)

    def split(self, size, dim=0):
        d = _dim(dim, len(self._shape))
        total = self._shape[d]
        sizes = list(size) if isinstance(size, (list, tuple)) else \
            [min(size, total - i) for i in range(0, total, size)]
        return tuple(self._like(self._shape[:d] + (s,) + self._shape[d + 1:]) for s in sizes)

    def unbind(self, dim=0):
        d = _dim(dim, len(self._shape))
        return tuple(self._like(self._shape[:d] + self._shape[d + 1:]) for _ in range(self._shape[d]))

    def __iter__(self):
        return iter(self.unbind(0))

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if any(isinstance(i, Tensor) or isinstance(i, list) for i in index):
            raise Missing("indexing with a tensor or a list")
        used = sum(1 for i in index if i is not None and i is not Ellipsis)
        if used > len(self._shape):
            raise IndexError(f"too many indices for a tensor of dimension {len(self._shape)}")
        if Ellipsis in index:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (len(self._shape) - used) + index[at + 1:]
        shape, dim = [], 0
        for i in index:
            if i is None:
                shape.append(1)
                continue
            size = self._shape[dim]
            if isinstance(i, slice):
                shape.append(len(range(*i.indices(size))))
            elif isinstance(i, _builtin_int):
                if not -size <= i < size:
                    raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            else:
                raise Missing(f"indexing with {type(i).__name__}")
            dim += 1
        shape.extend(self._shape[dim:])
        return self._like(tuple(shape))

    # --- products
    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    matmul = __matmul__

    def mm(self, other):
        return mm(self, other)

    def bmm(self, other):
        return bmm(self, other)


def _tensor(x):
    if isinstance(x, Tensor):
        return x
    return Tensor((), _scalar_dtype(x))


def matmul(a, b):
    a, b = _tensor(a), _tensor(b)
    sa, sb = a.shape, b.shape
    if len(sa) == 0 or len(sb) == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, sa))} and "
                           f"{'x'.join(map(str, sb))})")
    batch = _broadcast(sa[:-2], sb[:-2])
    shape = batch + (sa[-2:-1] if len(sa) >= 2 else ()) + (sb[-1:] if len(sb) >= 2 else ())
    return Tensor(shape, _promote(a.dtype, b.dtype), a.device)


def mm(a, b):
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError("mm expects 2-D tensors")
    return matmul(a, b)


def bmm(a, b):
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
        raise RuntimeError("bmm expects 3-D tensors with the same batch size")
    return matmul(a, b)


def where(cond, a=None, b=None):
    if a is None:
        raise Missing("torch.where(condition) (data-dependent shape)")
    a, b = _tensor(a), _tensor(b)
    return Tensor(_broadcast(_broadcast(cond.shape, a.shape), b.shape), _promote(a.dtype, b.dtype), a.device)
