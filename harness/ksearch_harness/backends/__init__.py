"""Backends by `device.backend` name: one package each under backends/, named by it, whose class
`Backend` subclasses base.Backend. base.py is the contract (the methods, and the files every
package has). Packages are imported on demand so that a run pays only for the backend it uses.
"""

import importlib

# The backends, each a package of this name under backends/.
NAMES = ("c", "cpp", "cuda", "cuda_binding", "mlx", "python", "triton")
# The packages under backends/ that are no backend: code several of them share.
SHARED = ("common", "torch_gpu")


def backend_class(name):
    """The Backend class of backend `name` (its package imported), or ValueError."""
    if name not in NAMES:
        raise ValueError(f"backend {name!r} is not implemented by this harness "
                         f"(available: {', '.join(sorted(NAMES))})")
    return importlib.import_module(f"{__name__}.{name}").Backend


def get(name):
    return backend_class(name)()
