"""GPU MODE problems laid out otherwise than ref_kernel(data) and generate_input(**args): a
reference.py with several reference functions (princeton's cross_entropy:
reference_forward(logits, targets) and reference_backward(logits, targets, grad_output)) and a
generate_inputs whose arguments the tests give only in part (its batch size is fixed by the
folder's eval.py, `B = 4_096`). `ksearch import gpumode --entry FUNCTION` imports one task per
reference function; this module turns that function and the generator into the ref_kernel(data)
and generate_input(**args) the rest of the probe works with.

The function gets the generator's values it names: `return logits, targets, grad_output` names
them, and reference_forward(logits, targets) takes the first two; where the return statement
does not name them, the first values in order. A parameter of the generator no test gives is
taken from the folder's main harness file (task.yml's config.main), where it calls the generator
with a constant or a module-level name bound to one: what GPU MODE's own eval passes.
"""

import ast
import inspect

from probe import Failure

GENERATORS = ("generate_input", "generate_inputs")


def adapt(module, req, source, test_keys):
    """(ref_kernel, generate_input, input names, a description of the adaptation for the
    importer) for req["entry"]."""
    entry = req["entry"]
    function = getattr(module, entry, None)
    if not inspect.isfunction(function):
        own = sorted(n for n, v in vars(module).items()
                     if inspect.isfunction(v) and getattr(v, "__module__", None) == module.__name__)
        raise Failure("problem", f"--entry {entry}: reference.py defines no function {entry} (its functions: "
                                 f"{', '.join(own) or 'none'})")
    generator_name = next((n for n in GENERATORS if callable(getattr(module, n, None))), None)
    if generator_name is None:
        raise Failure("problem", f"--entry {entry}: reference.py defines neither generate_input nor generate_inputs, "
                                 f"the function that makes the inputs of each test")
    generator = getattr(module, generator_name)
    params = positional(function)
    if not params:
        raise Failure("problem", f"--entry {entry}: {entry} takes no positional arguments, so it cannot be given "
                                 f"the values {generator_name} makes")
    fixed, fixed_from = fixed_arguments(generator, generator_name, req.get("main"), test_keys)
    returned = returned_names(source, generator_name)
    if returned and all(p in returned for p in params):
        picked = [returned.index(p) for p in params]
        how = f"{entry}'s arguments ({', '.join(params)}) by name from {generator_name}'s return ({', '.join(returned)})"
    else:
        picked = list(range(len(params)))
        how = (f"the first {len(params)} value(s) {generator_name} returns, in order, as {entry}'s arguments "
               f"({', '.join(params)})")

    def generate_input(**args):
        value = generator(**args, **fixed)
        items = value if isinstance(value, (tuple, list)) else (value,)
        if len(items) <= max(picked):
            raise ValueError(f"{generator_name} returned {len(items)} value(s); {entry} takes {len(params)}")
        return tuple(items[i] for i in picked)

    def ref_kernel(data):
        return function(*data)

    info = {"function": entry, "generator": generator_name, "how": how,
            "fixed": fixed, "fixed_from": fixed_from}
    return ref_kernel, generate_input, params, info


def positional(function):
    return [p.name for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def returned_names(source, generator_name):
    """The names in the generator's `return a, b, c`, when its last return is such a tuple."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == generator_name:
            returns = [n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
            if returns and isinstance(returns[-1].value, ast.Tuple) and all(
                    isinstance(e, ast.Name) for e in returns[-1].value.elts):
                return [e.id for e in returns[-1].value.elts]
    return None


def fixed_arguments(generator, generator_name, main, test_keys):
    """({parameter: value} for the generator's required parameters no test gives, as the main
    harness file's call of it fixes them; the file's name or None). Raises Failure naming the
    parameter when it cannot be found."""
    required = [p for p in inspect.signature(generator).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and p.name not in test_keys]
    if not required:
        return {}, None
    names = [p.name for p in required]
    where = "the folder has no main harness file (task.yml's config.main) to read them from"
    found = {}
    if main:
        try:
            tree = ast.parse(open(main, encoding="utf-8").read())
        except (OSError, SyntaxError) as e:
            tree, where = None, f"its main harness file {main} could not be read ({e})"
        if tree is not None:
            order = [p.name for p in inspect.signature(generator).parameters.values()]
            constants = module_constants(tree)
            called = False
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == generator_name:
                    called = True
                    given = {order[i]: a for i, a in enumerate(node.args) if i < len(order)}
                    given.update({k.arg: k.value for k in node.keywords if k.arg})
                    for name in names:
                        value = constant(given.get(name), constants)
                        if value is not None and name not in found:
                            found[name] = value
            file = main.rsplit("/", 1)[-1]
            where = (f"{file}'s call of {generator_name} does not fix "
                     + " and ".join(n for n in names if n not in found) + " to a constant") if called else (
                f"{file} (task.yml's config.main) does not call {generator_name}")
    missing = [n for n in names if n not in found]
    if missing:
        raise Failure("problem", f"{generator_name} needs {', '.join(missing)}, which no test or benchmark of "
                                 f"task.yml gives, and {where}")
    return found, main.rsplit("/", 1)[-1]


def module_constants(tree):
    out = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float, str))):
            out[node.targets[0].id] = node.value.value
    return out


def constant(node, constants):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def module_tolerance(module):
    """reference.py's module-level ATOL and RTOL (princeton's, which its eval.py imports), as
    probe_gpumode.tolerance reports tolerances; None without both."""
    atol, rtol = getattr(module, "ATOL", None), getattr(module, "RTOL", None)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (atol, rtol)):
        return {"rtol": float(rtol), "atol": float(atol), "literal": ["atol", "rtol"], "defaults": [],
                "origin": f"reference.py's ATOL = {atol} and RTOL = {rtol}"}
    return None
