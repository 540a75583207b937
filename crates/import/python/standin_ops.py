"""ksearch's shape-only stand-in for PyTorch, part 3: factories (which record their origin) and
torch functions. See standin_dtypes.py.
"""

import collections
import contextlib
import functools
import math

import standin_dtypes as D
from standin_dtypes import (Missing, _builtin_bool, _builtin_float, _builtin_int, _promote, dtype,
                            int32, int64)
from standin_tensor import Tensor, _dim, _sizes, _tensor

# ---------------------------------------------------------------------------------------------
# factories

def _factory(fn, size_args, kwargs, default=None, **origin):
    dt = kwargs.get("dtype") or default or D._default_float
    if not isinstance(dt, dtype):
        raise Missing(f"dtype {dt!r}")
    return Tensor(_sizes(size_args), dt, kwargs.get("device") or "cpu", {"fn": fn, **origin})


def randn(*size, **kw):
    return _factory("randn", size, kw)


def rand(*size, **kw):
    return _factory("rand", size, kw)


def empty(*size, **kw):
    return _factory("empty", size, kw)


def zeros(*size, **kw):
    return _factory("zeros", size, kw)


def ones(*size, **kw):
    return _factory("ones", size, kw)


def full(size, fill_value, **kw):
    default = int64 if isinstance(fill_value, _builtin_int) and not isinstance(fill_value, _builtin_bool) else None
    return _factory("full", (size,), kw, default, value=fill_value)


def randint(*args, **kw):
    size = kw.pop("size", None)
    if size is None:
        *bounds, size = args
    else:
        bounds = list(args)
    low, high = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
    if "low" in kw or "high" in kw:
        low, high = kw.pop("low", low), kw.pop("high", high)
    return _factory("randint", (size,), kw, int64, low=low, high=high)


def randperm(n, **kw):
    return _factory("randperm", (n,), kw, int64)


def normal(mean=0.0, std=1.0, size=None, **kw):
    if size is None:
        raise Missing("torch.normal without a size")
    return _factory("normal", (size,), kw, mean=mean, std=std)


def arange(start, end=None, step=1, **kw):
    if end is None:
        start, end = 0, start
    n = max(0, math.ceil((end - start) / step))
    isint = all(isinstance(v, _builtin_int) for v in (start, end, step))
    return _factory("arange", (n,), kw, int64 if isint else None)


def linspace(start, end, steps, **kw):
    return _factory("linspace", (steps,), kw)


def logspace(start, end, steps, base=10.0, **kw):
    return _factory("logspace", (steps,), kw)


def eye(n, m=None, **kw):
    return _factory("eye", (n, n if m is None else m), kw)


def _like_factory(fn):
    def make(t, *args, **kw):
        dt = kw.get("dtype") or t.dtype
        out = Tensor(t.shape, dt, kw.get("device") or t.device, {"fn": fn})
        if fn == "full":
            out.origin["value"] = args[0] if args else kw.get("fill_value")
        if fn == "randint":
            low, high = (0, args[0]) if len(args) == 1 else (args[0], args[1])
            out.origin.update(low=low, high=high)
        return out
    return make


randn_like, rand_like, empty_like, zeros_like, ones_like, full_like, randint_like = (
    _like_factory(f) for f in ("randn", "rand", "empty", "zeros", "ones", "full", "randint"))


def tensor(data, dtype=None, device=None, requires_grad=False):
    def shape_of(x):
        if isinstance(x, (list, tuple)):
            inner = [shape_of(e) for e in x]
            if any(s != inner[0] for s in inner):
                raise ValueError("ragged nested sequence")
            return (len(x),) + (inner[0] if inner else ())
        return ()

    def leaves(x):
        if isinstance(x, (list, tuple)):
            for e in x:
                yield from leaves(e)
        else:
            yield x

    if isinstance(data, Tensor):
        return data.to(dtype) if dtype else data.clone()
    values = list(leaves(data))
    if dtype is None:
        dtype = D._default_float if any(isinstance(v, _builtin_float) for v in values) else (
            D.bool if values and all(isinstance(v, _builtin_bool) for v in values) else int64)
    return Tensor(shape_of(data), dtype, device or "cpu", {"fn": "tensor"})


