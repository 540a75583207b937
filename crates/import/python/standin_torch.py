"""ksearch's shape-only stand-in for PyTorch, part 4: torch.nn, torch.nn.functional, and
`install()`, which puts the stand-in in sys.modules as torch and its submodules. See
standin_dtypes.py.
"""

import sys
import types

import standin_dtypes as D
import standin_ops as O
import standin_tensor as T
from standin_dtypes import Missing, _builtin_int
from standin_ops import _method, compile  # noqa: A004 - torch.compile
from standin_tensor import Tensor, _broadcast

# ---------------------------------------------------------------------------------------------
# torch.nn

class Module:
    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "training", True)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def _self(self, *a, **k):
        return self

    to = cuda = cpu = half = float = double = bfloat16 = requires_grad_ = zero_grad = _self

    def eval(self):
        object.__setattr__(self, "training", False)
        return self

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        return self

    def register_buffer(self, name, value, persistent=True):
        setattr(self, name, value)

    register_parameter = register_buffer

    def add_module(self, name, module):
        setattr(self, name, module)

    def children(self):
        return [v for v in vars(self).values() if isinstance(v, Module)]

    def modules(self):
        out = [self]
        for c in self.children():
            out.extend(c.modules())
        return out

    def named_children(self):
        # Containers hold their modules in a list; their names are the positions, as torch's.
        own = [(k, v) for k, v in vars(self).items() if isinstance(v, Module)]
        return own if own else [(str(i), c) for i, c in enumerate(self.children())]

    def named_modules(self, prefix=""):
        # Qualified names as torch gives them ("dropout", "layers.0.drop"): the probe names
        # dropout modules with them, and both engines must write the same task.
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix="", recurse=True):
        for k, v in vars(self).items():
            if isinstance(v, Tensor):
                yield prefix + k, v
            elif isinstance(v, Module) and recurse:
                yield from v.named_parameters(prefix + k + ".")

    def parameters(self, recurse=True):
        return (v for _, v in self.named_parameters(recurse=recurse))

    def apply(self, fn):
        for m in self.modules():
            fn(m)
        return self

    def state_dict(self):
        return dict(self.named_parameters())


def Parameter(data=None, requires_grad=True):  # noqa: N802 - torch.nn.Parameter
    out = data.clone() if isinstance(data, Tensor) else Tensor((0,))
    out.requires_grad = requires_grad
    return out


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Tensor((out_features, in_features), dtype)
        self.bias = Tensor((out_features,), dtype) if bias else None

    def forward(self, x):
        return linear(x, self.weight, self.bias)


