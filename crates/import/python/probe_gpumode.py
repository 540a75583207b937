"""GPU MODE task folders for probe.py: runs generate_input(**args) and ref_kernel(data) for every
test and benchmark to learn the shapes, dtypes and origins of the inputs and outputs, reads the
seed, the input names and the tolerances from reference.py's source, and explains a
reference.py laid out otherwise.

With PyTorch, each call runs on the meta device, and only the calls that cannot (an operation
without a meta kernel, `.item()`) run on the GPU when there is one, else (or when that fails
too) on the CPU: generate_input there, then ref_kernel on meta copies of its value, then on the
real values when that fails too. One call off the meta device no longer sends every other test
there (linalg-eigh's 4096x4096 and 640x512x512 inputs, bioml-trimul's
3 GiB ones: past the suite's time limit and a 23 GB machine's memory).
"""

import ast
import difflib
import inspect
import json
import keyword
import os
import re
import sys

import probe
import probe_gpumode_entry
import probe_measure
from probe import Failure, Raised, call, describe, load_module, outputs_of


def gpumode(engines, req):
    """`engines`: [meta, CPU] PyTorch engines, or [the stand-in]."""
    folder = os.path.dirname(os.path.abspath(req["file"]))
    sys.path.insert(0, folder)
    for name, path in (req.get("modules") or {}).items():
        if path:
            load_module(name, path)
        else:
            sys.modules[name] = probe.stub_task_module() if name == "task" else probe.stub_utils_module()
    module = load_module("reference", req["file"])
    source = open(req["file"], encoding="utf-8").read()
    entry = None
    if req.get("entry"):
        test_keys = {k for args in req["calls"] for k in args}
        ref_kernel, generate_input, names, entry = probe_gpumode_entry.adapt(module, req, source, test_keys)
    else:
        ref_kernel = getattr(module, "ref_kernel", None)
        generate_input = getattr(module, "generate_input", None)
        missing = [name for name, f in (("ref_kernel", ref_kernel), ("generate_input", generate_input))
                   if not callable(f)]
        if missing:
            raise Failure("problem", missing_message(module, missing, req["calls"]))
        names = unpacked_names(source)
    calls, ran = [], []
    for args in req["calls"]:
        record, how = probe_call(engines, generate_input, ref_kernel, args, names)
        calls.append(record)
        ran.append(how)
    seed, dropped = seed_source(source, entry["function"] if entry else "ref_kernel")
    notes = fallback_notes(req["calls"], ran)
    measured, note = [None] * len(calls), None
    if len(engines) > 1:
        given = [{k: as_tuples(v) for k, v in args.items()} for args in req["calls"]]
        measured, note = probe_measure.gpumode(engines[-1], generate_input, ref_kernel, req, given, calls)
    for record, m in zip(calls, measured):
        record["measured"] = m
    if note:
        notes.append(note)
    engine = engines[0].name
    elsewhere = [how[1].where for how in ran if how is not None]
    if elsewhere:
        where = ", ".join(f"{w} for {elsewhere.count(w)}" for w in sorted(set(elsewhere)))
        engine = f"torch {engines[0].torch.__version__} (meta; {where} of {len(calls)} calls)"
    return {"calls": calls, "input_names": names, "engine": engine, "notes": notes,
            "tolerance": tolerance(source, sys.modules.get("utils")) or probe_gpumode_entry.module_tolerance(module),
            "seed_source": seed, "seed_dropped": dropped, "entry": entry}


def probe_call(engines, generate_input, ref_kernel, args, names):
    """(the call's record, None when it ran on the first engine, else (what failed there, the
    engines generate_input and ref_kernel ran on)). generate_input runs on each engine in turn
    until it succeeds; ref_kernel then runs on the first engine's copies of its value when it
    came from a later one, then on the value itself, then on the next engine's."""
    where = f"generate_input(**{json.dumps(args)})"
    given = {k: as_tuples(v) for k, v in args.items()}
    first, failed, ref_failed_first = engines[0], None, False
    for k, engine in enumerate(engines):
        last = k == len(engines) - 1
        try:
            with engine.context():
                data = call(lambda: generate_input(**given), where)
                record = describe_data(engine, data, names, where)
        except Raised as e:
            if last:
                raise
            failed = failed or e
            continue
        tries = ([first] if k > 0 and not ref_failed_first else []) + [engine]
        for runner in tries:
            value = data if runner is engine else meta_copies(first.torch, data)
            try:
                with runner.context():
                    result = call(lambda: ref_kernel(value), f"ref_kernel on {where}")
                    record["outputs"] = outputs_of(runner, result, "ref_kernel")
            except Raised as e:
                if runner is first:
                    ref_failed_first = True
                    failed = failed or e
                if last and runner is engine:
                    raise
                continue
            finally:
                del value
            for e in engines:
                e.origins.clear()  # the CPU engine's record of a call's tensors holds them alive
            if k == 0:
                return record, None
            return record, (failed, engine, runner)
        del data
    raise AssertionError("unreachable: the last engine raises")


