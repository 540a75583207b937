"""What the `mlx` kernel dialects allow (docs/mlx.md), without MLX: the dialects, the dtypes
mx.fast kernels take, the launch limits of each dialect's GPUs, and the static
shared/threadgroup memory a kernel body declares (`static_arrays`), which a launch is held to.
launch_spec.py applies them to a launch spec; spec.py re-exports them."""

import ast
import re

DIALECTS = ("cuda", "metal")
# The element types mx.fast kernels can take and return (MLX dtype names).
DTYPES = ("float32", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool")
# Threads per threadgroup: the limit of both CUDA blocks and Metal threadgroups.
MAX_THREADS = 1024


class Limits:
    """What one launch may ask of a device in a dialect, checked for every workload before
    anything runs. The harness gets no device description with the request, so these are the
    figures of the knowledge base's hardware (kb/hardware/*.toml) for the dialect's GPUs."""

    def __init__(self, device, block, grid_blocks, shared_bytes, static_shared_bytes, memory):
        self.device = device                 # who imposes them, for messages
        self.block = block                   # threads per threadgroup along x, y, z
        self.grid_blocks = grid_blocks       # threadgroups along x, y, z (None: no limit here)
        self.shared_bytes = shared_bytes     # shared/threadgroup memory per threadgroup, in all
        self.static_shared_bytes = static_shared_bytes  # of it in static arrays (None: all)
        self.memory = memory                 # its name in the dialect


LIMITS = {
    # CUDA (compute capability 9.0: the H200, kb/hardware/h200.toml; the H100 and B200 have the
    # same): 1024 threads per block, at most 64 along z; at most 65535 blocks along y and z;
    # static __shared__ arrays up to 48 KB, and with dynamic shared memory (MLX opts in beyond
    # 48 KB itself) up to sharedMemPerBlockOptin, 232448 B = 227 KiB (figures.
    # shared_mem_per_block_max_kb = 227).
    "cuda": Limits("CUDA (H200, sm_90)", (1024, 1024, 64), (2 ** 31 - 1, 65535, 65535),
                   227 * 1024, 48 * 1024, "shared memory"),
    # Metal on Apple GPUs (kb/hardware/apple-*.toml): 1024 threads per threadgroup, 32 KB of
    # threadgroup memory (figures.shared_mem_per_block_max_kb = 32, no opt-in beyond it), all of
    # it static in mx.fast.metal_kernel.
    "metal": Limits("Metal (Apple GPUs)", (1024, 1024, 1024), None, 32 * 1024, None,
                    "threadgroup memory"),
}


# ---- static shared/threadgroup arrays -----------------------------------------------------------

# Bytes of the element types a body declares arrays of (CUDA and Metal spellings), and of the
# MLX dtypes a template argument can name.
_TYPE_BYTES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "uchar": 1, "int8_t": 1, "uint8_t": 1,
    "bool": 1, "short": 2, "ushort": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2,
    "half": 2, "__half": 2, "float16_t": 2, "bfloat": 2, "bfloat16_t": 2, "__nv_bfloat16": 2,
    "int": 4, "uint": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4,
    "float": 4, "__half2": 4, "__nv_bfloat162": 4, "long": 8, "unsigned long": 8,
    "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8, "size_t": 8,
    "double": 8,
}
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "int16": 2, "int32": 4,
                "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1}
# Vector types: float4, half2, int3 (Metal, CUDA's float4 and friends); 3-vectors take 4 lanes.
_VECTOR = re.compile(r"^(float|half|int|uint|short|ushort|char|uchar|bfloat|double)([234])$")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KEYWORD = {"cuda": r"(?<![\w])(?<!extern )__shared__\b", "metal": r"(?<![\w])threadgroup(?![\w])"}
_QUALIFIERS = re.compile(r"^(?:(?:static|const|volatile|__restrict__|__align__\s*\(\s*\d+\s*\)|"
                         r"alignas\s*\(\s*\d+\s*\))\s+)*")
_DECLARATOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*((?:\[[^\[\]]+\]\s*)+)(?:=.*)?$", re.S)
_CONSTANT = re.compile(r"#\s*define\s+([A-Za-z_]\w*)\s+([^\n]+)|"
                       r"\b(?:static\s+)?(?:constexpr|constant|const)\s+(?:unsigned\s+|signed\s+)?"
                       r"(?:int|uint|unsigned|long|size_t|int32_t|uint32_t|int64_t|short)\s+"
                       r"([A-Za-z_]\w*)\s*=\s*([^;]+);")


