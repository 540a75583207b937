"""The candidate's own process (backend c on Linux): the harness never runs candidate code.

The harness forks this worker at its very start, before it reads the request, so the worker's
memory holds nothing of the evaluation: no seed, no reference, no protocol key. The worker keeps
only its end of a socket pair and stderr (fd 1 points at stderr too); it never has the protocol
descriptor or stdin. What the harness gives it, over the socket:

  load   the library, the entry symbol and its argument kinds. The worker confines itself
         (sandbox.py: Landlock, seccomp) and then loads the library, which runs the
         candidate's constructors;
  map    a shared-memory arena (a memfd passed with SCM_RIGHTS) holding one trial's inputs or
         outputs, or the timing stage's buffers; the worker maps it at a fresh address;
  call   the arguments of one call (arrays as arena and offset, scalars by value); the worker
         calls the entry and answers with the call's time on its own clock;
  ping   an empty call, answered at once: the round trip's cost, for the timing cross-check.

The harness keeps everything else: it draws the inputs and copies them into the arena. After
each answer the worker stops itself (SIGSTOP: every thread at once) and the harness waits for
that stop (waitpid) before it reads the answer, copies the outputs, checks the inputs and runs
the reference; it continues the worker (SIGCONT) only to send the next message. So a thread the
candidate left running works untimed only for the few microseconds between the call's return and
the stop, and never while the reference is timed or anything is checked. Replies are untrusted: bounded, strict JSON, checked field by field; anything else
kills the worker and fails the workload. The worker's clock can be forged by the candidate, so
the harness also reports its own round trip of every call (worker_outer_ns) and a calibration of
empty round trips (worker_ping_ns); ksearch flags a candidate whose reported time falls far below
what the round trips show.
"""

import ctypes
import json
import mmap
import os
import resource
import signal
import socket
import sys
import time

from . import sandbox
from .errors import CandidateError

_MAX_MESSAGE = 1 << 16
_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "bool": ctypes.c_bool, "int16": ctypes.c_int16,
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "pointer": ctypes.c_void_p,
}
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PROT_READ, _PROT_WRITE = 1, 2
_MAP_SHARED = 0x01  # no MAP_POPULATE: pages fault in during untimed calls (trials, warm-ups)
_MAP_FAILED = ctypes.c_void_p(-1).value
_ARENA_ALIGN = 64

_SIGNALS = {
    signal.SIGSEGV: "SIGSEGV, invalid memory access",
    signal.SIGBUS: "SIGBUS, misaligned or unmapped memory",
    signal.SIGFPE: "SIGFPE, arithmetic fault",
    signal.SIGILL: "SIGILL, illegal instruction",
    signal.SIGABRT: "SIGABRT, aborted",
    # SIGKILL: told apart in _sigkill_cause (the out-of-memory killer, the CPU-time limit, or
    # the candidate's own code).
    signal.SIGXCPU: "SIGXCPU, CPU-time limit",
    signal.SIGXFSZ: "SIGXFSZ, file size limit",
    signal.SIGSYS: "SIGSYS, a system call the sandbox forbids: new processes, sockets, "
                   "writing files, reaching other processes (signals, limits, priorities, "
                   "ptrace), namespaces, the machine's settings",
}

_spawned = None
# The worker's exit code when its socket fails (the candidate closed or reused the descriptor).
CHANNEL_LOST = 75


def supported():
    return (sys.platform.startswith("linux") and hasattr(os, "memfd_create")
            and hasattr(socket, "SOCK_SEQPACKET") and hasattr(socket, "send_fds"))


def spawn():
    """Fork the worker (parent side: a Worker), or None where this platform has no worker."""
    global _spawned
    if not supported() or os.environ.get("KSEARCH_IN_PROCESS") == "1":
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            ours.close()
            _serve(theirs, parent)
            code = 0
        except BaseException:  # noqa: BLE001 - the worker never returns into the harness's code
            code = 71
        finally:
            os._exit(code)
    theirs.close()
    _spawned = Worker(pid, ours)
    return _spawned


def take():
    """The worker forked at start-up, for the backend that runs candidates in it."""
    return _spawned


# ---- the harness's side ---------------------------------------------------------------------