as_tensor = tensor


def from_numpy(array):
    raise Missing("torch.from_numpy")


# ---------------------------------------------------------------------------------------------
# functions

def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum: {len(terms)} terms for {len(operands)} operands")
    # '...': the dimensions a term leaves unnamed, broadcast across the operands (right-aligned),
    # each given a letter of its own that the equation does not use.
    spare = (chr(c) for c in range(0x100, 0x200) if chr(c) not in equation)
    widths = [op.dim() - (len(term) - 3) if "..." in term else 0 for term, op in zip(terms, operands)]
    if any(w < 0 for w in widths):
        raise RuntimeError(f"einsum: a term of '{equation}' names more dimensions than its operand has")
    dots = "".join(next(spare) for _ in range(max(widths, default=0)))
    terms = [t.replace("...", dots[len(dots) - w:] if w else "") for t, w in zip(terms, widths)]
    sizes = {}
    for term, op in zip(terms, operands):
        if len(term) != op.dim():
            raise RuntimeError(f"einsum term '{term}' does not fit a {op.dim()}-D operand")
        for letter, size in zip(term, op.shape):
            known = sizes.setdefault(letter, size)
            if known != size:
                if 1 not in (size, known):
                    raise RuntimeError(f"einsum: '{letter}' is {known} and {size}")
                sizes[letter] = max(known, size)  # a 1 broadcasts
    if arrow:
        output = output.replace("...", dots)
    else:
        singles = "".join(sorted(c for c in sizes if c not in dots and "".join(terms).count(c) == 1))
        output = dots + singles
    dt = functools.reduce(_promote, (o.dtype for o in operands))
    return Tensor(tuple(sizes[c] for c in output), dt, operands[0].device)


def cat(tensors, dim=0):
    tensors = list(tensors)
    d = _dim(dim, tensors[0].dim())
    shape = list(tensors[0].shape)
    shape[d] = sum(t.shape[d] for t in tensors)
    return Tensor(tuple(shape), functools.reduce(_promote, (t.dtype for t in tensors)), tensors[0].device)


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    return cat([t.unsqueeze(dim) for t in tensors], dim)


def outer(a, b):
    return Tensor((a.numel(), b.numel()), _promote(a.dtype, b.dtype), a.device)


def gather(t, dim, index):
    return Tensor(index.shape, t.dtype, t.device)


def index_select(t, dim, index):
    d = _dim(dim, t.dim())
    return t._like(t.shape[:d] + (index.numel(),) + t.shape[d + 1:])


def manual_seed(seed):
    return Generator().manual_seed(seed)


def seed():
    return 0


def is_tensor(x):
    return isinstance(x, Tensor)


def is_floating_point(x):
    return x.is_floating_point()


def set_default_dtype(d):
    D._default_float = d


def get_default_dtype():
    return D._default_float


class Generator:
    def __init__(self, device="cpu"):
        self.device = device

    def manual_seed(self, seed):
        return self

    def seed(self):
        return 0

    def initial_seed(self):
        return 0


class no_grad(contextlib.ContextDecorator):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


inference_mode = enable_grad = no_grad


def set_grad_enabled(mode):
    return no_grad()


def compile(model=None, **kwargs):  # noqa: A001 - torch.compile
    if model is None:
        return lambda m: m
    return model


def _method(name):
    def call(x, *a, **k):
        return getattr(_tensor(x), name)(*a, **k)
    call.__name__ = name
    return call


# torch.abs, torch.sum, ...: kept out of this module's globals, where they would hide builtins.
_FUNCTIONS = {}
for _name in ("abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan tanh sigmoid relu "
              "floor ceil round trunc sign reciprocal square erf erfc clamp clamp_min clamp_max clip "
              "nan_to_num tril triu cumsum cumprod softmax log_softmax isnan isinf isfinite "
              "add sub mul div pow maximum minimum eq ne lt gt le ge sum mean prod amax amin std var "
              "norm logsumexp all any argmax argmin max min topk sort argsort reshape flatten permute "
              "transpose swapaxes t unsqueeze squeeze chunk split narrow masked_fill unbind "
              "sinh cosh atan asin acos frac logical_not diagonal diag_embed repeat_interleave").split():
    _FUNCTIONS[_name] = _method(_name)
