"""Backends cpp's and cuda_binding's build and load: the sources built through their binding
as FlashInfer-Bench builds them (tvm-ffi: `tvm_ffi.cpp.build`; torch:
`torch.utils.cpp_extension.load`), in a child process (extension.py) under the compile timeout,
into a cache entry keyed by a content hash; the module loaded into this process and its entry
found; and its call (`Kernel`).

The cache (`candidate.build.cache_dir`/binding, else the evaluation's own folder): one folder per
key, a SHA-1 over the language, entry point, binding, destination-passing style, the sources'
paths and contents, the arch, the extra flags and the toolchain's versions; each entry records
its sources, and is reused only when its library exists and the sources are byte-identical.
Builds of one key are serialised by a file lock; an entry is built in a temporary folder and
renamed into place. Failed builds are not cached.
"""

import fcntl
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time

from ...errors import CandidateError, SetupError
from ..common import sources

CACHE_FORMAT = 1
CPP_FILES = (".cpp", ".cc", ".cxx", ".c")
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extension.py")
BINDINGS = ("tvm-ffi", "torch")
DEFAULT_ARCH = "sm_90"  # a build with no device and no --arch (FlashInfer-Bench's H100/H200 class)


class Built:
    """A built module: the library, its module name, binding, entry symbol and entry point."""

    def __init__(self, library, name, binding, symbol, entry, dps):
        self.library, self.name, self.binding = library, name, binding
        self.symbol, self.entry, self.dps = symbol, entry, dps


def _dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _ninja():
    """The ninja binary: PATH, beside this interpreter, or the ninja wheel's."""
    found = shutil.which("ninja")
    if found:
        return found
    for folder in (os.path.dirname(sys.executable), sysconfig.get_path("scripts")):
        candidate = os.path.join(folder or ".", "ninja")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def toolchain(binding, cuda, backend):
    """The tools the build needs, as {name: version or path} (part of the cache key), or a
    SetupError naming what to install."""
    tools = {}
    if binding == "tvm-ffi":
        if importlib.util.find_spec("tvm_ffi") is None:
            raise SetupError(f"backend {backend} builds the tvm-ffi binding with tvm_ffi, which "
                             f"this Python ({sys.executable}) cannot import: pip install "
                             f"apache-tvm-ffi ninja", missing="tvm_ffi")
        tools["apache-tvm-ffi"] = _dist_version("apache-tvm-ffi")
    else:
        if importlib.util.find_spec("torch") is None:
            raise SetupError(f"backend {backend} builds the torch binding with "
                             f"torch.utils.cpp_extension, and this Python ({sys.executable}) "
                             f"cannot import torch: install PyTorch there, or set KSEARCH_PYTHON "
                             f"to an interpreter that has it", missing="torch")
        tools["torch"] = _dist_version("torch")
    ninja = _ninja()
    if ninja is None:
        raise SetupError(f"backend {backend} builds {binding} modules with ninja, which is not on "
                         f"PATH nor beside {sys.executable}: pip install ninja")
    tools["ninja"] = ninja
    if cuda:
        from ..cuda import nvcc as nvcc_tool  # imports no NumPy nor torch
        found = nvcc_tool.find()
        if found is None:
            raise SetupError(f"backend {backend} needs nvcc: set CUDA_HOME, or put nvcc on PATH "
                             f"(pip install nvidia-cuda-nvcc nvidia-cuda-runtime "
                             f"nvidia-cuda-cccl provides one)")
        try:
            tools["nvcc"] = nvcc_tool.version(found)[1]
        except Exception:  # noqa: BLE001 - an nvcc that cannot say its version fails to build
            tools["nvcc"] = None
        tools["nvcc_path"] = found
    return tools


def _cuda_env(nvcc, arch, scratch):
    """(environment entries, extra linker flags) for a CUDA build with `nvcc`: CUDA_HOME, the
    arch lists tvm-ffi and torch read, and an unversioned libcudart where the pip runtime has
    only libcudart.so.N."""
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    digits = arch.removeprefix("sm_").removeprefix("compute_").rstrip("af")
    dotted = f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else digits
    env = {"CUDA_HOME": home, "CUDA_PATH": home, "TVM_FFI_CUDA_ARCH_LIST": dotted,
           "TORCH_CUDA_ARCH_LIST": dotted}
    ldflags = []
    libdirs = [os.path.join(home, d) for d in ("lib64", "lib")]
    if not any(os.path.exists(os.path.join(d, "libcudart.so")) for d in libdirs):
        versioned = sorted(glob.glob(os.path.join(home, "lib*", "libcudart.so.*")))
        if versioned:
            link_dir = os.path.join(scratch, "cudart-link")
            os.makedirs(link_dir, exist_ok=True)
            target = os.path.join(link_dir, "libcudart.so")
            if not os.path.lexists(target):
                os.symlink(versioned[0], target)
            ldflags += [f"-L{link_dir}", f"-Wl,-rpath,{os.path.dirname(versioned[0])}"]
    return env, ldflags


