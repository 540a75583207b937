"""The launch spec of an `mlx` kernel candidate (docs/mlx.md; the format is described in
spec.py), parsed and checked without MLX: its problems (Problem, NeedsGpu), the integer
expressions over the definition's axes (Expr), the parsed KernelSpec and its per-workload Launch,
and reading one from its TOML or JSON table (load_table, kernel_spec). spec.py re-exports
these; the device limits and the memory accounting are limits.py's."""

import ast
import hashlib
import json
import sys

from .limits import DIALECTS, DTYPES, LIMITS, MAX_THREADS, static_arrays

_TOP_KEYS = {"name", "inputs", "grid", "threadgroup", "template", "outputs", "init_value",
             "ensure_row_contiguous", "cuda", "metal"}
_DIALECT_KEYS = {"source", "source_file", "header", "header_file", "grid", "threadgroup",
                 "template"}
_ONLY = {"cuda": {"shared_memory"}, "metal": {"atomic_outputs"}}
_OUTPUT_KEYS = {"name", "shape", "dtype"}
_INIT_WORDS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


class Problem(ValueError):
    """`file: field: what is wrong`."""

    def __init__(self, file, field, what):
        super().__init__(f"{file}: {field}: {what}" if field else f"{file}: {what}")


class NeedsGpu(Problem):
    """A launch spec with nothing else wrong, where no GPU runs kernels (MLX's CPU device)."""

    def __init__(self, file, dialects):
        super().__init__(file, "", "a kernel needs a GPU: mx.fast kernels do not run on MLX's "
                                   "CPU device (use a Python launcher of MLX operations there)")
        self.dialects = dialects


# ---- expressions -------------------------------------------------------------------------------

