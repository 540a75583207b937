"""Backend python's build and load (triton's too): the candidate's sources written to the build
folder and their syntax checked (compile() runs none of their code), the module run once at the
first load (a class entry constructed), and its call (`Kernel`) with torch tensors.
"""

import inspect
import os
import sys
import time

from ...errors import CandidateError
from ..common import pyloader, sources
from ..torch_gpu import device as gpu

CALLINGS = ("dps", "returns", "tuple")
_MODULE = "ksearch_candidate"


def check_module(candidate, workdir, name):
    """Write the sources and check their syntax (compile() runs none of their code). Returns (the
    `compile` event's fields, the Module when they were written and checked, else None); `name`
    is the backend's."""
    start = time.perf_counter()
    try:
        checked = sources.check(candidate, name, ".py", ".py source",
                                kind="a Python identifier", example="kernel.py")
        calling = candidate.get("calling") or (
            "dps" if candidate.get("destination_passing_style", True) else "returns")
        if calling not in CALLINGS:
            raise ValueError(f"calling {calling!r} is unknown; expected one of "
                             f"{', '.join(CALLINGS)}")
        init = candidate.get("init")
        if init is not None and (not isinstance(init, dict)
                                 or not isinstance(init.get("args", []), list)):
            raise ValueError("init must be an object with 'args' (a list) and 'seed'")
        python_path = python_path_of(candidate)
        folder = os.path.join(workdir, "build")
        os.makedirs(folder)
        sources.write(checked.sources, folder)
        sources.check_python_syntax(checked.sources)
    except ValueError as e:
        return {"ok": False, "seconds": time.perf_counter() - start, "command": [],
                "log": str(e)}, None
    file = checked.entry_file or next(p for p, _ in checked.sources if p.endswith(".py"))
    module = Module(folder, file, checked.symbol, checked.entry, calling, init, python_path)
    return {"ok": True, "seconds": time.perf_counter() - start, "command": [],
            "log": f"syntax checked: {', '.join(p for p, _ in checked.sources)}"}, module


def compiler():
    return f"Python {sys.version.split()[0]}"


class Module:
    """The candidate's module as check_module wrote it: its folder and file, its entry, how it is
    called, its init and the task's module folders."""

    def __init__(self, folder, file, symbol, entry, calling, init, python_path):
        self.folder = folder
        self._file = file
        self._symbol, self._entry = symbol, entry
        self._calling, self._init = calling, init
        self._python_path = python_path
        self._init_used = False

    def calling_of(self):
        # A constructed module object is called like `returns` whatever the task's default.
        return "returns" if self._init_used else self._calling

    def import_entry(self, torch, device):
        """Run the module (its code runs here) and return its entry: a function, or a class
        constructed as `torch.manual_seed(init.seed); cls(*init.args)` and moved to `device`."""
        with PrecisionFlags(torch):
            return self._import_entry(torch, device)

    def _import_entry(self, torch, device):
        entry = pyloader.import_symbol(self.folder, self._file, _MODULE, self._symbol,
                                       self._python_path)
        if entry is None:
            raise CandidateError("runtime_error", (
                f"{self._file} defines no '{self._symbol}' (entry_point {self._entry!r})"))
        if inspect.isclass(entry):
            init = self._init or {}
            torch.manual_seed(int(init.get("seed", 0)))
            entry = entry(*init.get("args", []))
            if init.get("eval_dropout"):
                _dropout_off(torch, entry)
            if hasattr(entry, "to"):
                entry = entry.to(device)
            self._init_used = True
        if not callable(entry):
            raise CandidateError("runtime_error", (
                f"'{self._symbol}' in {self._file} is a {type(entry).__name__}, not a function "
                f"or class"))
        return entry


class PrecisionFlags:
    """PyTorch's process-wide precision switches as they were before the candidate's code ran,
    put back after it (its load, each of its calls). A candidate may set them for its own work
    (GPU MODE's references turn TF32 off around a matmul; ksearch's static checks allow exactly
    these assignments), but what it leaves set must not reach the reference, which runs in the
    same process: TF32 left on would make the reference less exact, and cuDNN's benchmark mode
    would change its times."""

    FLAGS = (("cuda", "matmul", "allow_tf32"),
             ("cuda", "matmul", "allow_fp16_reduced_precision_reduction"),
             ("cuda", "matmul", "allow_bf16_reduced_precision_reduction"),
             ("cudnn", "allow_tf32"), ("cudnn", "deterministic"), ("cudnn", "benchmark"))

    def __init__(self, torch):
        self._torch = torch
        self._saved = []

    def _owner(self, path):
        owner = getattr(self._torch, "backends", None)
        for part in path[:-1]:
            owner = getattr(owner, part, None)
        return owner

    def __enter__(self):
        self._saved = []
        for path in self.FLAGS:
            owner = self._owner(path)
            if owner is not None and hasattr(owner, path[-1]):
                self._saved.append((owner, path[-1], getattr(owner, path[-1])))
        matmul = getattr(self._torch, "get_float32_matmul_precision", None)
        self._precision = matmul() if callable(matmul) else None
        return self

    def __exit__(self, *exc):
        for owner, name, value in self._saved:
            if getattr(owner, name) != value:
                setattr(owner, name, value)
        if self._precision is not None and self._torch.get_float32_matmul_precision() != self._precision:
            self._torch.set_float32_matmul_precision(self._precision)
        return False


