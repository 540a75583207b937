"""Runs a KernelBench problem file or a GPU MODE reference to learn the shapes, dtypes and origins
of its inputs and outputs, for `ksearch import`.

Usage: python3 probe.py REQUEST.json. The request names the problem and where to write the
answer (`out`); this script never writes to stdout itself, so whatever the problem prints cannot
corrupt the answer. PyTorch is used when importable (on the meta device, so no memory is spent,
then on the CPU when an operation has no meta kernel) unless the request asks for the stand-in;
without PyTorch the shape-only stand-in beside this file (standin_*.py) plays its part.
"""

import ast
import importlib.util
import inspect
import json
import keyword
import os
import re
import sys
import traceback
import types
import typing

HERE = os.path.dirname(os.path.abspath(__file__))


class Failure(Exception):
    """Why the probe could not finish; `kind` tells Rust which error to raise."""

    def __init__(self, kind, message, **extra):
        super().__init__(message)
        self.kind, self.message, self.extra = kind, message, extra


# ---------------------------------------------------------------------------------------------
# engines: real PyTorch (meta or CPU) or the stand-in

class Engine:
    def __init__(self, name, torch, missing_type=None):
        self.name, self.torch, self.missing_type = name, torch, missing_type
        self.origins = {}  # id(tensor) -> (tensor, origin) for real torch
        self.where = None  # where real torch's tensors live, in words ("the GPU", "the CPU")

    def is_tensor(self, x):
        return isinstance(x, self.torch.Tensor)

    def origin(self, t):
        if self.missing_type is not None:
            return getattr(t, "origin", None)
        entry = self.origins.get(id(t))
        return entry[1] if entry is not None and entry[0] is t else None

    def dtype_name(self, t):
        return str(t.dtype).replace("torch.", "")

    def context(self):
        return _NullContext()


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def standin_engine():
    sys.path.insert(0, HERE)
    import standin_torch
    torch = standin_torch.install()
    return Engine("stand-in", torch, standin_torch.Missing)


def torch_engine(device):
    """Real PyTorch with every tensor on `device` ("meta", "cuda" or "cpu"): explicit devices,
    generators and .cuda() calls are neutralised, and factories record their origin."""
    import torch
    from torch.overrides import TorchFunctionMode

    engine = Engine(f"torch {torch.__version__} ({device})", torch)
    engine.where = {"cuda": "the GPU", "cpu": "the CPU"}.get(device, f"the {device} device")
    factories = {torch.randn: "randn", torch.rand: "rand", torch.randint: "randint",
                 torch.zeros: "zeros", torch.ones: "ones", torch.empty: "empty",
                 torch.full: "full", torch.tensor: "tensor", torch.arange: "arange",
                 torch.randperm: "randperm", torch.randn_like: "randn", torch.rand_like: "rand",
                 torch.zeros_like: "zeros", torch.ones_like: "ones", torch.empty_like: "empty",
                 torch.full_like: "full", torch.randint_like: "randint"}
    keep = {torch.Tensor.cuda, torch.Tensor.cpu, torch.Tensor.contiguous, torch.Tensor.clone,
            torch.Tensor.detach, torch.Tensor.requires_grad_}
    fills = {torch.Tensor.normal_: "normal", torch.Tensor.uniform_: "uniform",
             torch.Tensor.random_: "random_", torch.Tensor.fill_: "full", torch.Tensor.zero_: "zeros"}

    def record(t, origin):
        if isinstance(t, torch.Tensor):
            engine.origins[id(t)] = (t, origin)

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            # Every explicit device is the probe's: a problem that makes some tensors with
            # device="cuda" and others without would otherwise mix devices (on a GPU machine,
            # real CUDA tensors beside meta ones: "Expected all tensors to be on the same device").
            if kwargs.get("device") is not None:
                kwargs["device"] = device
            # A generator (a CPU one: see CpuGenerator) fits only CPU tensors; on the CPU it is
            # kept, so that values measured there are generate_input's seeded ones.
            if (func in factories or func is torch.Tensor.to or func in fills) and device != "cpu":
                kwargs.pop("generator", None)
            if func in factories:
                kwargs["device"] = device
                out = func(*args, **kwargs)
                origin = {"fn": factories[func]}
                if factories[func] == "randint":
                    bounds = [a for a in args if isinstance(a, int)]
                    low, high = (0, bounds[0]) if len(bounds) == 1 else (bounds[:2] + [None])[:2]
                    origin.update(low=kwargs.get("low", low), high=kwargs.get("high", high))
                if factories[func] == "full":
                    origin["value"] = args[1] if len(args) > 1 else kwargs.get("fill_value")
                record(out, origin)
                return out
            if func in keep:
                if func in (torch.Tensor.cuda, torch.Tensor.cpu):
                    return args[0]
                out = func(*args, **kwargs)
                record(out, engine.origin(args[0]))
                return out
            if func is torch.Tensor.to:
                tensor, rest = args[0], args[1:]
                dtype = kwargs.get("dtype")
                for a in rest:
                    if isinstance(a, torch.dtype):
                        dtype = a
                    elif isinstance(a, torch.Tensor):
                        dtype = a.dtype
                if dtype is None or dtype == tensor.dtype:
                    return tensor
                return func(tensor, dtype=dtype)
            if func in fills:
                out = func(*args, **kwargs)
                fn = fills[func]
                nums = [a for a in args[1:] if isinstance(a, (int, float))]
                origin = {"fn": fn}
                if fn == "normal":
                    origin.update(mean=nums[0] if nums else 0.0, std=nums[1] if len(nums) > 1 else 1.0)
                elif fn == "uniform":
                    origin.update(low=nums[0] if nums else 0.0, high=nums[1] if len(nums) > 1 else 1.0)
                elif fn == "random_" and nums:
                    origin.update(low=0 if len(nums) == 1 else nums[0], high=nums[-1])
                elif fn == "full" and nums:
                    origin["value"] = nums[0]
                record(args[0], origin)
                return out
            return on_probe_device(func(*args, **kwargs))

    probe_device = torch.device(device)

    def on_probe_device(out):
        # What torch.from_numpy, torch.as_tensor of an array and the like make is on the CPU
        # whatever the default device: moved, so that all tensors share the probe's device.
        if isinstance(out, torch.Tensor) and out.device.type != probe_device.type:
            return out.to(probe_device)
        return out

    class Context:
        def __enter__(self):
            self.saved = (torch.Generator, torch.cuda.synchronize)
            real = torch.Generator

            class CpuGenerator(real):
                """Generator(device="cuda") fails without CUDA; a CPU generator parses as an
                argument of every factory (the mode then drops it, as tensors live on
                `device`). A class, since torch's own modules use it in annotations."""

                def __new__(cls, *args, **kwargs):
                    return real("cpu")

            torch.Generator = CpuGenerator
            torch.cuda.synchronize = lambda *a, **k: None
            self.default = torch.device(device)
            torch.set_default_device(device)
            self.mode = Mode()
            self.mode.__enter__()
            return self

        def __exit__(self, *exc):
            self.mode.__exit__(*exc)
            torch.set_default_device(None)
            torch.Generator, torch.cuda.synchronize = self.saved
            return False

    engine.context = Context
    return engine