class Worker:
    def __init__(self, pid, sock):
        self.pid, self._sock = pid, sock
        self.dead = None  # the reason, once the worker is gone or was killed
        self.status = "runtime_error"  # of that death (timeout for the CPU-time limit)
        self.sandbox = None  # what the worker applied, from its answer to `load`
        self.channel = None  # for where a death happened (the last progress line)
        self._stopped = False
        self._next_id = 0
        self._unmap = []  # arenas the harness let go, unmapped with the next message
        self._seq = 0
        self._oom_kills = _oom_kills()  # the machine's count when the worker was started

    # -- life --

    def _where(self):
        p = getattr(self.channel, "last_progress", None)
        if not p:
            return ""
        stage, workload, trial = p
        text = f" during {stage}" + (f" of workload {workload}" if workload is not None else "")
        return text + (f", trial {trial}" if trial is not None else "")

    def _fail(self, reason, status="runtime_error"):
        """Record the worker's end (killing it if needed) and raise it as the candidate's."""
        if self.dead is None:
            self.dead, self.status = reason, status
            self.close()
        raise CandidateError(self.status, self.dead)

    def _kill(self):
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None

    def close(self):
        """Kill and reap the worker (before `done`, and when it misbehaves)."""
        self._kill()
        try:
            self._sock.close()
        except OSError:
            pass

    def _resume(self):
        if self._stopped and self.pid is not None:
            os.kill(self.pid, signal.SIGCONT)
            self._stopped = False

    def _wait_stopped(self):
        """Wait until the worker has stopped itself after answering (every thread of it)."""
        while True:
            try:
                pid, raw, usage = os.wait4(self.pid, os.WUNTRACED)
            except InterruptedError:
                continue
            except ChildProcessError:
                self.pid = None
                return self._fail(f"the candidate's process disappeared{self._where()}")
            if pid and os.WIFSTOPPED(raw):
                if os.WSTOPSIG(raw) == signal.SIGSTOP:
                    self._stopped = True
                    return
                # Stopped by another signal (SIGTSTP, SIGTTIN...): not the worker's own stop.
                os.kill(self.pid, signal.SIGCONT)
                continue
            if pid:
                return self._died(raw, usage)

    def _died(self, raw, usage=None):
        self.pid = None
        where = self._where()
        if os.WIFSIGNALED(raw):
            sig = os.WTERMSIG(raw)
            name = _SIGNALS.get(sig) or _signal_name(sig)
            kind = "timeout" if sig == signal.SIGXCPU else "runtime_error"
            if sig == signal.SIGKILL:
                name, kind = self._sigkill_cause(usage)
            return self._fail(f"the candidate's process was killed by signal {sig} ({name})"
                              f"{where}", kind)
        code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else -1
        if code == CHANNEL_LOST:
            return self._fail(f"the candidate's process lost its channel to the harness{where} "
                              f"(did the candidate close or misuse its file descriptors?)")
        return self._fail(f"the candidate's process exited with code {code}{where} (a kernel "
                          f"returns; it does not end its process)")

    def _sigkill_cause(self, usage):
        """Who sent the SIGKILL that ended the worker: not the harness (it records its own kills
        before sending them), so the kernel's out-of-memory killer (the machine's count of its
        kills went up), the CPU-time limit (the worker used it up), or the candidate's code,
        which may signal its own process and nothing else. (the name, the status)"""
        now = _oom_kills()
        if now is not None and self._oom_kills is not None and now > self._oom_kills:
            return "SIGKILL, by the kernel's out-of-memory killer", "runtime_error"
        limit = resource.getrlimit(resource.RLIMIT_CPU)[1]
        used = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
        if limit != resource.RLIM_INFINITY and used >= limit - 0.5:
            return f"SIGKILL, the CPU-time limit of {limit} s", "timeout"
        if now is None:
            return ("SIGKILL, the candidate's code or the out-of-memory killer (this machine "
                    "does not count the killer's kills)"), "runtime_error"
        return ("SIGKILL, sent by the candidate's code to its own process (not the "
                "out-of-memory killer, not a limit)"), "runtime_error"

    # -- messages --

    def _exchange(self, message, fds=()):
        """Send one message and wait until the worker has answered and stopped itself;
        (the answer, the round trip in ns from sending to the stop)."""
        if self.dead is not None:
            raise CandidateError(self.status, f"not run: {self.dead}")
        if self._unmap:
            message = {**message, "unmap": self._unmap}
            self._unmap = []
        data = json.dumps(message, separators=(",", ":")).encode()
        self._resume()
        t0 = time.perf_counter_ns()
        try:
            if fds:
                socket.send_fds(self._sock, [data], list(fds))
            else:
                self._sock.send(data)
        except OSError:
            pass  # the worker is gone or closed its end: waitpid says how
        self._wait_stopped()
        t1 = time.perf_counter_ns()
        try:
            # The answer was sent before the stop; a stop without one is a protocol violation.
            reply = self._sock.recv(_MAX_MESSAGE + 1, socket.MSG_DONTWAIT)
        except (BlockingIOError, OSError):
            reply = b""
        try:
            if len(reply) > _MAX_MESSAGE:
                raise ValueError("too long")
            answer = json.loads(reply.decode("utf-8"))
            if not isinstance(answer, dict) or answer.get("seq") != self._seq:
                raise ValueError("out of sequence")
        except (ValueError, UnicodeDecodeError):
            shown = reply[:80].decode("utf-8", "replace")
            self._fail(f"the candidate's process broke the worker protocol (an answer the "
                       f"harness's worker did not write: {shown!r}){self._where()}; it was "
                       f"killed")
        self._seq += 1
        return answer, t1 - t0

    def load(self, library, symbol, kinds, build_dir, missing_symbol):
        """Sandbox the worker and load the library; CandidateError when that fails
        (`missing_symbol`: the reason when the library lacks the entry)."""
        _not_dumpable()
        answer, _ = self._exchange({"op": "load", "seq": self._seq, "library": library,
                                    "symbol": symbol, "kinds": kinds, "build_dir": build_dir})
        if isinstance(answer.get("sandbox"), dict):
            self.sandbox = answer["sandbox"]
        if answer.get("missing_symbol") is True:
            raise CandidateError("runtime_error", missing_symbol)
        if answer.get("ok") is not True:
            error = answer.get("error")
            raise CandidateError("runtime_error", error if isinstance(error, str) else
                                 "loading the compiled candidate failed")

    def arena(self, nbytes):
        """A shared arena of `nbytes`: (id, the harness's mmap of it), mapped by the worker."""
        fd = os.memfd_create("ksearch-arena", os.MFD_CLOEXEC)
        try:
            size = max(nbytes, 1)
            os.ftruncate(fd, size)
            view = mmap.mmap(fd, size)
            ident = self._next_id
            self._next_id += 1
            answer, _ = self._exchange({"op": "map", "seq": self._seq, "id": ident,
                                        "size": size}, fds=[fd])
        finally:
            os.close(fd)
        if answer.get("ok") is not True:
            raise CandidateError("runtime_error", (
                f"the candidate's process could not map {size} bytes of shared memory for its "
                f"arrays{self._where()}: {answer.get('error')}; it shares the evaluation's "
                f"memory limit, so most likely its own allocations used it up"))
        import weakref
        weakref.finalize(view, self._unmap.append, ident)
        return ident, view

    def call(self, args):
        """Run one call; (the worker's time of it, the harness's round trip), in ns."""
        answer, outer = self._exchange({"op": "call", "seq": self._seq, "args": args})
        ns = answer.get("ns")
        if answer.get("ok") is not True or not isinstance(ns, int) or not 0 <= ns <= outer:
            self._fail(f"the candidate's process broke the worker protocol (its answer to a "
                       f"call: {json.dumps(answer)[:120]}, round trip {outer} ns)"
                       f"{self._where()}; it was killed")
        return ns, outer

    def ping(self):
        """The round trip of an empty call, in ns (the worker stays stopped after it)."""
        _, outer = self._exchange({"op": "ping", "seq": self._seq})
        return outer