class _Elementwise(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x._like()


class ReLU(_Elementwise):
    pass


class Dropout(_Elementwise):
    """Keeps p: the probe reads it to find dropout that is active in training mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = p


LeakyReLU = GELU = SiLU = Sigmoid = Tanh = Identity = Hardtanh = ELU = Softplus = Mish = \
    Hardswish = Hardsigmoid = ReLU6 = SELU = CELU = Softsign = Tanhshrink = Threshold = ReLU


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.softmax(self.dim)


LogSoftmax = Softmax


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, _builtin_int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.weight = Tensor(shape, dtype) if elementwise_affine else None
        self.bias = Tensor(shape, dtype) if elementwise_affine and bias else None

    def forward(self, x):
        return layer_norm(x, self.normalized_shape)


RMSNorm = LayerNorm


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, *args, **kwargs):
        super().__init__()
        self.weight = Tensor((num_embeddings, embedding_dim), kwargs.get("dtype"))

    def forward(self, idx):
        return Tensor(idx.shape + (self.weight.shape[1],), self.weight.dtype, idx.device)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            modules = tuple(modules[0].values())
        self._seq = list(modules)

    def forward(self, x):
        for m in self._seq:
            x = m(x)
        return x

    def __iter__(self):
        return iter(self._seq)

    def __getitem__(self, i):
        return self._seq[i]

    def __len__(self):
        return len(self._seq)

    def children(self):
        return list(self._seq)


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        self._list = list(modules)

    def __iter__(self):
        return iter(self._list)

    def __getitem__(self, i):
        return self._list[i]

    def __len__(self):
        return len(self._list)

    def append(self, m):
        self._list.append(m)
        return self

    def children(self):
        return list(self._list)


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        self._dict = dict(modules or {})

    def __getitem__(self, k):
        return self._dict[k]

    def __iter__(self):
        return iter(self._dict)

    def items(self):
        return self._dict.items()

    def children(self):
        return list(self._dict.values())

    def named_children(self):
        return [(str(k), v) for k, v in self._dict.items()]


# torch.nn.functional

def linear(x, weight, bias=None):
    if x.shape[-1] != weight.shape[-1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (input has {x.shape[-1]} "
                           f"features, weight {weight.shape[-1]})")
    return Tensor(x.shape[:-1] + (weight.shape[0],), x.dtype, x.device)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = (normalized_shape,) if isinstance(normalized_shape, _builtin_int) else tuple(normalized_shape)
    if tuple(x.shape[len(x.shape) - len(shape):]) != shape:
        raise RuntimeError(f"normalized_shape {list(shape)} does not match input {list(x.shape)}")
    return x._like()


rms_norm = layer_norm


def _act(x, *a, **k):
    return x._like()


def scaled_dot_product_attention(q, k, v, *args, **kwargs):
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError("query and key head sizes differ")
    return Tensor(_broadcast(q.shape[:-2], v.shape[:-2]) + (q.shape[-2], v.shape[-1]), q.dtype, q.device)


def _loss(x, target=None, *args, reduction="mean", **kwargs):
    return x._like() if reduction == "none" else Tensor((), x.dtype, x.device)


def cross_entropy(x, target, *args, reduction="mean", **kwargs):
    return Tensor(target.shape, x.dtype, x.device) if reduction == "none" else Tensor((), x.dtype, x.device)


def cosine_similarity(a, b, dim=1, eps=1e-8):
    return Tensor(_broadcast(a.shape, b.shape), a.dtype, a.device)._reduce(dim)


def normalize(x, p=2.0, dim=1, eps=1e-12):
    return x._like()


def pad(x, pad, mode="constant", value=None):
    """torch.nn.functional.pad: `pad` = (left, right) of the last dimension, then of the one
    before it, ...; negative amounts crop."""
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > len(x.shape):
        raise RuntimeError(f"Padding length must be divisible by 2 and at most twice the input's "
                           f"{len(x.shape)} dimensions, got {len(pad)}")
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        d = len(shape) - 1 - i
        size = shape[d] + _builtin_int(pad[2 * i]) + _builtin_int(pad[2 * i + 1])
        if size < 0:
            raise RuntimeError(f"padding {pad} makes dimension {d} of {list(x.shape)} negative")
        shape[d] = size
    return Tensor(shape, x.dtype, x.device)


def _conv(n):
    """torch.nn.functional.conv{n}d's shapes: input (N, C_in, *spatial) or (C_in, *spatial),
    weight (C_out, C_in / groups, *kernel)."""

    def per_dim(v, name):
        v = (v,) * n if isinstance(v, _builtin_int) else tuple(v)
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer or a list of {n} integers")
        return v

    def conv(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        batched = len(x.shape) == n + 2
        if not batched and len(x.shape) != n + 1:
            raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                               f"conv{n}d, but got input of size: {list(x.shape)}")
        if len(weight.shape) != n + 2:
            raise RuntimeError(f"conv{n}d: weight of size {list(weight.shape)} is not {n + 2}-D")
        if x.dtype != weight.dtype:
            raise RuntimeError(f"Input type ({x.dtype}) and weight type ({weight.dtype}) should be the same")
        channels = x.shape[1] if batched else x.shape[0]
        out_channels, per_group = weight.shape[0], weight.shape[1]
        if channels != per_group * groups or out_channels % groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
                               f"input{list(x.shape)} to have {per_group * groups} channels, but got "
                               f"{channels} channels instead")
        if bias is not None and tuple(bias.shape) != (out_channels,):
            raise RuntimeError(f"bias of size {list(bias.shape)} for {out_channels} output channels")
        stride, dilation = per_dim(stride, "stride"), per_dim(dilation, "dilation")
        spatial = x.shape[-n:]
        kernel = weight.shape[2:]
        if padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            out = tuple(spatial)
        else:
            padding = (0,) * n if padding == "valid" else per_dim(padding, "padding")
            out = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1
                        for i, p, d, k, s in zip(spatial, padding, dilation, kernel, stride))
        if any(o <= 0 for o in out):
            raise RuntimeError(f"conv{n}d: kernel {list(kernel)} is larger than the (padded) input "
                               f"{list(spatial)}")
        lead = (x.shape[0], out_channels) if batched else (out_channels,)
        return Tensor(lead + out, x.dtype, x.device)

    conv.__name__ = f"conv{n}d"
    return conv


conv1d, conv2d, conv3d = _conv(1), _conv(2), _conv(3)


def _init(t, *a, **k):
    return t


# ---------------------------------------------------------------------------------------------
# the module objects

def _distribution(name):
    """torch.distributions.NAME(...): `.sample(shape)` (and rsample) give a tensor of that shape
    (float32, or the broadcast shape of tensor parameters before it)."""
    class Distribution:
        def __init__(self, *params, **kw):
            tensors = [p for p in (*params, *kw.values()) if isinstance(p, Tensor)]
            batch = ()
            for t in tensors:
                batch = _broadcast(batch, t.shape)
            self._batch = batch
            self._dtype = tensors[0].dtype if tensors else D._default_float

        def sample(self, sample_shape=()):
            shape = tuple(sample_shape) if isinstance(sample_shape, (tuple, list)) else \
                (sample_shape,)
            return Tensor(shape + tuple(self._batch), self._dtype, "cpu",
                          {"fn": name.lower()})

        rsample = sample
    Distribution.__name__ = Distribution.__qualname__ = name
    return Distribution


def _module(name, names, doc):
    m = types.ModuleType(name, doc)

    def missing(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise Missing(f"{name}.{attr}")

    m.__getattr__ = missing
    m.__dict__.update(names)
    return m


def _public(module):
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType)
            and k not in ("Missing", "install")}


def install():
    """Puts the stand-in in sys.modules as torch, torch.nn, torch.nn.functional and friends."""
    public = {**_public(D), **_public(T), **_public(O), **_public(sys.modules[__name__])}
    F = _module("torch.nn.functional", {
        "linear": linear, "layer_norm": layer_norm, "rms_norm": rms_norm,
        "scaled_dot_product_attention": scaled_dot_product_attention, "cross_entropy": cross_entropy,
        "cosine_similarity": cosine_similarity, "normalize": normalize, "pad": pad,
        "conv1d": conv1d, "conv2d": conv2d, "conv3d": conv3d,
        "softmax": _method("softmax"), "log_softmax": _method("log_softmax"),
        **{n: _act for n in ("relu", "relu6", "leaky_relu", "gelu", "silu", "sigmoid", "tanh",
                             "softplus", "elu", "selu", "celu", "hardtanh", "hardswish",
                             "hardsigmoid", "mish", "dropout", "softsign", "logsigmoid")},
        **{n: _loss for n in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                              "binary_cross_entropy", "kl_div", "hinge_embedding_loss")},
    }, "stand-in for torch.nn.functional")
    init = _module("torch.nn.init", {n: _init for n in (
        "normal_", "uniform_", "zeros_", "ones_", "constant_", "xavier_uniform_", "xavier_normal_",
        "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_", "eye_")},
        "stand-in for torch.nn.init")
    nn = _module("torch.nn", {
        "Module": Module, "Parameter": Parameter, "Linear": Linear, "ReLU": ReLU,
        "LeakyReLU": LeakyReLU, "GELU": GELU, "SiLU": SiLU, "Sigmoid": Sigmoid, "Tanh": Tanh,
        "Identity": Identity, "Dropout": Dropout, "Hardtanh": Hardtanh, "ELU": ELU,
        "Softplus": Softplus, "Mish": Mish, "Hardswish": Hardswish, "Hardsigmoid": Hardsigmoid,
        "ReLU6": ReLU6, "SELU": SELU, "CELU": CELU, "Softsign": Softsign, "Tanhshrink": Tanhshrink,
        "Threshold": Threshold, "Softmax": Softmax, "LogSoftmax": LogSoftmax,
        "LayerNorm": LayerNorm, "RMSNorm": RMSNorm, "Embedding": Embedding, "Flatten": Flatten,
        "Sequential": Sequential, "ModuleList": ModuleList, "ModuleDict": ModuleDict,
        "functional": F, "init": init,
        # What a reference asks to find dropout modules (nn.modules.dropout._DropoutNd).
        "modules": types.SimpleNamespace(dropout=types.SimpleNamespace(_DropoutNd=Dropout)),
    }, "stand-in for torch.nn")
    cuda = _module("torch.cuda", {
        "is_available": lambda: False, "synchronize": lambda *a, **k: None,
        "manual_seed": lambda *a: None, "manual_seed_all": lambda *a: None,
        "current_device": lambda: 0, "device_count": lambda: 0,
        "empty_cache": lambda: None,
    }, "stand-in for torch.cuda")
    cudnn = types.SimpleNamespace(allow_tf32=False, deterministic=False, benchmark=False, enabled=True)
    backends = _module("torch.backends", {
        "cudnn": cudnn,
        "cuda": types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)),
        "mps": types.SimpleNamespace(is_available=lambda: False),
    }, "stand-in for torch.backends")
    linalg = _module("torch.linalg", dict(O._LINALG), "stand-in for torch.linalg")
    distributions = _module("torch.distributions", {
        n: _distribution(n) for n in ("Normal", "Uniform", "Cauchy", "StudentT", "Laplace",
                                      "Exponential", "Gamma", "Bernoulli", "LogNormal")},
        "stand-in for torch.distributions")
    jit = _module("torch.jit", {"script": compile, "trace": lambda f, *a, **k: f,
                                "ignore": lambda f=None, **k: f}, "stand-in for torch.jit")
    torch = _module("torch", {
        **public, **O._FUNCTIONS, "nn": nn, "cuda": cuda, "backends": backends, "jit": jit,
        "linalg": linalg, "distributions": distributions,
        "float": D.float32, "int": D.int32, "bool": D.bool, "Tensor": Tensor,
        "use_deterministic_algorithms": lambda *a, **k: None,
        "set_printoptions": lambda *a, **k: None,
        "__version__": "0+standin",
    }, "ksearch's shape-only stand-in for PyTorch")
    for name, module in (("torch", torch), ("torch.nn", nn), ("torch.nn.functional", F),
                         ("torch.nn.init", init), ("torch.cuda", cuda),
                         ("torch.backends", backends), ("torch.jit", jit),
                         ("torch.linalg", linalg), ("torch.distributions", distributions)):
        sys.modules[name] = module
    return torch
