"""The task's reference: `run(**inputs)` from the definition's Python source.

References are written with NumPy, PyTorch or MLX; torch is imported only when the reference
imports it, and then inputs are handed over as tensors: on the CPU sharing memory with our NumPy
arrays, or (GPU backends) the device tensors the backend's memory made. An MLX reference (one
that holds mlx.core) gets MLX arrays: the mlx backend's own, or copies of NumPy arrays
elsewhere, and its (lazy) results are evaluated when they are copied back. A NumPy reference
gets NumPy arrays on every backend.
"""

import sys
import types

import numpy as np

from .errors import ReferenceRaised, TaskError

_MODULE = "ksearch_reference"


class Reference:
    def __init__(self, source, spec):
        if not isinstance(source, str) or not source.strip():
            raise TaskError("reference", "the definition has no reference source")
        self.spec = spec
        module = types.ModuleType(_MODULE)
        module.__file__ = "<definition.reference>"
        # Registered so that dataclasses and the like inside the reference can find their module.
        sys.modules[_MODULE] = module
        imported_before = "torch" in sys.modules
        try:
            exec(compile(source, "<definition.reference>", "exec"), module.__dict__)
        except Exception as e:
            raise TaskError("reference", f"the reference source fails to load: "
                                                    f"{type(e).__name__}: {e}") from None
        self.run = module.__dict__.get("run")
        if not callable(self.run):
            raise TaskError("reference", "the reference source defines no run() function")
        # torch when the reference uses it: it imported torch itself, or it holds a torch module
        # or function (a GPU backend imports torch before the reference is loaded).
        uses_torch = (not imported_before and "torch" in sys.modules) or any(
            _from_torch(v) for v in module.__dict__.values())
        self.torch = sys.modules.get("torch") if uses_torch else None
        # MLX when the reference holds mlx.core (or a function of it); the mlx backend imports
        # MLX before the reference is loaded, so importing is no sign by itself.
        uses_mlx = any(_from_module(v, "mlx") for v in module.__dict__.values())
        self.mlx = sys.modules.get("mlx.core") if uses_mlx else None

    def arguments(self, inputs):
        """Keyword arguments for run() from inputs in definition order (arrays are not copied)."""
        kwargs = {}
        for t, value in zip(self.spec.inputs, inputs):
            if isinstance(value, np.ndarray):
                if self.torch:
                    kwargs[t.name] = self.torch.from_numpy(value)
                elif self.mlx:
                    kwargs[t.name] = self.mlx.array(value)
                else:
                    kwargs[t.name] = value
            elif hasattr(value, "item") and not _is_tensor(value):
                kwargs[t.name] = value.item()
            else:
                kwargs[t.name] = value  # a device tensor, or a Python number
        return kwargs

    def call(self, kwargs, where):
        try:
            return self.run(**kwargs)
        except Exception as e:
            text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise ReferenceRaised(f"the reference raised {text} ({where})", type(e)) from None

    def outputs(self, raw, shapes, where):
        """The reference's return value as NumPy arrays in definition output order."""
        arrays = []
        for name, value, shape in zip(*self.named_values(raw, shapes, where)):
            array = self._to_numpy(value)
            if array.dtype.kind not in "fiub":
                raise TaskError("reference", f"the reference's output '{name}' has "
                                                        f"dtype {array.dtype}, not a number ({where})")
            if array.shape != shape:
                raise TaskError("reference", f"the reference's output '{name}' has "
                                                        f"shape {list(array.shape)}, but the "
                                                        f"definition gives {list(shape)} ({where})")
            arrays.append(array)
        return arrays

    def named_values(self, raw, shapes, where):
        """(names, values, shapes) of the reference's return value in definition output order,
        its values as returned (the GPU backends take device tensors from here:
        torch_gpu's DeviceOps.reference_outputs)."""
        names = [t.name for t in self.spec.outputs]
        if isinstance(raw, dict):
            missing = [n for n in names if n not in raw]
            if missing:
                raise TaskError("reference", f"the reference's result has no output "
                                                        f"'{missing[0]}' ({where})")
            values = [raw[n] for n in names]
        elif isinstance(raw, (tuple, list)):
            if len(raw) != len(names):
                raise TaskError("reference", f"the reference returned {len(raw)} "
                                                        f"values for {len(names)} outputs ({where})")
            values = list(raw)
        elif len(names) == 1:
            values = [raw]
        else:
            raise TaskError("reference", f"the reference returned one value for "
                                                    f"{len(names)} outputs ({where})")
        return names, values, list(shapes)

    def _to_numpy(self, value):
        """Host NumPy array of a result; bfloat16 (and other dtypes NumPy lacks) as float32."""
        torch = self.torch
        if torch is not None and isinstance(value, torch.Tensor):
            value = value.detach()
            if value.dtype not in (torch.float64, torch.float32, torch.float16, torch.int64,
                                   torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
                value = value.float()
            return value.cpu().numpy()
        mx = self.mlx
        if mx is not None and isinstance(value, mx.array):
            if value.dtype == mx.bfloat16:
                value = value.astype(mx.float32)  # exact
            return np.array(value, copy=True)
        return np.asarray(value)


def _from_torch(value):
    return _from_module(value, "torch")


def _from_module(value, package):
    if isinstance(value, types.ModuleType):
        name = value.__name__
    else:
        name = getattr(value, "__module__", None) or ""
    return name == package or name.startswith(package + ".")


def _is_tensor(value):
    """A torch tensor or an MLX array (both have .item(), but are passed as they are)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return True
    mx = sys.modules.get("mlx.core")
    return mx is not None and isinstance(value, mx.array)
