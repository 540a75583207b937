"""nvcc: finding it, compiling a candidate to a shared library, and the build cache.

Commands (docs/protocol.md, Backend cuda), one compile per source, then one link:
    nvcc -O3 TARGET -Xcompiler -fPIC -Xptxas -v -lineinfo EXTRA -c -o ../objects/N.o FILE.cu
    nvcc TARGET -Xcompiler -fPIC -shared -Xlinker -z,defs EXTRA -o candidate.so ../objects/*.o
TARGET is `-arch=sm_XY` for a plain arch, and for an arch-specific one (sm_90a, sm_100a:
`target_flags`) `-gencode arch=compute_XYa,code=[sm_XYa,compute_XYa]`: nvcc 13 expands
`-arch=sm_90a` to code for sm_90a *and* portable compute_90 PTX, and the portable PTX cannot hold
Hopper's wgmma or setmaxnreg, so every kernel that uses them failed to build.
`-Xptxas -v` makes ptxas report each kernel's registers, spills and shared memory (ptxas.py);
`-lineinfo` lets compute-sanitizer name source lines and changes no generated code. The CUDA
runtime is linked statically (nvcc's default), so the library needs no libcudart at run time.
Between the two, the objects' imports are checked (imports.py): a candidate that calls what a
kernel never needs (dlsym, the interpreter, threads, streams) is refused before it is linked.

Cache: a successful build is stored under CACHE/KEY/ (candidate.so and build.json with the
command, log, resource report and the library's SHA-256), KEY being the SHA-256 of the
sources, the command's flags, nvcc's full version text and the arch. A hit copies the library
into the private build folder and reports the stored log and resources, with `cached: true`.
Failed builds are not cached. Entries are written to a temporary folder and renamed into place,
so concurrent evaluations never see half an entry.
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ..common import sources
from . import imports, ptxas

FLAGS = ["-O3", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-lineinfo"]
# Beside the sources' folder, not in it: a candidate may name a file `objects`.
OBJECTS = os.path.join("..", "objects")
CACHE_FORMAT = 3  # part of the key: bump when what a build produces changes


def find():
    """The nvcc to use: $KSEARCH_NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda,
    then the pip package nvidia-cuda-nvcc in this interpreter's site-packages."""
    named = os.environ.get("KSEARCH_NVCC")
    if named:
        return named
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        return "/usr/local/cuda/bin/nvcc"
    return from_pip(sys.path)


def from_pip(paths):
    """nvcc from the nvidia-cuda-nvcc wheel (nvidia/cu13/bin or nvidia/cuda_nvcc/bin)."""
    for base in paths:
        for found in sorted(glob.glob(os.path.join(base or ".", "nvidia", "*", "bin", "nvcc"))):
            if os.access(found, os.X_OK):
                return found
    return None