# ---------------------------------------------------------------------------------------------
# loading files

def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stub_task_module():
    """GPU MODE's task.py, when absent: only type names (input_t, output_t, TestSpec) are used."""
    module = types.ModuleType("task")
    module.__getattr__ = _type_name
    return module


def _type_name(attr):
    # Not for dunder names: `__file__` as typing.Any broke inspect.getmodule, which scans every
    # module (PyTorch calls it on the meta device: "type object 'Any' has no attribute 'endswith'").
    if attr.startswith("__") and attr.endswith("__"):
        raise AttributeError(attr)
    return typing.Any


def stub_utils_module():
    """GPU MODE's utils.py, when absent: what reference files call at import time."""
    module = types.ModuleType("utils")

    def make_match_reference(reference, **kwargs):
        return lambda data, output: (True, "")

    # No match_reference: its defaults would be a guess, and tolerances are read from them.
    module.make_match_reference = make_match_reference
    module.set_seed = lambda seed=42: None
    module.DeterministicContext = _NullContext
    return module


# ---------------------------------------------------------------------------------------------
# describing values

def describe(engine, value, where):
    if engine.is_tensor(value):
        return {"kind": "tensor", "shape": [int(s) for s in value.shape],
                "dtype": engine.dtype_name(value), "origin": engine.origin(value)}
    if isinstance(value, bool):
        return {"kind": "scalar", "dtype": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "scalar", "dtype": "int64", "value": value}
    if isinstance(value, float):
        return {"kind": "scalar", "dtype": "float32", "value": value}
    raise Failure("unsupported", f"{where} is a {type(value).__name__}; ksearch can import tensors "
                                 f"and numbers only")


def outputs_of(engine, value, where):
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    out = []
    for i, v in enumerate(items):
        if not engine.is_tensor(v):
            raise Failure("unsupported", f"{where} returned a {type(v).__name__}"
                                         f"{'' if len(items) == 1 else f' at position {i}'}; "
                                         f"ksearch needs tensor outputs")
        out.append(describe(engine, v, where))
    return out


def json_value(value, where):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [json_value(v, where) for v in value]
    raise Failure("unsupported", f"{where} is a {type(value).__name__}; ksearch passes construction "
                                 f"arguments as JSON values (numbers, strings, lists)")


def parameter_names(function, count, skip_self):
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    if skip_self:
        params = params[1:]
    names = []
    for p in params[:count]:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            return None
        names.append(p.name)
    return names if len(names) == count else None


def int_globals(module):
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)}


# ---------------------------------------------------------------------------------------------
# the two kinds of problem

