"""Backend `c`: the candidate is C11 compiled to a shared library and called through ctypes.

Calling convention (docs/protocol.md): inputs in definition order (arrays as pointers to
contiguous data, scalars by value), then outputs as pointers, then every var axis as int64_t.
"""

import ctypes
import functools
import os
import shlex
import signal
import subprocess
import time

from .. import timing
from ..errors import CandidateError, TaskError
from ..memory import HostMemory

_SCALARS = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "bool": ctypes.c_bool, "int16": ctypes.c_int16,
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8,
}
_ARRAYS = set(_SCALARS) | {"float16"}
_FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-std=c11"]
_LIBRARY = "candidate.so"


class Backend:
    name = "c"
    time_pairs = staticmethod(timing.time_pairs)
    bfloat16_as_float32 = False  # no bfloat16 on the host

    def __init__(self):
        self.compiler = None
        self._library = None  # path of the built .so
        self._symbol = None
        self._entry = None
        self._function = None
        self._load_error = None

    def open(self, request):
        """Nothing to claim: the candidate runs on this process's CPU."""

    def describe(self):
        return None

    def memory(self, spec, reference):
        return HostMemory()

    def device_room(self):
        return None

    def sanitizer(self, settings):
        if settings:
            raise TaskError("sanitize", "compute-sanitizer checks GPU kernels; backend c has "
                                        "none (leave sanitize unset)")
        return None

    def check_definition(self, spec):
        for t in spec.inputs + spec.outputs:
            if t.dtype_name not in _ARRAYS:
                raise TaskError(f"{t.field}.dtype", f"dtype {t.dtype_name} is not supported by "
                                                    f"backend c ('{t.name}')")
        for t in spec.inputs:
            if t.is_scalar and t.dtype_name not in _SCALARS:
                raise TaskError(f"{t.field}.dtype", f"backend c cannot pass scalar input "
                                                    f"'{t.name}' of dtype {t.dtype_name} by value")

    # ---- build -------------------------------------------------------------------------------

    def build(self, candidate, workdir, limits):
        cc = shlex.split(os.environ.get("CC") or "cc")
        self.compiler = _version(cc)
        log_bytes = int(limits.get("log_bytes", 65536))
        try:
            sources, symbol, extra, openmp = _check_candidate(candidate)
        except ValueError as e:
            return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}
        build = os.path.join(workdir, "build")
        os.makedirs(build)
        c_files = []
        for path, content in sources:
            full = os.path.join(build, path)
            try:
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(content)
            except (OSError, ValueError) as e:
                return {"ok": False, "seconds": 0.0, "command": [],
                        "log": f"source {path!r} cannot be written: {e}"}
            if path.endswith(".c"):
                c_files.append(path)
        command = (cc + _FLAGS + (["-fopenmp"] if openmp else []) + extra
                   + ["-o", _LIBRARY] + c_files + ["-lm"])
        log_path = os.path.join(workdir, "compile.log")
        timeout = float(limits.get("compile_timeout_s", 30))
        start = time.perf_counter()
        with open(log_path, "wb") as log:
            try:
                # The compiler stays in our process group, so the supervisor's group kill still
                # reaches it; our own timeout kills its process tree (cc1, as, ld), not just cc.
                proc = subprocess.Popen(command, cwd=build, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT)
            except FileNotFoundError:
                raise RuntimeError(f"C compiler {cc[0]!r} not found; set CC") from None
            try:
                rc = proc.wait(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
                rc, timed_out = None, True
        seconds = time.perf_counter() - start
        text = _bounded(log_path, log_bytes)
        ok = rc == 0 and not timed_out
        if timed_out:
            text += f"\ncompilation timed out after {timeout:g} s and was killed"
        elif ok and not os.path.exists(os.path.join(build, _LIBRARY)):
            ok, text = False, text + f"\nthe compiler exited 0 but wrote no {_LIBRARY}"
        elif not ok:
            text += f"\nthe compiler exited with status {rc}" if rc > 0 else \
                f"\nthe compiler was killed by signal {-rc}"
        if ok:
            self._library = os.path.join(build, _LIBRARY)
            self._symbol = symbol
            self._entry = candidate.get("entry_point")
        return {"ok": ok, "seconds": seconds, "command": command, "log": text}

    # ---- call --------------------------------------------------------------------------------

    def load(self, spec):
        """Load the built library (this runs the candidate's constructors) and find the entry.

        Raises CandidateError (runtime_error) when that fails; later calls raise it again.
        """
        self._load(spec)

    def prepare(self, spec, axes):
        function = self._load(spec)
        kinds = [_SCALARS[t.dtype_name] if t.is_scalar else None for t in spec.inputs]
        axis_args = tuple(ctypes.c_int64(axes[name]) for name in spec.var)
        return _Kernel(function, kinds, axis_args)

    def _load(self, spec):
        if self._function is None and self._load_error is None:
            try:
                library = ctypes.CDLL(self._library)  # runs the candidate's constructors
            except OSError as e:
                self._load_error = f"loading the compiled candidate failed: {e}"
            except Exception as e:  # noqa: BLE001 - e.g. MemoryError after its constructors ran
                self._load_error = (f"loading the compiled candidate failed: "
                                    f"{type(e).__name__}: {e}")
            else:
                try:
                    function = getattr(library, self._symbol)
                except AttributeError:
                    self._load_error = (
                        f"the compiled candidate does not export the entry symbol "
                        f"'{self._symbol}' (entry_point {self._entry!r}); define a non-static "
                        f"function with exactly that name")
                else:
                    function.argtypes = (
                        [_SCALARS[t.dtype_name] if t.is_scalar else ctypes.c_void_p
                         for t in spec.inputs]
                        + [ctypes.c_void_p] * len(spec.outputs)
                        + [ctypes.c_int64] * len(spec.var))
                    function.restype = None
                    self._function = function
        if self._load_error is not None:
            raise CandidateError("runtime_error", self._load_error)
        return self._function


class _Kernel:
    def __init__(self, function, input_kinds, axis_args):
        self._function = function
        self._input_kinds = input_kinds  # ctypes scalar type, or None for an array
        self._axis_args = axis_args

    def bind(self, inputs, outputs):
        """A zero-argument call with every ctypes argument converted once, up front."""
        args = []
        for kind, value in zip(self._input_kinds, inputs):
            args.append(kind(value.item()) if kind else ctypes.c_void_p(_address(value)))
        for array in outputs:
            args.append(ctypes.c_void_p(_address(array)))
        return functools.partial(self._function, *args, *self._axis_args)

    @staticmethod
    def results(raw, outputs, shapes):
        """Destination-passing style: the outputs are the buffers the harness passed."""
        return outputs


def _address(array):
    if not array.flags.c_contiguous:
        raise RuntimeError("backend c was handed a non-contiguous array")
    return array.__array_interface__["data"][0]


def _check_candidate(candidate):
    if not isinstance(candidate, dict):
        raise ValueError("the request has no candidate to build")
    language = candidate.get("language", "c")
    if language != "c":
        raise ValueError(f"backend c cannot build a candidate in language {language!r}")
    if candidate.get("destination_passing_style", True) is not True:
        raise ValueError("backend c calls kernels in destination-passing style only; set "
                         "destination_passing_style to true and write outputs through pointers")
    sources = []
    seen = set()
    for i, s in enumerate(candidate.get("sources") or []):
        path = s.get("path") if isinstance(s, dict) else None
        content = s.get("content") if isinstance(s, dict) else None
        problem = _path_problem(path)
        if problem:
            raise ValueError(f"source {i} path {path!r} is rejected: {problem}")
        if not isinstance(content, str):
            raise ValueError(f"source {path!r} has no text content")
        if path in seen:
            raise ValueError(f"source path {path!r} appears twice")
        seen.add(path)
        sources.append((path, content))
    if not any(p.endswith(".c") for p, _ in sources):
        raise ValueError("the candidate has no .c source to compile")
    entry = candidate.get("entry_point")
    if not isinstance(entry, str) or not entry:
        raise ValueError("the candidate has no entry_point (expected 'file.c::symbol')")
    file, sep, symbol = entry.rpartition("::")
    if sep and file not in seen:
        raise ValueError(f"entry_point {entry!r} names {file!r}, which is not among the sources")
    if not symbol.isidentifier() or not symbol.isascii():
        raise ValueError(f"entry_point {entry!r} does not end in a C identifier")
    build = candidate.get("build") or {}
    extra = build.get("extra_flags") or []
    if not isinstance(extra, list) or not all(isinstance(f, str) for f in extra):
        raise ValueError("build.extra_flags must be a list of strings")
    return sources, symbol, list(extra), bool(build.get("openmp", False))


def _path_problem(path):
    if not isinstance(path, str) or not path:
        return "it must be a non-empty string"
    if path.startswith("/") or os.path.isabs(path):
        return "absolute paths are not allowed; use a plain relative name like 'kernel.c'"
    if "\\" in path or "\x00" in path or path.startswith("-") or path.startswith("~"):
        return "it must be a plain relative name like 'kernel.c'"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "'..', '.' and empty components are not allowed; use a plain relative name"
    if path == _LIBRARY:
        return f"{_LIBRARY} is the name of the build output"
    return None


def _kill_tree(proc):
    """SIGKILL a child and its descendants, found by their parent ids in /proc (Linux)."""
    for pid in [proc.pid] + _descendants(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def _descendants(root):
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so cut at the last ')'.
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _bounded(path, limit):
    """The log, or its head and tail around a note of what was cut when it exceeds `limit`."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size <= limit:
            return f.read().decode("utf-8", "replace")
        note = f"\n[... {{}} bytes of compiler output omitted ...]\n"
        keep = max(limit - len(note) - 20, 0)
        head = f.read(keep // 2)
        f.seek(size - (keep - keep // 2))
        tail = f.read()
    omitted = size - len(head) - len(tail)
    return (head.decode("utf-8", "replace") + note.format(omitted)
            + tail.decode("utf-8", "replace"))


def _version(cc):
    try:
        out = subprocess.run(cc + ["--version"], capture_output=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else None
