# The warm harness server ("zygote"), run by ksearch as `python3 -c <this text> MODULE...`
# (crates/eval/src/warm.rs, docs/protocol.md "Warm evaluations"). Standard library only, plus
# the modules named on the command line, imported once so that each evaluation's forked child
# finds them loaded. It imports no ksearch_harness module (each evaluation brings its own fresh
# copy) and initialises no device (CUDA state does not survive a fork).
#
# Control channel: requests as JSON lines on fd 0, replies as JSON lines on fd 1. One
# evaluation at a time: {"pid": N} once the child exists, then {"exit": {"code"|"signal": N}}
# after the child and every process it left behind are gone.
import ctypes
import importlib
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
CAP_SYS_PTRACE = 19
F_SETPIPE_SZ = 1031

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option, value):
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0))


def _drop_ptrace():
    """Take CAP_SYS_PTRACE out of the child's bounding, effective, permitted and inheritable
    sets: without it, root cannot ptrace the non-dumpable server or open its /proc/PID/mem."""
    _prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE)  # refused without CAP_SETPCAP: nothing to drop

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)
    data = (Data * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        return
    for d in data[:1]:
        mask = ~(1 << CAP_SYS_PTRACE) & 0xFFFFFFFF
        d.effective &= mask
        d.permitted &= mask
        d.inheritable &= mask
    if _libc.capset(ctypes.byref(header), data) != 0:
        os.write(2, b"ksearch warm server: cannot drop CAP_SYS_PTRACE\n")
        os._exit(112)


def _children():
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def _sweep():
    """Kill and reap every remaining child (the server is a subreaper: whatever an evaluation
    left behind, double-forked or not, is re-parented here), until none is left."""
    for _ in range(100):
        strays = _children()
        if not strays:
            return
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _child(req, server, base_path, private):
    try:
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:
            os._exit(111)
        _drop_ptrace()
        # The server is non-dumpable (see main); the evaluation is an ordinary process again.
        _prctl(PR_SET_DUMPABLE, 1)
        import resource
        for name, value in req["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (value, value))
        data = req["stdin"].encode("utf-8")
        r, w = os.pipe()
        try:
            fcntl_mod = importlib.import_module("fcntl")
            fcntl_mod.fcntl(w, getattr(fcntl_mod, "F_SETPIPE_SZ", F_SETPIPE_SZ),
                            max(len(data) + 1, 65536))
        except OSError:
            pass
        if len(data) <= 65536 or _pipe_fits(w, len(data)):
            os.write(w, data) if data else None
            os.close(w)
            stdin = r
        else:
            # Larger than any pipe we may have: an unlinked file, gone once read.
            os.close(r)
            os.close(w)
            path = os.path.join(req["workdir"], ".request")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, data)
            os.lseek(fd, 0, 0)
            os.unlink(path)
            stdin = fd
        out = os.open(req["stdout"], os.O_WRONLY)
        err = os.open(req["stderr"], os.O_WRONLY)
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # The server's control pipes and its /dev/null go; descriptors the pre-imported modules
        # opened stay, as they would in a fresh process that imported them.
        for fd in (stdin, out, err, *private):
            if fd > 2:
                os.close(fd)
        os.chdir(req["workdir"])
        os.environ.clear()
        os.environ.update(req["env"])
        # What a fresh interpreter reads from PYTHONDONTWRITEBYTECODE at its start (the server
        # itself may write the bytecode cache; an evaluation never does).
        sys.dont_write_bytecode = bool(req["env"].get("PYTHONDONTWRITEBYTECODE"))
        import tempfile
        tempfile.tempdir = None
        sys.path[:] = [req["workdir"], req["harness"]] + base_path
        sys.argv[:] = ["-m"]  # as `python3 -m` has it until runpy names the module's file
        import runpy
        runpy.run_module("ksearch_harness", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child must never return into the server loop
        import traceback
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)


def _pipe_fits(w, size):
    try:
        return importlib.import_module("fcntl").fcntl(w, 1032) > size  # F_GETPIPE_SZ
    except OSError:
        return False


def _choose_bytecode_cache():
    """harness/ksearch_harness/bytecode.py's `choose` (kept equal by a test)."""
    cache = os.environ.get("KSEARCH_BYTECODE_CACHE")
    if not cache or sys.pycache_prefix is not None:
        return None
    import importlib.util
    sources = []
    for name in ("torch", "numpy"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and origin.endswith(".py"):
            sources.append(origin)
    if sources and not any(os.path.exists(importlib.util.cache_from_source(s)) for s in sources):
        sys.pycache_prefix = cache
        return cache
    return None


def main():
    server = os.getpid()
    # Die with ksearch; let no sibling (or a child that got root's caps back) trace or write us.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_DUMPABLE, 0)
    control_in = os.fdopen(os.dup(0), "rb")
    control_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    # The server, which runs no candidate or harness code, is what writes ksearch's bytecode
    # cache, when it is used (harness/ksearch_harness/bytecode.py; the same decision, copied
    # here because the server loads no harness module). Its children read it and write nothing.
    if _choose_bytecode_cache() is not None:
        sys.dont_write_bytecode = False
    for module in sys.argv[1:]:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the child imports it again and reports the failure
            pass
    base_path = [p for p in sys.path if p not in ("", ".")]
    os.write(control_out, b'{"ready":true}\n')
    for line in control_in:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            control_in.close()
            _child(req, server, base_path, (control_out, devnull))
        os.write(control_out, json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        _sweep()
        if os.WIFSIGNALED(status):
            exit = {"signal": os.WTERMSIG(status)}
        else:
            exit = {"code": os.WEXITSTATUS(status)}
        os.write(control_out, json.dumps({"exit": exit}).encode() + b"\n")


main()