def kernelbench(engine, req):
    torch = engine.torch
    sys.path.insert(0, HERE)
    import probe_measure
    path = req["file"]
    module = load_module("ksearch_problem", path)
    model = getattr(module, "Model", None)
    if not isinstance(model, type):
        raise Failure("problem", "defines no class Model (a KernelBench problem defines "
                                 "`class Model(nn.Module)`)")
    get_inputs = getattr(module, "get_inputs", None)
    if not callable(get_inputs):
        raise Failure("problem", "defines no get_inputs() function (it returns the forward "
                                 "arguments)")
    notes = []
    get_init_inputs = getattr(module, "get_init_inputs", None)
    torch.manual_seed(req.get("seed", 42))
    with engine.context():
        if callable(get_init_inputs):
            init = call(get_init_inputs, "get_init_inputs()")
        else:
            init = []
            notes.append("the problem defines no get_init_inputs(); Model is built without arguments")
        init = [json_value(v, f"get_init_inputs()[{i}]") for i, v in enumerate(list(init))]
        inputs = call(get_inputs, "get_inputs()")
        if not isinstance(inputs, (list, tuple)):
            raise Failure("problem", f"get_inputs() returned a {type(inputs).__name__}, not a list")
        described = [describe(engine, v, f"get_inputs()[{i}]") for i, v in enumerate(inputs)]
        torch.manual_seed(req.get("seed", 42))
        instance = call(lambda: model(*init), "Model(*get_init_inputs())")
        dropout = [name for name, _ in probe_measure.dropout_modules(torch, instance)]
        with torch.no_grad():
            result = call(lambda: instance(*inputs), "Model.forward")
        outputs = outputs_of(engine, result, "Model.forward")
    measured = probe_measure.measure(engine, module, model, init, req, outputs, set(dropout))
    if measured["note"]:
        notes.append(measured["note"])
    return {
        "largest": measured["largest"],
        "nonfinite": measured["nonfinite"],
        "input_ranges": measured["input_ranges"],
        "random": measured["random"],
        "dropout": dropout,
        "inputs": described,
        "input_names": parameter_names(model.forward, len(inputs), True),
        "init": init,
        "outputs": outputs,
        "int_globals": int_globals(module),
        "notes": notes,
    }


def call(function, where):
    try:
        return function()
    except Failure:
        raise
    except Exception as e:  # the problem's own code, or the stand-in, failed
        raise Raised(where, e) from None


class Raised(Exception):
    def __init__(self, where, error):
        super().__init__(where)
        self.where, self.error = where, error
        self.trace = "".join(traceback.format_exception(type(error), error, error.__traceback__)[-6:])


# ---------------------------------------------------------------------------------------------

def run(req):
    if req.get("engine") != "standin":
        try:
            import torch
        except ImportError:
            pass
        else:
            if req["kind"] == "gpumode":
                # Each call falls back on its own (probe_gpumode.probe_call): to the GPU when
                # there is one (GPU MODE's own device: linalg-eigh's 4096x4096 draws and
                # decompositions took 150 s and more on a CPU shared with 11 other imports),
                # then to the CPU.
                import probe_gpumode
                devices = ["meta"] + (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]
                return probe_gpumode.gpumode([torch_engine(d) for d in devices], req)
            notes = []
            for device in ("meta", "cpu"):
                engine = torch_engine(device)
                try:
                    result = kernelbench(engine, req)
                except Raised as e:
                    if device == "cpu":
                        raise
                    notes.append(f"on the meta device {e.where} failed ({type(e.error).__name__}: "
                                 f"{e.error}); ran it on the CPU instead")
                    sys.modules.pop("ksearch_problem", None)
                    continue
                result["engine"] = engine.name
                result["notes"] = notes + result.get("notes", [])
                return result
    engine = standin_engine()
    if req["kind"] == "gpumode":
        import probe_gpumode
        return probe_gpumode.gpumode([engine], req)
    result = kernelbench(engine, req)
    result["engine"] = engine.name
    return result


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        req = json.load(f)
    try:
        answer = run(req)
    except Failure as f:
        answer = {"error": {"kind": f.kind, "message": f.message, **f.extra}}
    except Raised as r:
        missing = _missing_name(r.error)
        if missing is not None:
            answer = {"error": {"kind": "standin", "message": missing, "where": r.where}}
        else:
            answer = {"error": {"kind": "raised", "where": r.where,
                                "message": f"{type(r.error).__name__}: {r.error}",
                                "trace": r.trace,
                                "standin": "torch" in sys.modules
                                and getattr(sys.modules["torch"], "__version__", "") == "0+standin"}}
    except Exception as e:  # loading the file itself failed (syntax error, missing import)
        missing = _missing_name(e)
        trace = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
        if missing is not None:
            answer = {"error": {"kind": "standin", "message": missing, "where": "loading the file"}}
        else:
            answer = {"error": {"kind": "load", "message": f"{type(e).__name__}: {e}", "trace": trace}}
    with open(req["out"], "w", encoding="utf-8") as f:
        json.dump(answer, f)


def _missing_name(error):
    return error.what if type(error).__name__ == "Missing" and hasattr(error, "what") else None


if __name__ == "__main__":
    # probe_gpumode imports this module as `probe`: the same module, so that its Failure and
    # Raised are the ones main() catches.
    sys.modules["probe"] = sys.modules[__name__]
    main()