def _dropout_off(torch, module):
    """Puts the dropout modules of `module` in eval mode (they pass their input through), as the
    task's reference does to its own ([kernel].init.eval_dropout): in training mode each call
    drops a different random share of the input, and no candidate could match the reference."""
    modules = getattr(module, "modules", None)
    if modules is None:
        return
    for m in modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()


def _takes_exactly(function, count):
    """Whether `function` takes exactly `count` positional parameters (no *args), as a
    FlashInfer-Bench destination-passing entry `run(*inputs, *outputs)` does; one that also
    takes the var axes (ksearch's `dps`), or whose signature cannot be read, does not."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return False
    return len(positional) == count


class Kernel:
    def __init__(self, function, calling, spec, axes, mem, torch, folder):
        self._function = function
        self._folder = folder
        self._calling = calling
        self._spec = spec
        self._axes = tuple(int(axes[name]) for name in spec.var)
        if calling == "dps" and _takes_exactly(function, len(spec.inputs) + len(spec.outputs)):
            # FlashInfer-Bench's destination-passing style: run(*inputs, *outputs), no axes.
            self._axes = ()
        self._mem = mem
        self._torch = torch
        # Kernels launched on torch's current stream can be captured into a CUDA graph.
        self.graph_capturable = mem.is_cuda
        # Put back after each call, in `results` (outside the timed region, before the
        # reference's turn).
        self._flags = PrecisionFlags(torch).__enter__()

    def bind(self, inputs, outputs):
        values = [v.item() if hasattr(v, "item") and not isinstance(v, self._torch.Tensor)
                  else v for v in inputs]
        function, mem, folder = self._function, self._mem, self._folder
        if self._calling == "dps":
            args = (*values, *outputs, *self._axes)
        elif self._calling == "returns":
            args = tuple(values)
        else:
            args = (tuple(values),)
        dps = self._calling == "dps"

        def call():
            try:
                returned = function(*args)
            except (Exception, SystemExit) as e:  # noqa: BLE001 - the candidate's failure
                if gpu.is_device_error(e):
                    raise mem.device_error(e, "during the candidate's call") from None
                raise CandidateError("runtime_error", f"the candidate raised "
                                                      f"{pyloader.describe(e, folder)}") from None
            return None if dps else returned
        return call

    def results(self, raw, outputs, shapes):
        self._flags.__exit__(None, None, None)
        if self._calling == "dps":
            return outputs
        torch, spec = self._torch, self._spec
        values = pyloader.returned_values(raw, spec.outputs, "the candidate")
        for value, t, shape in zip(values, spec.outputs, shapes):
            if not isinstance(value, torch.Tensor):
                raise CandidateError("incorrect_dtype", f"output '{t.name}' is a "
                                                        f"{type(value).__name__}, not a tensor")
            if value.device != self._mem.device:
                raise CandidateError("runtime_error", f"output '{t.name}' is on {value.device}, "
                                                      f"not on {self._mem.device}")
            if tuple(value.shape) != tuple(shape):
                raise CandidateError("incorrect_shape", f"output '{t.name}' has shape "
                                                        f"{list(value.shape)}, expected "
                                                        f"{list(shape)}")
            expected = gpu.torch_dtype(torch, t.dtype_name)
            if value.dtype != expected:
                raise CandidateError("incorrect_dtype", f"output '{t.name}' has dtype "
                                                        f"{value.dtype}, expected {expected}")
        return values


def python_path_of(candidate):
    """The task's module folders (`[kernel].python_path`, absolute): a list of existing
    directories, or a ValueError naming the entry that is not one."""
    paths = candidate.get("python_path") or []
    if not isinstance(paths, list):
        raise ValueError("python_path must be a list of folders")
    for p in paths:
        if not isinstance(p, str) or not os.path.isabs(p) or not os.path.isdir(p):
            raise ValueError(f"python_path entry {p!r} is not an existing absolute folder")
    return list(paths)