del _name
_FUNCTIONS.update(multiply=_FUNCTIONS["mul"], subtract=_FUNCTIONS["sub"], divide=_FUNCTIONS["div"],
                  true_divide=_FUNCTIONS["div"])




# ---------------------------------------------------------------------------------------------
# torch.linalg and the LAPACK-style functions on torch (GPU MODE's linalg problems)

_LU = collections.namedtuple("cholesky_ex", ["L", "info"])
_EIGH = collections.namedtuple("eigh", ["eigenvalues", "eigenvectors"])
_QR = collections.namedtuple("qr", ["Q", "R"])
_GEQRF = collections.namedtuple("geqrf", ["a", "tau"])


def _matrices(a, what):
    if a.dim() < 2:
        raise RuntimeError(f"{what}: the input must have at least 2 dimensions, not {a.dim()}")
    return tuple(a.shape[:-2]), a.shape[-2], a.shape[-1]


def _square(a, what):
    batch, m, n = _matrices(a, what)
    if m != n:
        raise RuntimeError(f"{what}: a batch of square matrices is needed, not {m} by {n}")
    return batch, n


def _linalg_cholesky(a, upper=False, out=None):
    _square(a, "linalg.cholesky")
    return Tensor(a.shape, a.dtype, a.device)


def _linalg_cholesky_ex(a, upper=False, check_errors=False, out=None):
    batch, _ = _square(a, "linalg.cholesky_ex")
    return _LU(Tensor(a.shape, a.dtype, a.device), Tensor(batch, int32, a.device))


def _linalg_eigh(a, UPLO="L", out=None):
    batch, n = _square(a, "linalg.eigh")
    return _EIGH(Tensor(batch + (n,), a.dtype, a.device), Tensor(a.shape, a.dtype, a.device))


def _linalg_eigvalsh(a, UPLO="L", out=None):
    batch, n = _square(a, "linalg.eigvalsh")
    return Tensor(batch + (n,), a.dtype, a.device)


def _linalg_qr(a, mode="reduced", out=None):
    batch, m, n = _matrices(a, "linalg.qr")
    k = min(m, n)
    if mode == "complete":
        return _QR(Tensor(batch + (m, m), a.dtype, a.device), Tensor(batch + (m, n), a.dtype, a.device))
    if mode == "r":
        return _QR(Tensor((0,), a.dtype, a.device), Tensor(batch + (k, n), a.dtype, a.device))
    return _QR(Tensor(batch + (m, k), a.dtype, a.device), Tensor(batch + (k, n), a.dtype, a.device))


def _linalg_householder_product(a, tau, out=None):
    _matrices(a, "linalg.householder_product")
    return Tensor(a.shape, a.dtype, a.device)


def _linalg_matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False, dtype=None, out=None):
    n = a.dim()
    dims = sorted(_dim(d, n) for d in dim)
    shape = [1 if i in dims else s for i, s in enumerate(a.shape)] if keepdim else \
        [s for i, s in enumerate(a.shape) if i not in dims]
    return Tensor(tuple(shape), dtype or a.dtype, a.device)


def multinomial(input, num_samples, replacement=False, generator=None, out=None):  # noqa: A002
    if input.dim() not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, not {input.dim()}")
    return Tensor(tuple(input.shape[:-1]) + (num_samples,), int64, input.device,
                  {"fn": "multinomial"})


def geqrf(a, out=None):
    batch, m, n = _matrices(a, "geqrf")
    return _GEQRF(Tensor(a.shape, a.dtype, a.device), Tensor(batch + (min(m, n),), a.dtype, a.device))


_LINALG = {"cholesky": _linalg_cholesky, "cholesky_ex": _linalg_cholesky_ex, "eigh": _linalg_eigh,
          "eigvalsh": _linalg_eigvalsh, "qr": _linalg_qr,
          "householder_product": _linalg_householder_product, "matrix_norm": _linalg_matrix_norm}