def _not_dumpable():
    """Keep other processes of this user out of the harness's /proc files and memory (the
    protocol key, the pools, the reference): a non-dumpable process can be ptraced, and its
    /proc/PID/mem and /proc/PID/fd opened, only with CAP_SYS_PTRACE."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _oom_kills():
    """How many processes the kernel's out-of-memory killer has killed since boot (the
    `oom_kill` line of /proc/vmstat, Linux 4.13+), or None where it is not counted."""
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _signal_name(sig):
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "signal"


# ---- the worker's side ------------------------------------------------------------------------

def _serve(sock, parent):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return  # the harness is already gone
    # Only the socket and stderr stay: no stdin, no protocol descriptor, nothing else inherited.
    keep = sock.fileno()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    import faulthandler
    faulthandler.enable(file=sys.stderr)
    mapper = libc.mmap
    mapper.restype = ctypes.c_void_p
    mapper.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
    unmapper = libc.munmap
    unmapper.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    arenas = {}  # id -> (address, size)
    entry = None
    clock = time.perf_counter_ns
    pid = os.getpid()
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 4)
        except OSError:
            os._exit(CHANNEL_LOST)
        if not data:
            return
        message = json.loads(data)
        seq = message.get("seq")
        for ident in message.get("unmap", ()):
            address, size = arenas.pop(ident, (None, 0))
            if address:
                unmapper(address, size)
        op = message["op"]
        if op == "call":
            args = [ctypes.c_void_p(arenas[a[1]][0] + a[2]) if a[0] == "array"
                    else _CTYPES[a[0]](a[1]) for a in message["args"]]
            t0 = clock()
            entry(*args)
            t1 = clock()
            answer = {"seq": seq, "ok": True, "ns": t1 - t0}
            # From here to the stop (formatting and sending the answer, a few microseconds),
            # threads the candidate left running still run: the only untimed window.
        elif op == "ping":
            answer = {"seq": seq, "ok": True}
        elif op == "map":
            size = int(message["size"])
            address = mapper(None, size, _PROT_READ | _PROT_WRITE, _MAP_SHARED,
                             fds[0], 0)
            os.close(fds[0])
            if address is None or address == _MAP_FAILED:
                answer = {"seq": seq, "ok": False,
                          "error": os.strerror(ctypes.get_errno())}
            else:
                arenas[message["id"]] = (address, size)
                answer = {"seq": seq, "ok": True}
        elif op == "load":
            entry, answer = _load(message, parent)
            answer["seq"] = seq
        else:
            answer = {"seq": seq, "ok": False, "error": f"unknown op {op!r}"}
        try:
            sock.send(json.dumps(answer, separators=(",", ":")).encode())
        except OSError:
            os._exit(CHANNEL_LOST)
        # Stop every thread of this process at once: nothing of the candidate runs while the
        # harness copies outputs, checks inputs or runs the reference, until it continues us.
        os.kill(pid, signal.SIGSTOP)


def _load(message, parent):
    applied, library = sandbox.confine(message["build_dir"], message["library"], parent)
    symbol = message["symbol"]

    def named(e):  # a private copy's /proc/self/fd/N, named as the library it copies
        return str(e).replace(library, message["library"])
    try:
        handle = ctypes.CDLL(library)  # runs the candidate's constructors
    except OSError as e:
        return None, {"ok": False, "sandbox": applied,
                      "error": f"loading the compiled candidate failed: {named(e)}"}
    except Exception as e:  # noqa: BLE001 - e.g. MemoryError after its constructors ran
        return None, {"ok": False, "sandbox": applied,
                      "error": f"loading the compiled candidate failed: {type(e).__name__}: "
                               f"{named(e)}"}
    finally:
        if library != message["library"]:
            try:
                os.close(int(library.rsplit("/", 1)[1]))  # mapped now; the copy stays mapped
            except (OSError, ValueError):
                pass
    try:
        entry = getattr(handle, symbol)
    except AttributeError:
        return None, {"ok": False, "sandbox": applied, "missing_symbol": True, "error": None}
    entry.argtypes = [_CTYPES[k] for k in message["kinds"]]
    entry.restype = None
    return entry, {"ok": True, "sandbox": applied}


# ---- arrays in arenas -------------------------------------------------------------------------

def layout(arrays_bytes):
    """Offsets of arrays of these sizes in one arena, each aligned; (offsets, total bytes)."""
    offsets, at = [], 0
    for n in arrays_bytes:
        offsets.append(at)
        at += -(-max(n, 1) // _ARENA_ALIGN) * _ARENA_ALIGN
    return offsets, at