class Expr:
    """An integer, or an integer expression over the definition's axes, checked when parsed."""

    _FUNCTIONS = ("min", "max", "cdiv")

    def __init__(self, value, axes, file, field):
        self.file, self.field, self.text = file, field, value
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise Problem(file, field, f"{value!r} must be an integer or an expression over the "
                                       f"axes (a string)")
        if isinstance(value, int):
            self.tree = ast.Constant(value)
            return
        try:
            self.tree = ast.parse(value.strip(), mode="eval").body
        except SyntaxError:
            raise Problem(file, field, f"{value!r} is not an expression") from None
        self._check(self.tree, set(axes))

    def _check(self, node, axes):
        bad = lambda why: Problem(self.file, self.field, f"{self.text!r}: {why}")  # noqa: E731
        if isinstance(node, ast.Constant):
            if type(node.value) is not int:
                raise bad(f"{node.value!r} is not an integer")
        elif isinstance(node, ast.Name):
            if node.id not in axes:
                raise bad(f"{node.id!r} is not an axis of the definition (axes: "
                          f"{', '.join(sorted(axes)) or 'none'})")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self._check(node.operand, axes)
        elif isinstance(node, ast.BinOp) and isinstance(
                node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)):
            self._check(node.left, axes)
            self._check(node.right, axes)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in self._FUNCTIONS and not node.keywords:
            if node.func.id == "cdiv" and len(node.args) != 2:
                raise bad("cdiv takes two arguments")
            if not node.args:
                raise bad(f"{node.func.id}() needs arguments")
            for a in node.args:
                self._check(a, axes)
        else:
            raise bad("only integers, axis names, + - * / // %, parentheses, min, max and cdiv "
                      "are allowed")

    def value(self, axes, where=""):
        return self._eval(self.tree, axes, where)

    def _eval(self, node, axes, where):
        bad = lambda why: Problem(self.file, self.field, f"{self.text!r}: {why}{where}")  # noqa: E731
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return int(axes[node.id])
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, axes, where)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call):
            args = [self._eval(a, axes, where) for a in node.args]
            if node.func.id == "cdiv":
                if args[1] <= 0:
                    raise bad(f"cdiv by {args[1]}")
                return -(-args[0] // args[1])
            return min(args) if node.func.id == "min" else max(args)
        a, b = self._eval(node.left, axes, where), self._eval(node.right, axes, where)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise bad("division by zero")
        if isinstance(node.op, ast.Div):
            if a % b:
                raise bad(f"{a} / {b} is not an integer (use // or cdiv)")
            return a // b
        op = type(node.op)
        if op is ast.Add:
            return a + b
        if op is ast.Sub:
            return a - b
        if op is ast.Mult:
            return a * b
        return a // b if op is ast.FloorDiv else a % b


# ---- the candidate -----------------------------------------------------------------------------

class Output:
    __slots__ = ("name", "shape", "dtype", "scratch")

    def __init__(self, name, shape, dtype, scratch):
        self.name, self.shape, self.dtype, self.scratch = name, shape, dtype, scratch


class Launch:
    """A kernel launch with every size resolved for one workload's axes."""

    def __init__(self, grid, threadgroup, template, output_shapes, shared_memory):
        self.grid, self.threadgroup, self.template = grid, threadgroup, template
        self.output_shapes, self.shared_memory = output_shapes, shared_memory


class KernelSpec:
    """A launch spec for one dialect; `launch(axes)` resolves its sizes for a workload."""

    def __init__(self, file, dialect, name, source, header, inputs, outputs, grid, threadgroup,
                 template, init_value, ensure_row_contiguous, shared_memory, atomic_outputs,
                 definition_outputs):
        self.file, self.dialect, self.name = file, dialect, name
        self.source, self.header = source, header
        self.inputs, self.outputs = inputs, outputs
        self.grid, self.threadgroup, self.template = grid, threadgroup, template
        self.init_value, self.ensure_row_contiguous = init_value, ensure_row_contiguous
        self.shared_memory, self.atomic_outputs = shared_memory, atomic_outputs
        self._definition_outputs = definition_outputs  # name -> shape spec (axis names, ints)
        digest = hashlib.sha256(f"{dialect}\0{header}\0{source}".encode()).hexdigest()[:12]
        # MLX keeps compiled kernels by name (in memory, and for CUDA as PTX on disk): a body
        # that changes must get a new name, or a stale kernel would run.
        self.kernel_name = f"{name}_{digest}"

    def launch(self, axes, where=""):
        limits = LIMITS[self.dialect]
        grid = tuple(e.value(axes, where) for e in self.grid)
        threadgroup = tuple(e.value(axes, where) for e in self.threadgroup)
        for field, values in (("grid", grid), ("threadgroup", threadgroup)):
            for i, v in enumerate(values):
                if not 1 <= v < 2 ** 31:
                    raise Problem(self.file, f"{field}[{i}]", f"is {v}{where}; it must be "
                                                              f"between 1 and 2^31 - 1")
        threads = threadgroup[0] * threadgroup[1] * threadgroup[2]
        if threads > MAX_THREADS:
            raise Problem(self.file, "threadgroup", f"{list(threadgroup)} is {threads} threads"
                                                    f"{where}; at most {MAX_THREADS}")
        for i, (v, most) in enumerate(zip(threadgroup, limits.block)):
            if v > most:
                raise Problem(self.file, f"threadgroup[{i}]",
                              f"is {v}{where}; {limits.device} allows at most {most} threads "
                              f"along {'xyz'[i]} in a threadgroup")
        if limits.grid_blocks is not None:
            for i, (g, t, most) in enumerate(zip(grid, threadgroup, limits.grid_blocks)):
                blocks = -(-g // t)
                if blocks > most:
                    raise Problem(self.file, f"grid[{i}]",
                                  f"is {g} threads, {blocks} threadgroups of {t}{where}; "
                                  f"{limits.device} launches at most {most} along {'xyz'[i]}")
        template = []
        for name, kind, value in self.template:
            if kind == "expr":
                value = value.value(axes, where)
                if not -2 ** 31 <= value < 2 ** 31:
                    raise Problem(self.file, f"template.{name}", f"is {value}{where}, beyond "
                                                                 f"a 32-bit int")
            template.append((name, kind, value))
        shapes = []
        for o in self.outputs:
            shape = tuple(e.value(axes, where) for e in o.shape)
            if any(d < 0 for d in shape):
                raise Problem(self.file, f"outputs.{o.name}.shape", f"is {list(shape)}{where}")
            if not o.scratch:
                expected = tuple(d if isinstance(d, int) else int(axes[d])
                                 for d in self._definition_outputs[o.name])
                if shape != expected:
                    raise Problem(self.file, f"outputs.{o.name}.shape",
                                  f"is {list(shape)}{where}, but the definition's output "
                                  f"'{o.name}' has shape {list(expected)}")
            shapes.append(shape)
        shared = self.shared_memory.value(axes, where) if self.shared_memory else 0
        if shared < 0:
            raise Problem(self.file, "cuda.shared_memory", f"is {shared}{where}")
        self._check_memory(limits, template, shared, where)
        return Launch(grid, threadgroup, template, shapes, shared)

    def _check_memory(self, limits, template, dynamic, where):
        """Static shared/threadgroup arrays of the body and header whose sizes are integers,
        template constants or simple #define / constexpr constants, plus the dynamic shared
        memory, against the dialect's limits. Arrays of other sizes are not counted (their
        size is only known to the compiler)."""
        arrays = static_arrays(self.dialect, self.header + "\n" + self.source, template)
        static = sum(size for _, size in arrays)
        listed = ", ".join(f"{name} {size} B" for name, size in arrays)
        field = f"{self.dialect}.source"
        if limits.static_shared_bytes is not None and static > limits.static_shared_bytes:
            raise Problem(self.file, field, (
                f"static __shared__ arrays take {static} bytes{where} ({listed}); "
                f"{limits.device} allows at most {limits.static_shared_bytes} bytes "
                f"({limits.static_shared_bytes // 1024} KiB) of static shared memory per block: "
                f"use dynamic shared memory (extern __shared__ and cuda.shared_memory)"))
        if static + dynamic > limits.shared_bytes:
            if dynamic:
                raise Problem(self.file, "cuda.shared_memory", (
                    f"is {dynamic} bytes{where}, with {static} bytes of static __shared__ "
                    f"arrays, {static + dynamic} in all; {limits.device} allows at most "
                    f"{limits.shared_bytes} bytes ({limits.shared_bytes // 1024} KiB) of "
                    f"{limits.memory} per block"))
            raise Problem(self.file, field, (
                f"threadgroup arrays take {static} bytes{where} ({listed}); {limits.device} "
                f"allows at most {limits.shared_bytes} bytes ({limits.shared_bytes // 1024} "
                f"KiB) of {limits.memory} per threadgroup"))


def load_table(file, text):
    if file.endswith(".json"):
        try:
            table = json.loads(text)
        except ValueError as e:
            raise Problem(file, "", f"is not valid JSON: {e}") from None
    else:
        try:
            import tomllib
        except ImportError:  # Python < 3.11
            raise Problem(file, "", f"reading TOML needs Python 3.11 or later (tomllib); this is "
                                    f"{sys.version.split()[0]}: write the spec as JSON") from None
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise Problem(file, "", f"is not valid TOML: {e}") from None
    if not isinstance(table, dict):
        raise Problem(file, "", "must be a table (a JSON object)")
    return table


def kernel_spec(file, table, files, definition, dialect, symbol):
    """Check a launch spec's table fully and select `dialect`'s section."""
    unknown = sorted(set(table) - _TOP_KEYS)
    if unknown:
        key = unknown[0]
        # A dialect's own key written at the top level (an agent-mode brain lost a round to
        # `shared_memory = ...` there): say which section takes it.
        home = next((d for d in DIALECTS if key in _ONLY[d]), None)
        hint = f" ({key} belongs in the [{home}] section: {home}.{key})" if home else ""
        raise Problem(file, key, f"unknown key{hint}; expected {', '.join(sorted(_TOP_KEYS))}")
    axes = list(definition.const) + list(definition.var)
    sections = {}
    for d in DIALECTS:
        if d in table:
            section = table[d]
            if not isinstance(section, dict):
                raise Problem(file, d, "must be a table")
            allowed = _DIALECT_KEYS | _ONLY[d]
            for key in section:
                if key not in allowed:
                    other = next((o for o in DIALECTS if key in _ONLY[o]), None)
                    hint = f" ({key} belongs to the {other} dialect)" if other else ""
                    raise Problem(file, f"{d}.{key}", f"unknown key{hint}; expected "
                                                      f"{', '.join(sorted(allowed))}")
            sections[d] = section
    if not sections:
        raise Problem(file, "", "has no kernel: add a [cuda] or [metal] section with the body "
                                "(source or source_file)")
    for d, section in sections.items():  # every section is checked, not only this machine's
        _body(file, section, d, files)
    if dialect is None:
        for d in sections:  # each in full: what is wrong with it comes first
            kernel_spec(file, table, files, definition, d, symbol)
        raise NeedsGpu(file, list(sections))
    if dialect not in sections:
        raise Problem(file, "", f"has no [{dialect}] section: this machine runs {dialect} "
                                f"kernels (mx.fast.{dialect}_kernel) and the candidate is "
                                f"written for {', '.join(sections)} only")
    section = sections[dialect]

    name = table.get("name", symbol)
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise Problem(file, "name", f"{name!r} must be an identifier")
    def_inputs = [t.name for t in definition.inputs]
    inputs = table.get("inputs", def_inputs)
    if not isinstance(inputs, list) or not all(isinstance(n, str) for n in inputs):
        raise Problem(file, "inputs", "must be a list of the definition's input names")
    for n in inputs:
        if n not in def_inputs:
            raise Problem(file, "inputs", f"'{n}' is not an input of the definition "
                                          f"({', '.join(def_inputs)})")
        if inputs.count(n) > 1:
            raise Problem(file, "inputs", f"'{n}' appears twice")
    outputs = _outputs(file, table.get("outputs"), definition, axes)
    template = _template(file, section.get("template", table.get("template", {})),
                         f"{dialect}.template" if "template" in section else "template", axes)
    names = {}
    for kind, listed in (("input", inputs), ("output", [o.name for o in outputs]),
                         ("template argument", [t[0] for t in template])):
        for n in listed:
            if n in names:
                raise Problem(file, "outputs" if kind == "output" else "template",
                              f"'{n}' names both an {names[n]} and a {kind}")
            names[n] = kind
    grid = _sizes(file, section, table, "grid", dialect, axes)
    threadgroup = _sizes(file, section, table, "threadgroup", dialect, axes)
    init = table.get("init_value")
    if isinstance(init, str) and init.lower() in _INIT_WORDS:
        init = _INIT_WORDS[init.lower()]
    elif init is not None and (isinstance(init, bool) or not isinstance(init, (int, float))):
        raise Problem(file, "init_value", f"{init!r} must be a number (or \"nan\", \"inf\")")
    contiguous = table.get("ensure_row_contiguous", True)
    if not isinstance(contiguous, bool):
        raise Problem(file, "ensure_row_contiguous", "must be true or false")
    shared = None
    if "shared_memory" in section:
        shared = Expr(section["shared_memory"], axes, file, "cuda.shared_memory")
    atomic = section.get("atomic_outputs", False)
    if not isinstance(atomic, bool):
        raise Problem(file, "metal.atomic_outputs", "must be true or false")
    source, header = _body(file, section, dialect, files)
    return KernelSpec(file, dialect, name, source, header, inputs, outputs, grid, threadgroup,
                      template, None if init is None else float(init), contiguous, shared, atomic,
                      {t.name: t.shape_spec for t in definition.outputs})


def _body(file, section, dialect, files):
    """(source, header) of a dialect section, inline or from the candidate's other files."""
    found = []
    for key in ("source", "header"):
        inline, named = section.get(key), section.get(f"{key}_file")
        if inline is not None and named is not None:
            raise Problem(file, f"{dialect}.{key}", f"give {key} or {key}_file, not both")
        if named is not None:
            if not isinstance(named, str):
                raise Problem(file, f"{dialect}.{key}_file", "must be a file name")
            if named == file or named not in files:
                others = ", ".join(p for p in files if p != file) or "none"
                raise Problem(file, f"{dialect}.{key}_file",
                              f"'{named}' is not among the candidate's other sources "
                              f"({others})")
            inline = files[named]
        if inline is not None and not isinstance(inline, str):
            raise Problem(file, f"{dialect}.{key}", "must be a string")
        if key == "source" and not (inline or "").strip():
            raise Problem(file, f"{dialect}.source", "the kernel body is missing or empty "
                                                     "(source or source_file)")
        found.append(inline or "")
    return found[0], found[1]


def _sizes(file, section, table, key, dialect, axes):
    value, field = (section[key], f"{dialect}.{key}") if key in section else (table.get(key), key)
    if value is None:
        raise Problem(file, key, f"is missing: {key} = [x, y, z] (threads"
                                 f"{' per threadgroup' if key == 'threadgroup' else ''}; "
                                 f"integers or expressions over the axes)")
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        raise Problem(file, field, "must be a list of 1 to 3 sizes")
    exprs = [Expr(v, axes, file, f"{field}[{i}]") for i, v in enumerate(value)]
    while len(exprs) < 3:
        exprs.append(Expr(1, axes, file, field))
    return exprs


def _template(file, value, field, axes):
    if not isinstance(value, dict):
        raise Problem(file, field, "must be a table of name = value")
    out = []
    for name, v in value.items():
        f = f"{field}.{name}"
        if not name.isidentifier() or not name.isascii():
            raise Problem(file, f, "the name must be an identifier")
        if isinstance(v, bool):
            out.append((name, "bool", v))
        elif isinstance(v, (int, str)):
            out.append((name, "expr", Expr(v, axes, file, f)))
        elif isinstance(v, dict) and set(v) == {"dtype"}:
            if v["dtype"] not in DTYPES:
                raise Problem(file, f"{f}.dtype", f"{v['dtype']!r} is not an MLX dtype "
                                                  f"({', '.join(DTYPES)})")
            out.append((name, "dtype", v["dtype"]))
        else:
            raise Problem(file, f, f"{v!r} must be an integer, a boolean, an expression over "
                                   f"the axes or {{dtype = \"float16\"}}")
    return out


def _outputs(file, value, definition, axes):
    if value is None:
        return [Output(t.name, [Expr(d, axes, file, f"outputs.{t.name}.shape") for d in
                                t.shape_spec], t.dtype_name, False) for t in definition.outputs]
    if not isinstance(value, list) or not all(isinstance(o, dict) for o in value):
        raise Problem(file, "outputs", "must be a list of tables with name, shape and dtype")
    defined = {t.name: t for t in definition.outputs}
    out = []
    for i, o in enumerate(value):
        unknown = sorted(set(o) - _OUTPUT_KEYS)
        if unknown:
            raise Problem(file, f"outputs[{i}].{unknown[0]}", "unknown key; expected name, "
                                                              "shape, dtype")
        name = o.get("name")
        if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
            raise Problem(file, f"outputs[{i}].name", f"{name!r} must be an identifier")
        if any(x.name == name for x in out):
            raise Problem(file, f"outputs[{i}].name", f"'{name}' appears twice")
        shape = o.get("shape")
        if not isinstance(shape, list):
            raise Problem(file, f"outputs.{name}.shape", "must be a list of sizes")
        dtype = o.get("dtype")
        if dtype not in DTYPES:
            raise Problem(file, f"outputs.{name}.dtype", f"{dtype!r} is not an MLX dtype "
                                                         f"({', '.join(DTYPES)})")
        if name in defined and dtype != defined[name].dtype_name:
            raise Problem(file, f"outputs.{name}.dtype", f"is {dtype}, but the definition's "
                                                         f"output '{name}' is "
                                                         f"{defined[name].dtype_name}")
        exprs = [Expr(d, axes, file, f"outputs.{name}.shape[{j}]") for j, d in enumerate(shape)]
        if name in defined and len(exprs) != len(defined[name].shape_spec):
            raise Problem(file, f"outputs.{name}.shape", f"has {len(exprs)} dimensions, the "
                                                         f"definition's output has "
                                                         f"{len(defined[name].shape_spec)}")
        out.append(Output(name, exprs, dtype, name not in defined))
    missing = [n for n in defined if all(o.name != n for o in out)]
    if missing:
        raise Problem(file, "outputs", f"lacks the definition's output '{missing[0]}'")
    return out