def static_arrays(dialect, text, template):
    """[(name, bytes)] of the static arrays in shared memory (CUDA `__shared__`, not `extern`)
    or threadgroup memory (Metal `threadgroup`) declared in `text`, for one launch's template
    arguments. An array is counted when its element type and every dimension are known: integer
    literals, template constants, and #define / constexpr integer constants of the text, joined
    by + - * / % << >> and parentheses; others are left out.

    Arrays under preprocessor conditionals (#if / #ifdef / #ifndef ... #elif / #else / #endif)
    are counted for the branch of each conditional that declares the fewest bytes (none where
    there is no #else): the condition is the compiler's to decide (`__CUDA_ARCH_FEAT_SM90_ALL`,
    a template constant), and a kernel is refused only for what every choice of branches declares.
    A kernel with a Hopper path and an sm_80 fallback in #if / #else declares one of the two."""
    text = _COMMENTS.sub(" ", text)
    names, types = {}, {}
    for name, kind, value in template:
        if kind == "dtype":
            types[name] = _DTYPE_BYTES[value]
        else:
            names[name] = int(value)
    for m in _CONSTANT.finditer(text):  # in order: later constants may use earlier ones
        name, expr = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        value = _c_int(expr, names)
        if value is not None:
            names.setdefault(name, value)
    return _fewest(_conditionals(text), lambda part: _declared(dialect, part, names, types))


def _conditionals(text):
    """`text` as a block: a list of text pieces and conditionals, each conditional a list of
    branch blocks (with an empty last branch where it has no #else). An unmatched #endif or
    #else closes nothing; an unterminated #if ends at the end of the text."""
    root = []
    stack = [(root, None)]  # (the block being filled, the conditional it is a branch of)
    piece = []
    for line in text.split("\n"):
        d = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b", line)
        if d is None:
            piece.append(line)
            continue
        stack[-1][0].append("\n".join(piece))
        piece = []
        kind = d.group(1)
        if kind in ("if", "ifdef", "ifndef"):
            cond = {"branches": [[]], "else": False}
            stack[-1][0].append(cond)
            stack.append((cond["branches"][0], cond))
        elif stack[-1][1] is not None:
            cond = stack.pop()[1]
            if kind == "endif":
                continue
            cond["else"] = cond["else"] or kind == "else"
            cond["branches"].append([])
            stack.append((cond["branches"][-1], cond))
    stack[-1][0].append("\n".join(piece))
    return root


def _fewest(block, declared):
    """The arrays of `block` (see `_conditionals`), each conditional taken at its branch with
    the fewest bytes."""
    found = []
    for item in block:
        if isinstance(item, str):
            found += declared(item)
            continue
        choices = [_fewest(b, declared) for b in item["branches"]]
        if not item["else"]:
            choices.append([])
        found += min(choices, key=lambda arrays: sum(size for _, size in arrays))
    return found


def _declared(dialect, text, names, types):
    """[(name, bytes)] of the arrays `text` declares outright (no conditionals in it)."""
    found = []
    for m in re.finditer(_KEYWORD[dialect], text):
        end = text.find(";", m.end())
        declaration = text[m.end():end if end >= 0 else len(text)]
        declaration = _QUALIFIERS.sub("", declaration.strip())
        parts = re.match(r"^((?:unsigned|signed|long)\s+)*([A-Za-z_]\w*)\s+(.*)$", declaration,
                         re.S)
        if parts is None or "(" in parts.group(3).split("[")[0]:
            continue  # a pointer, a parameter, a function: no array here
        element = _type_bytes(((parts.group(1) or "") + parts.group(2)).strip(), types)
        if element is None:
            continue
        for declarator in _split_top(parts.group(3)):
            d = _DECLARATOR.match(declarator)
            if d is None:
                continue
            count = 1
            for dim in re.findall(r"\[([^\[\]]+)\]", d.group(2)):
                value = _c_int(dim, names)
                if value is None or value < 0:
                    count = None
                    break
                count *= value
            if count is not None:
                found.append((d.group(1), count * element))
    return found


def _type_bytes(name, types):
    name = " ".join(name.split())
    if name in types:
        return types[name]
    if name in _TYPE_BYTES:
        return _TYPE_BYTES[name]
    v = _VECTOR.match(name)
    if v:
        lanes = 4 if v.group(2) == "3" else int(v.group(2))
        return lanes * _TYPE_BYTES.get(v.group(1), 2 if v.group(1) == "bfloat" else 4)
    return None


def _split_top(text):
    """`a[4], b[N][M]` -> ['a[4]', 'b[N][M]'] (commas inside brackets or braces stay)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[({":
            depth += 1
        elif c in "])}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _c_int(expr, names):
    """The value of a C integer expression over known constants, or None."""
    expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr.strip())
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None

    def ev(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise KeyError(node.id)
            return names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            op = type(node.op)
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op in (ast.Div, ast.FloorDiv, ast.Mod) and b != 0:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates
                return q if op is not ast.Mod else a - q * b
            if op is ast.LShift and 0 <= b < 64:
                return a << b
            if op is ast.RShift and 0 <= b < 64:
                return a >> b
        raise KeyError("unsupported")
    try:
        return ev(tree)
    except (KeyError, RecursionError):
        return None
