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
    """Real PyTorch with every tensor on `device` ("meta" or "cpu"): explicit devices, generators
    and .cuda() calls are neutralised, and factories record their origin."""
    import torch
    from torch.overrides import TorchFunctionMode

    engine = Engine(f"torch {torch.__version__} ({device})", torch)
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
            if func in factories or func is torch.Tensor.to or func in fills:
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
    module.__getattr__ = lambda attr: typing.Any
    return module


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


def gpumode(engine, req):
    folder = os.path.dirname(os.path.abspath(req["file"]))
    sys.path.insert(0, folder)
    for name, path in (req.get("modules") or {}).items():
        if path:
            load_module(name, path)
        else:
            sys.modules[name] = stub_task_module() if name == "task" else stub_utils_module()
    module = load_module("reference", req["file"])
    ref_kernel = getattr(module, "ref_kernel", None)
    generate_input = getattr(module, "generate_input", None)
    missing = [name for name, f in (("ref_kernel", ref_kernel), ("generate_input", generate_input))
               if not callable(f)]
    if missing:
        defined = sorted(n for n, v in vars(module).items()
                         if callable(v) and not n.startswith("_") and getattr(v, "__module__", None)
                         == module.__name__)
        raise Failure("problem", (
            f"defines no {' and no '.join(f + '()' for f in missing)} function: ksearch imports GPU MODE "
            f"problems whose reference.py defines ref_kernel(data) and generate_input(**args) "
            f"(it defines {', '.join(defined) if defined else 'no functions of its own'})"))
    calls = []
    source = open(req["file"], encoding="utf-8").read()
    names = unpacked_names(source)
    with engine.context():
        for i, args in enumerate(req["calls"]):
            where = f"generate_input(**{json.dumps(args)})"
            given = {k: as_tuples(v) for k, v in args.items()}
            data = call(lambda: generate_input(**given), where)
            bare = not isinstance(data, (tuple, list, dict))
            items = [data] if bare else list(data)
            record = {"bare": bare}
            if not bare and (isinstance(data, dict) or not all(_leaf(engine, v) for v in items)):
                # Dicts, nested tuples and lists, constants: flattened into named inputs, and
                # the expression that rebuilds generate_input's structure from them.
                leaves, record["rebuild"] = flatten(engine, data, names, where)
                record["leaf_names"] = [n for n, _ in leaves]
                described = [d for _, d in leaves]
            else:
                described = [describe(engine, v, f"{where}[{j}]") for j, v in enumerate(items)]
            result = call(lambda: ref_kernel(data), f"ref_kernel on {where}")
            record.update(inputs=described, outputs=outputs_of(engine, result, "ref_kernel"))
            calls.append(record)
    seed, dropped = seed_source(source)
    return {"calls": calls, "input_names": names,
            "tolerance": tolerance(source, sys.modules.get("utils")),
            "seed_source": seed, "seed_dropped": dropped}


def seed_source(source):
    """reference.py without the top-level functions, classes and name assignments that
    ref_kernel does not reach (GPU MODE's check_implementation and its helpers, typically): the
    seed is ref_kernel as a candidate, and a checker's code (its try/finally, the TF32 switch it
    makes around its own matmul) is not the kernel's and would fail ksearch's static checks.
    Everything else (imports, other statements) stays, and what it names is reached too.
    Returns (source, the names dropped); the source as it is where it cannot be parsed."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, []

    def defined(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return {node.name}
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else None)
        if targets and all(isinstance(t, ast.Name) for t in targets):
            return {t.id for t in targets}
        return None  # not a definition: always kept

    def used(node):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    definitions = [(node, defined(node)) for node in tree.body]
    reached = {"ref_kernel"}
    for node, names in definitions:
        if names is None:
            reached |= used(node)
    changed = True
    while changed:
        changed = False
        for node, names in definitions:
            if names is not None and names & reached and not used(node) <= reached:
                reached |= used(node)
                changed = True
    lines = source.splitlines(keepends=True)
    drop, dropped = set(), []
    for node, names in definitions:
        if names is not None and not names & reached:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            drop.update(range(first - 1, node.end_lineno))
            dropped.extend(sorted(names))
    if not dropped:
        return source, []
    kept = "".join(line for i, line in enumerate(lines) if i not in drop)
    return re.sub(r"\n{3,}", "\n\n\n", kept), dropped


def as_tuples(value):
    """A task.yml argument as GPU MODE's eval passes it to generate_input: a list (`m: [96, 128]`,
    the group GEMM's per-group sizes) becomes a tuple, nested lists tuples of tuples."""
    if isinstance(value, list):
        return tuple(as_tuples(v) for v in value)
    return value