def cache_key(language, checked, binding, dps, arch, tools):
    h = hashlib.sha1()
    h.update(json.dumps({"format": CACHE_FORMAT, "language": language, "entry": checked.entry,
                         "binding": binding, "dps": dps, "arch": arch, "tools": tools,
                         "flags": checked.extra_flags,
                         "sources": sorted(checked.sources)}, sort_keys=True).encode())
    return h.hexdigest()


def _from_cache(entry, checked):
    """The cached library when the entry holds one built from byte-identical sources."""
    try:
        with open(os.path.join(entry, "entry.json"), encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError):
        return None
    library = os.path.join(entry, stored.get("library", ""))
    if not os.path.isfile(library):
        return None
    for path, content in checked.sources:
        try:
            with open(os.path.join(entry, path), encoding="utf-8") as f:
                if f.read() != content:
                    return None
        except (OSError, ValueError):
            return None
    return library, stored.get("log", "")


def compile_module(candidate, workdir, limits, language, backend, arch=None, cuda=False):
    """Build the candidate's module. Returns (the `compile` event's fields, a Built or None,
    the toolchain's {name: version} or None when the sources were refused before it was
    looked for)."""
    result, built, tools = _compile_module(candidate, workdir, limits, language, backend, arch,
                                           cuda)
    return result, built, tools


def _compile_module(candidate, workdir, limits, language, backend, arch, cuda):
    tools = None

    def failed(text):
        return {"ok": False, "seconds": 0.0, "command": [], "log": text}, None, tools
    example = "kernel.cu" if cuda else "kernel.cc"
    try:
        checked = sources.check(candidate, language, CPP_FILES + ((".cu",) if cuda else ()),
                                "C++ source" + (" or .cu source" if cuda else ""),
                                kind="a C identifier (the exported function)", example=example)
    except ValueError as e:
        return failed(str(e))
    binding = candidate.get("binding") or "tvm-ffi"
    if binding not in BINDINGS:
        return failed(f"binding {binding!r} is not one ksearch builds ({', '.join(BINDINGS)})")
    dps = candidate.get("destination_passing_style", True) is not False
    if cuda:
        arch = arch or checked.build.get("arch") or DEFAULT_ARCH
    else:
        arch = None
    tools = toolchain(binding, cuda, backend)
    key = cache_key(language, checked, binding, dps, arch, tools)
    name = f"ksearch_{key[:20]}"
    cache_dir = checked.build.get("cache_dir")
    root = os.path.join(cache_dir, "binding") if cache_dir else os.path.join(workdir, "binding")
    shard = os.path.join(root, key[:2])
    entry = os.path.join(shard, key)
    command = [sys.executable, CHILD, f"{binding} build of {name}"]
    start = time.perf_counter()
    try:
        os.makedirs(shard, exist_ok=True)
        lock = open(os.path.join(shard, key + ".lock"), "a")
    except OSError as e:
        return failed(f"the build cache {root!r} cannot be written: {e}")
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        hit = _from_cache(entry, checked)
        if hit is not None:
            library, log = hit
            return ({"ok": True, "seconds": time.perf_counter() - start, "command": command,
                     "log": log, "cached": True, "arch": arch},
                    Built(library, name, binding, checked.symbol, checked.entry, dps), tools)
        scratch = tempfile.mkdtemp(prefix=key[:8] + ".", dir=shard)
        try:
            return _build(checked, scratch, entry, name, binding, dps, cuda, arch, tools,
                          limits, command, start) + (tools,)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _build(checked, scratch, entry, name, binding, dps, cuda, arch, tools, limits, command,
           start):
    try:
        sources.write(checked.sources, scratch)
    except ValueError as e:
        return {"ok": False, "seconds": 0.0, "command": [], "log": str(e)}, None
    env = dict(os.environ)
    path = [os.path.dirname(tools["ninja"])]
    ldflags = list(checked.extra_flags)
    if cuda:
        extra_env, extra_ld = _cuda_env(tools["nvcc_path"], arch, os.path.dirname(scratch))
        env.update(extra_env)
        ldflags += extra_ld
        path.append(os.path.dirname(tools["nvcc_path"]))
    env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
    args = {"binding": binding, "name": name, "build_dir": scratch,
            "sources": [os.path.join(scratch, p) for p, _ in checked.sources
                        if p.endswith(CPP_FILES + (".cu",))],
            "cuda": cuda, "ldflags": ldflags, "out": os.path.join(scratch, "built.json")}
    args_path = os.path.join(os.path.dirname(scratch), os.path.basename(scratch) + ".args.json")
    with open(args_path, "w", encoding="utf-8") as f:
        json.dump(args, f)
    command = [sys.executable, CHILD, args_path]
    log_path = os.path.join(os.path.dirname(scratch), os.path.basename(scratch) + ".log")
    timeout = float(limits.get("compile_timeout_s", 120))
    try:
        rc, timed_out = sources.compile_in_child(command, scratch, log_path, timeout,
                                                 "Python", env=env)
    finally:
        os.unlink(args_path)
    seconds = time.perf_counter() - start
    text = sources.bounded(log_path, int(limits.get("log_bytes", 65536)))
    os.unlink(log_path)
    library = None
    try:
        with open(args["out"], encoding="utf-8") as f:
            library = json.load(f)["library"]
    except (OSError, ValueError, KeyError):
        pass
    ok, text = sources.outcome_text(text, rc, timed_out, timeout,
                                    library or os.path.join(scratch, name + ".so"))
    result = {"ok": ok and library is not None, "seconds": seconds, "command": command,
              "log": text, "cached": False, "arch": arch}
    if not result["ok"]:
        return result, None
    relative = os.path.relpath(library, scratch)
    with open(os.path.join(scratch, "entry.json"), "w", encoding="utf-8") as f:
        json.dump({"library": relative, "log": text, "tools": tools}, f)
    try:
        if os.path.exists(entry):
            shutil.rmtree(entry)  # a stale entry (sources differ under the same key)
        os.rename(scratch, entry)
    except OSError:  # the cache could not take it: load from a copy outside it
        entry = tempfile.mkdtemp(prefix="binding-")
        shutil.copytree(scratch, entry, dirs_exist_ok=True)
    return result, Built(os.path.join(entry, relative), name, binding, checked.symbol,
                         checked.entry, dps)