def fallback_notes(calls, ran):
    done = [(args, how) for args, how in zip(calls, ran) if how is not None]
    if not done:
        return []
    first_failed = done[0][1][0]
    only_input = sum(1 for _, how in done if how[2] is not how[1])
    return [f"on the meta device {len(done)} of {len(calls)} calls failed (first: {first_failed.where}: "
            f"{type(first_failed.error).__name__}: {str(first_failed.error)[:200]}); they ran on "
            + " and ".join(sorted({how[1].where for _, how in done}))
            + (f" ({only_input} of them generate_input only, ref_kernel on meta copies of its value)"
               if only_input else "")]


def meta_copies(torch, value):
    """generate_input's value with every tensor replaced by a meta tensor of its shape and dtype."""
    if isinstance(value, torch.Tensor):
        return value.to("meta")
    if isinstance(value, (tuple, list)):
        return type(value)(meta_copies(torch, v) for v in value)
    if isinstance(value, dict):
        return {k: meta_copies(torch, v) for k, v in value.items()}
    return value


def describe_data(engine, data, names, where):
    bare = not isinstance(data, (tuple, list, dict))
    items = [data] if bare else list(data)
    record = {"bare": bare}
    if not bare and (isinstance(data, dict) or not all(_leaf(engine, v) for v in items)):
        # Dicts, nested tuples and lists, constants: flattened into named inputs, and the
        # expression that rebuilds generate_input's structure from them.
        leaves, record["rebuild"] = flatten(engine, data, names, where)
        record["leaf_names"] = [n for n, _ in leaves]
        record["inputs"] = [d for _, d in leaves]
    else:
        record["inputs"] = [describe(engine, v, f"{where}[{j}]") for j, v in enumerate(items)]
    return record


def missing_message(module, missing, calls):
    """Why a reference.py without ref_kernel or generate_input cannot be imported, and exactly
    what the user must add: the two functions, with the arguments the tests give."""
    own = [(n, v) for n, v in vars(module).items()
           if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]
    keys = []
    for args in calls:
        keys += [k for k in args if k not in keys]

    def signature(f):
        try:
            return str(inspect.signature(f))
        except (TypeError, ValueError):
            return "(...)"

    defined = ", ".join(n + signature(v) for n, v in sorted(own, key=lambda x: x[0]))
    text = [f"defines no {' and no '.join(f + '()' for f in missing)} function. ksearch imports GPU MODE "
            f"problems whose reference.py defines generate_input(**args), called with the arguments of each "
            f"test and benchmark in task.yml (here: {', '.join(keys) or 'none'}) and returning the kernel's "
            f"inputs, and ref_kernel(data), called on what generate_input returns and returning the "
            f"output(s) a submission's custom_kernel(data) must match",
            f"This file defines {defined or 'no functions of its own'}"]
    functions = [n for n, v in own if inspect.isfunction(v)]
    refs = [n for n in functions if n.startswith(("ref", "reference")) and not n.startswith("ref_kernel")]
    generator = next((n for n in probe_gpumode_entry.GENERATORS if n in functions), None)
    if "ref_kernel" in missing and refs and generator:
        # The layout --entry imports (probe_gpumode_entry): say how, and nothing to write.
        text.append(f"It has {len(refs)} reference function{'s' if len(refs) > 1 else ''} ({', '.join(refs)}) and "
                    f"{generator}: import one task per function with --entry, "
                    + ", ".join(f"`ksearch import gpumode FOLDER --entry {r} --out DIR`" for r in refs)
                    + f" (each function gets the values of {generator} its parameters name; an argument of "
                    f"{generator} no test gives is read from the folder's eval.py, where it calls {generator})")
        return ". ".join(text) + "."
    if "generate_input" in missing:
        close = difflib.get_close_matches("generate_input", functions, n=1, cutoff=0.75)
        if close:
            params = [p.name for p in inspect.signature(dict(own)[close[0]]).parameters.values()
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                      and p.name not in keys]
            text.append(f"{close[0]} is not generate_input" + (
                f": it also takes {', '.join(params)}, which no test gives, so a generate_input must fix "
                f"{'it' if len(params) == 1 else 'them'} (as the folder's own eval does; ksearch does not run "
                f"that)" if params else ""))
    if "ref_kernel" in missing:
        if len(refs) > 1:
            text.append(f"It has {len(refs)} reference functions ({', '.join(refs)}) and a ksearch task has "
                        f"one entry point: import one task per function (a copy of the folder whose ref_kernel "
                        f"calls it), or write one ref_kernel that returns all their outputs")
        elif refs:
            text.append(f"If {refs[0]} is the kernel, ref_kernel(data) must call it on generate_input's value")
    text.append("To import it, add generate_input and ref_kernel to reference.py in a copy of the folder")
    return ". ".join(text) + "."


def seed_source(source, root="ref_kernel"):
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
    reached = {root}
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