def version(nvcc):
    """nvcc --version's full text (for the cache key) and its release line (for people)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    text = out.stdout.decode("utf-8", "replace").strip()
    release = next((line.strip() for line in text.splitlines() if "release" in line), None)
    return text, release or (text.splitlines()[-1] if text else None)


def target_flags(arch):
    """nvcc's flags for the code of `arch`: the arch-specific targets (a trailing `a` or `f`,
    sm_90a, sm_100a) name their virtual arch too, so no portable PTX is generated beside them."""
    if arch[-1:] in ("a", "f") and arch.startswith("sm_"):
        virtual = "compute_" + arch[len("sm_"):]
        return ["-gencode", f"arch={virtual},code=[{arch},{virtual}]"]
    return [f"-arch={arch}"]


def compile_command(nvcc, arch, extra, cu_file, obj):
    return [nvcc] + FLAGS[:1] + target_flags(arch) + FLAGS[1:] + extra + ["-c", "-o", obj, cu_file]


def link_command(nvcc, arch, extra, objects):
    # -z defs: every symbol the library uses must come from what it is linked with (the C and
    # C++ runtimes, the static CUDA runtime, -l flags), not from whatever process loads it.
    return [nvcc] + target_flags(arch) + ["-Xcompiler", "-fPIC", "-shared", "-Xlinker", "-z,defs"] + \
        extra + ["-o", sources.LIBRARY] + objects


def commands(nvcc, arch, extra, cu_files):
    """[(source, object, compile command)] and the link command."""
    steps = [(cu, os.path.join(OBJECTS, f"{i}.o"),) for i, cu in enumerate(cu_files)]
    steps = [(cu, obj, compile_command(nvcc, arch, extra, cu, obj)) for cu, obj in steps]
    return steps, link_command(nvcc, arch, extra, [obj for _, obj, _ in steps])


def shown(steps, link):
    """The whole build as one argv-like list for the record: the commands joined by `&&`."""
    out = []
    for _, _, cmd in steps:
        out += cmd + ["&&"]
    return out + link


def cache_key(checked, flags, version_text, arch):
    """SHA-256 over everything that decides the library: sources, flags, compiler, arch."""
    h = hashlib.sha256()
    record = {"format": CACHE_FORMAT, "arch": arch, "flags": flags, "nvcc": version_text,
              "imports": imports.RULES_DIGEST if imports.enabled() else "unchecked",
              "sources": [[p, c] for p, c in checked.sources]}
    h.update(json.dumps(record, sort_keys=True).encode("utf-8"))
    return h.hexdigest()


def build(checked, workdir, limits, arch, cache_dir):
    """Compile `checked` (a sources.Candidate) into workdir/build/candidate.so.

    Returns the `compile` event's fields plus `library` (the .so's path when ok).
    """
    nvcc = find()
    if nvcc is None or shutil.which(nvcc) is None:
        raise FileNotFoundError(nvcc or "nvcc")
    version_text, release = version(nvcc)
    log_bytes = int(limits.get("log_bytes", 65536))
    folder = os.path.join(workdir, "build")
    os.makedirs(folder, exist_ok=True)
    sources.write(checked.sources, folder)
    cu_files = [p for p, _ in checked.sources if p.endswith(".cu")]
    steps, link = commands(nvcc, arch, checked.extra_flags, cu_files)
    cmd = shown(steps, link)
    tools = imports.find_tools() if imports.enabled() else None
    library = os.path.join(folder, sources.LIBRARY)
    start = time.perf_counter()
    flags = [a for a in cmd if a != nvcc]  # where nvcc lives does not change the library
    key = cache_key(checked, flags, version_text, arch) if version_text else None
    entry = os.path.join(cache_dir, key[:2], key) if cache_dir and key else None
    hit = _from_cache(entry, library)
    if hit is not None:
        return {"ok": True, "seconds": time.perf_counter() - start, "command": cmd,
                "log": hit.get("log", ""), "resources": hit.get("resources", []),
                "cached": True, "arch": arch, "compiler": release, "library": library,
                "import_check": "on" if tools else "off"}
    os.makedirs(os.path.normpath(os.path.join(folder, OBJECTS)), exist_ok=True)
    limit = float(limits.get("compile_timeout_s", 30))
    deadline = start + limit
    logs, full_logs, refused = [], [], None
    ok = True
    for source, obj, compile_cmd in steps:
        ok, text, full = _step(compile_cmd, folder, workdir, deadline, limit, log_bytes,
                               os.path.join(folder, obj))
        logs.append(text)
        full_logs.append(full)
        if not ok:
            break
    if ok and tools is not None:
        found = [(source, imports.check_object(tools, os.path.join(folder, obj)))
                 for source, obj, _ in steps]
        found = [(source, v) for source, v in found if v]
        if found:
            ok, refused = False, imports.describe(found)
            logs.append(f"refused before linking: {refused}")
    if ok:
        ok, text, full = _step(link, folder, workdir, deadline, limit, log_bytes, library)
        logs.append(text)
        full_logs.append(full)
    seconds = time.perf_counter() - start
    text = "\n".join(t for t in logs if t)
    resources = ptxas.parse("\n".join(full_logs)) if ok else []
    if ok and entry:
        _store(entry, library, {"command": cmd, "log": text, "resources": resources,
                                "seconds": seconds, "nvcc": release, "arch": arch})
    result = {"ok": ok, "seconds": seconds, "command": cmd, "log": text,
              "resources": resources, "cached": False, "arch": arch, "compiler": release,
              "library": library if ok else None, "import_check": "on" if tools else "off"}
    if refused:
        result["refused"] = refused
    return result


def _step(cmd, folder, workdir, deadline, limit, log_bytes, output):
    """Run one nvcc command within what is left of the build's `limit` seconds:
    (ok, bounded log, full log)."""
    log_path = os.path.join(workdir, "compile.log")
    timeout = max(deadline - time.perf_counter(), 0.001)
    rc, timed_out = sources.compile_in_child(cmd, folder, log_path, timeout, "nvcc")
    ok, text = sources.outcome_text(sources.bounded(log_path, log_bytes), rc, timed_out,
                                    limit, output)
    return ok, text, _read(log_path)


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _from_cache(entry, library):
    """The stored build.json after copying the stored library to `library`, or None.

    The library's SHA-256 must match the one recorded: a damaged entry is rebuilt, not loaded.
    """
    if entry is None:
        return None
    try:
        with open(os.path.join(entry, "build.json"), encoding="utf-8") as f:
            stored = json.load(f)
        cached_library = os.path.join(entry, sources.LIBRARY)
        if not isinstance(stored, dict) or _sha256(cached_library) != stored.get("sha256"):
            return None
        shutil.copyfile(cached_library, library)
        os.chmod(library, 0o755)
    except (OSError, ValueError):
        return None
    return stored


def _store(entry, library, record):
    """Write the entry atomically (rename of a complete folder); failures only cost the cache."""
    parent = os.path.dirname(entry)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
        shutil.copyfile(library, os.path.join(staging, sources.LIBRARY))
        record = dict(record, sha256=_sha256(library))
        with open(os.path.join(staging, "build.json"), "w", encoding="utf-8") as f:
            json.dump(record, f)
        try:
            os.rename(staging, entry)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another evaluation stored it first
    except OSError:
        pass