def load(built):
    """(the entry as a Python callable, None), or (None, why it cannot be loaded)."""
    try:
        if built.binding == "tvm-ffi":
            import tvm_ffi  # before the library: it resolves tvm_ffi's symbols
            module = tvm_ffi.load_module(built.library)
        else:
            import torch  # noqa: F401 - the extension links against it
            spec = importlib.util.spec_from_file_location(built.name, built.library)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - a library that cannot be loaded, or its constructors
        return None, f"loading the compiled module failed: {type(e).__name__}: {e}"
    try:
        function = getattr(module, built.symbol)
    except AttributeError:
        how = ("TVM_FFI_DLL_EXPORT_TYPED_FUNC(" + built.symbol + ", ...)"
               if built.binding == "tvm-ffi"
               else "m.def(\"" + built.symbol + "\", ...) in PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)")
        return None, (f"the compiled module does not export '{built.symbol}' (entry_point "
                      f"{built.entry!r}); export it with {how}")
    return function, None


class Kernel:
    """The entry called as FlashInfer-Bench calls it: positional, the inputs in definition
    order (scalars as Python numbers), then the outputs when destination-passing; otherwise the
    entry returns them. `to_arg` converts an array for the binding; `from_result` converts a
    returned tensor to the memory's kind; `check` checks a returned output."""

    graph_capturable = False

    def __init__(self, function, spec, dps, scalars, to_arg, from_result, check):
        self._function, self._spec, self._dps = function, spec, dps
        self._scalars = scalars  # per input: whether it is a scalar
        self._to_arg, self._from_result, self._check = to_arg, from_result, check

    def bind(self, inputs, outputs):
        args = [v.item() if scalar else self._to_arg(v)
                for scalar, v in zip(self._scalars, inputs)]
        if self._dps:
            args += [self._to_arg(o) for o in outputs]
        function, dps = self._function, self._dps

        def call():
            try:
                returned = function(*args)
            except Exception as e:  # noqa: BLE001 - the candidate's failure
                raise CandidateError("runtime_error",
                                     f"the candidate raised {type(e).__name__}: {e}") from None
            return None if dps else returned
        return call

    def results(self, raw, outputs, shapes):
        if self._dps:
            return outputs
        from ..common import pyloader
        values = [self._from_result(v) for v in
                  pyloader.returned_values(raw, self._spec.outputs, "the candidate")]
        for value, t, shape in zip(values, self._spec.outputs, shapes):
            self._check(value, t, shape)
        return values