def _leaf(engine, v):
    return engine.is_tensor(v) or isinstance(v, (bool, int, float))


def flatten(engine, data, top_names, where):
    """generate_input's nested value as ([(input name, described leaf)], Python expression over
    the names that rebuilds it). Tensors and numbers are leaves; strings and None are constants
    written into the expression; names follow the path (`weights_w1`, `x_0`)."""
    leaves = []
    taken = set()

    def name_for(path):
        base = re.sub(r"\W", "_", path).strip("_") or "x"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = "x_" + base
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    def walk(v, path, at):
        if _leaf(engine, v):
            name = name_for(path)
            leaves.append((name, describe(engine, v, at)))
            return name
        if v is None or isinstance(v, str):
            return repr(v)
        if isinstance(v, (tuple, list)):
            parts = [walk(x, f"{path}_{i}", f"{at}[{i}]") for i, x in enumerate(v)]
            if isinstance(v, list):
                return "[" + ", ".join(parts) + "]"
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if isinstance(v, dict):
            items = []
            for k, x in v.items():
                if not isinstance(k, (str, int)):
                    raise Failure("unsupported", f"{at} has a key of type {type(k).__name__}; "
                                                 f"ksearch imports dicts keyed by strings or numbers")
                items.append(f"{k!r}: {walk(x, f'{path}_{k}', f'{at}[{k!r}]')}")
            return "{" + ", ".join(items) + "}"
        raise Failure("unsupported", f"{at} is a {type(v).__name__}; ksearch can import tensors, "
                                     f"numbers, strings and None, in tuples, lists and dicts")

    if isinstance(data, dict):
        return leaves, walk(data, "", where)
    items = list(data)
    tops = top_names if top_names and len(top_names) == len(items) else [f"x{j}" for j in range(len(items))]
    parts = [walk(v, tops[j], f"{where}[{j}]") for j, v in enumerate(items)]
    if isinstance(data, list):
        return leaves, "[" + ", ".join(parts) + "]"
    return leaves, "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


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


def unpacked_names(source):
    """`a, b, c = data` as the first unpacking of ref_kernel's argument: the input names."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel" and node.args.args:
            arg = node.args.args[0].arg
            for stmt in ast.walk(node):
                if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name)
                        and stmt.value.id == arg and isinstance(stmt.targets[0], ast.Tuple)
                        and all(isinstance(e, ast.Name) for e in stmt.targets[0].elts)):
                    return [e.id for e in stmt.targets[0].elts]
    return None


def tolerance(source, utils):
    """check_implementation's tolerances when they are literals (or utils' defaults)."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check_implementation":
            return {"custom": True}
        if not (isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "check_implementation" for t in node.targets)):
            continue
        value = node.value
        name = getattr(value.func, "id", getattr(value.func, "attr", None)) if isinstance(value, ast.Call) else None
        if name != "make_match_reference":
            return {"custom": True}
        found = {}
        for kw in value.keywords:
            if kw.arg in ("rtol", "atol"):
                if not isinstance(kw.value, ast.Constant) or not isinstance(kw.value.value, (int, float)):
                    return {"custom": True, "why": f"{kw.arg} is not a literal"}
                found[kw.arg] = float(kw.value.value)
        defaults = {}
        match = getattr(utils, "match_reference", None)
        if match is not None:
            try:
                for p in inspect.signature(match).parameters.values():
                    if p.name in ("rtol", "atol") and isinstance(p.default, (int, float)):
                        defaults[p.name] = float(p.default)
            except (TypeError, ValueError):
                pass
        merged = {**defaults, **found}
        return {"rtol": merged.get("rtol"), "atol": merged.get("atol"),
                "literal": sorted(found), "defaults": sorted(set(defaults) - set(found))}
    return None


# ---------------------------------------------------------------------------------------------

def run(req):
    kind = {"kernelbench": kernelbench, "gpumode": gpumode}[req["kind"]]
    if req.get("engine") != "standin":
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            notes = []
            for device in ("meta", "cpu"):
                engine = torch_engine(device)
                try:
                    result = kind(engine, req)
                except Raised as e:
                    if device == "cpu":
                        raise
                    notes.append(f"on the meta device {e.where} failed ({type(e.error).__name__}: "
                                 f"{e.error}); ran it on the CPU instead")
                    for name in ("ksearch_problem", "reference", "task", "utils"):
                        sys.modules.pop(name, None)
                    continue
                result["engine"] = engine.name
                result["notes"] = notes + result.get("notes", [])
                return result
    engine = standin_engine()
    result = kind(engine, req)
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
    main()
