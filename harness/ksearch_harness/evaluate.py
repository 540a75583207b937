"""The two modes: `evaluate` (compile, check, time a candidate) and `check_task` (reference only).

evaluate, in this order (docs/protocol.md): check every workload's size; vet the reference on a
draw of workload 0 that no candidate gets (stage `reference`); compile; load the candidate
(stage `load`: its code runs from here on); then per workload the correctness trials and the
timing pairs.

One correctness trial: draw fresh inputs and keep a pristine copy; poison fresh outputs; call
the candidate on its own copy; take its outputs as the call left them; compare its inputs with
the pristine copy; only then run the reference on the pristine copy, which nothing reads after
(its own: the candidate never had it); compare the outputs.

Once the candidate is loaded it shares this process, so an exception that follows (the
reference raising, MemoryError anywhere) fails the workload as the candidate's runtime_error.

Where arrays live is the backend's memory (memory.py for the host, backends/torch_gpu/memory.py
for a CUDA device): on the host, inputs are drawn and outputs compared with NumPy; on a CUDA
device both happen on the device (backends/torch_gpu/inputs.py, compare.py's tensor functions),
by the same rules.

Backend cuda's build (nvcc in child processes, no candidate code) starts before torch is
imported when the device's arch can be read from NVML (or is given), and runs while torch loads,
the CUDA context is created and the reference is vetted; stage `compile` then only waits for
what is left of it (`EarlyBuild`).
"""

import ctypes
import math
import os
import resource
import sys
import tempfile
import threading
import traceback

from . import backends, dtypes
from .compare import Tally
from .definition import Spec
from .errors import CandidateError, ReferenceRaised, TaskError
from .inputs import InputMaker
from .memory import ops_of
from .reference import Reference
from .session import TimingSession, tally as _tally, where as _where

# SeedSequence([seed, 0, 0, VET_STREAM]): the draw the reference is vetted on before loading.
VET_STREAM = 1
_HERE = os.path.dirname(os.path.abspath(__file__))
# The most one copy of a workload's inputs and outputs may take when no address-space limit is
# set (with one, the room left below it is the bound).
MAX_WORKLOAD_BYTES = 64 << 30


class _Context:
    """What every workload of a run shares."""

    def __init__(self, request, spec, backend):
        self.spec = spec
        correctness = request.get("correctness") or {}
        self.trials = int(correctness.get("trials", 3))
        if self.trials < 1:
            raise TaskError("correctness.trials", "trials must be at least 1")
        self.matched_ratio = float(correctness.get("matched_ratio", 1.0))
        self.workloads = request.get("workloads") or []
        # Axes and sizes are checked before anything is drawn, compiled or loaded.
        self.axes = [spec.axes_for(w, i) for i, w in enumerate(self.workloads)]
        self.sizes = [_footprint(spec, axes) for axes in self.axes]
        _check_sizes(self, backend)
        self.reference = Reference((request.get("definition") or {}).get("reference"), spec)
        self.mem = backend.memory(spec, self.reference)
        self.ops = ops_of(self.mem)
        self.maker = InputMaker(spec, correctness, request.get("seed", 0), request.get("task_dir"))
        if getattr(self.mem, "device_native", False):
            self.maker.on_device(self.mem.torch, self.mem.device, self.mem.upload)
        device_inputs = getattr(self.mem, "device_inputs", None)
        if device_inputs is not None and device_inputs(self.maker) is not None:
            self.maker.draw_with(device_inputs(self.maker))
        table = correctness.get("tolerance") or {}
        self.tolerances = {t.name: (*dtypes.tolerance(t.dtype_name, table), t.dtype)
                           for t in spec.outputs}
        self.timing = request.get("timing") or {}
        self.keeper = _Keeper()
        # compute-sanitizer watches the process (docs/protocol.md, Sanitizer): timing is skipped.
        self.sanitizer = backend.sanitizer(request.get("sanitize"))

    def output_shapes(self, axes):
        return [Spec.shape(t, axes) for t in self.spec.outputs]


class _Keeper:
    """Keeps the arrays of a workload's earlier trials alive, so later draws get new addresses.

    The previous workload's arrays are let go only after the next workload's first draw. Only
    the arrays the candidate is given (its inputs and outputs) are held: the pristine copies,
    the reference's inputs and the timing pools are never passed to it, so their addresses
    need not stay taken, and holding them cost a whole copy each per trial (a 7 GiB input
    and output held ~19 copies and ran the H200 out of memory).
    """

    def __init__(self):
        self._held = []

    def hold(self, index, arrays):
        self._held.append((index, arrays))
        self._held = [(i, a) for i, a in self._held if i == index]

    def let_go(self):
        """Drop what is held (before the timing stage: its checks need no address of the
        correctness trials kept taken; a result cached by address is still caught there, as
        every timing call gets contents no trial had and is compared with the reference)."""
        self._held = []


def evaluate(request, channel, environment):
    _settle_malloc()
    backend = backends.get((request.get("device") or {}).get("backend", "c"))
    with tempfile.TemporaryDirectory(prefix="ksearch-") as workdir:
        early = EarlyBuild.start(backend, request, workdir)
        try:
            _evaluate(request, channel, environment, backend, workdir, early)
        finally:
            if early is not None:
                early.wait()  # never leave a compiler writing into a folder being removed


def _evaluate(request, channel, environment, backend, workdir, early):
    backend.before_open(request)  # GPU backends: the CUDA context is made while torch loads
    # GPU backends import torch and claim the device here (a SetupError when they cannot).
    backend.open(request)
    environment["device"] = backend.describe()
    spec = Spec(request.get("definition"))
    spec.set_writable((request.get("correctness") or {}).get("writable_inputs"))
    backend.check_definition(spec)
    spec.require_numpy(bfloat16_as_float32=backend.bfloat16_as_float32)
    ctx = _Context(request, spec, backend)
    if ctx.workloads:
        channel.progress("reference", 0)
        _vet(ctx)
    channel.progress("compile")
    limits = request.get("limits") or {}
    result = early.result(backend) if early is not None else None
    if result is None:
        result = backend.build(request.get("candidate"), workdir, limits)
    environment["compiler"] = backend.compiler
    channel.emit("compile", **result)
    if not result["ok"] or not ctx.workloads:
        return
    # Loading runs the candidate's code (constructors): a crash from here on is its own.
    channel.progress("load", 0)
    try:
        backend.load(spec)
    except CandidateError:
        pass  # every workload reports it
    for index, workload in enumerate(ctx.workloads):
        if ctx.mem.broken:
            # A sticky device error (illegal address, trap) leaves nothing usable.
            record = {"index": index, "uuid": workload.get("uuid"),
                      "status": "runtime_error", "reason": f"not run: {ctx.mem.broken}"}
        else:
            record = _workload(ctx, backend, channel, index, workload)
        channel.emit("workload", **record)
        if request.get("fail_fast") and record["status"] != "passed":
            break


class EarlyBuild:
    """Backend cuda's build started on a thread before the device is opened (nvcc runs in child
    processes and no candidate code runs in ours, so nothing of the order changes for the
    candidate: the reference is still vetted before the candidate is loaded). The arch is the
    request's `candidate.build.arch`, else what NVML says every GPU of the machine is; when
    that turns out not to be the opened device's, `result` says to build again."""

    def __init__(self, backend, candidate, workdir, limits, arch, given):
        self.arch, self.given = arch, given
        self._result = self._error = None
        self._thread = threading.Thread(target=self._run, name="ksearch-early-build",
                                        args=(backend, candidate, workdir, limits, arch),
                                        daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, backend, request, workdir):
        """An EarlyBuild for a backend that `builds_early` (cuda) when the arch is known without
        the device, else None (`KSEARCH_EARLY_BUILD=off` in the environment: never)."""
        if not backend.builds_early or os.environ.get("KSEARCH_EARLY_BUILD") == "off":
            return None
        candidate = request.get("candidate")
        if not isinstance(candidate, dict):
            return None
        given = (candidate.get("build") or {}).get("arch")
        if isinstance(given, str) and given:
            arch = given
        else:
            from .backends.torch_gpu import device as gpu
            arch = gpu.early_arch((request.get("device") or {}).get("name"))
        if not arch:
            return None
        return cls(backend, candidate, workdir, request.get("limits") or {}, arch,
                   bool(isinstance(given, str) and given))

    def _run(self, backend, candidate, workdir, limits, arch):
        try:
            self._result = backend.build(candidate, workdir, limits, arch=arch)
        except BaseException as e:  # noqa: BLE001 - re-raised where the build's result is read
            self._error = e

    def wait(self):
        self._thread.join()

    def result(self, backend):
        """The `compile` event's fields, or None when the arch was not the opened device's (then
        build again); raises what the build raised."""
        self.wait()
        if self._error is not None:
            raise self._error
        if not self.given and self.arch != backend.arch():
            return None
        return self._result


def build(request, channel, environment):
    """Mode `build`: only the compile stage (for backend cuda: each source to an object, the
    import check, the link, ptxas's resource report), with no device, no reference and no
    candidate code run. The arch must come with the request (`candidate.build.arch`): there is
    no device to read it from."""
    backend = backends.get((request.get("device") or {}).get("backend", "c"))
    backend.prepare_build(request)  # what its build reads, without a device
    with tempfile.TemporaryDirectory(prefix="ksearch-") as workdir:
        channel.progress("compile")
        result = backend.build(request.get("candidate"), workdir, request.get("limits") or {})
        environment["compiler"] = backend.compiler
        channel.emit("compile", **result)


def check_task(request, channel, environment):
    _settle_malloc()
    # The reference runs where the request's backend would run it (a torch reference on the GPU).
    backend = backends.get((request.get("device") or {}).get("backend", "c"))
    backend.open(request)
    environment["device"] = backend.describe()
    spec = Spec(request.get("definition"))
    spec.require_numpy(bfloat16_as_float32=backend.bfloat16_as_float32)
    ctx = _Context(request, spec, backend)
    for index, workload in enumerate(ctx.workloads):
        axes = ctx.axes[index]
        shapes = ctx.output_shapes(axes)
        for trial in range(ctx.trials):
            channel.progress("reference", index, trial)
            inputs = ctx.maker.draw(index, workload, trial, axes)
            refs = _run_reference(ctx, inputs, shapes, _where(index, workload, trial))
            ctx.ops.scrub(refs)


# glibc mallopt parameters and the values the harness fixes (docs/protocol.md, Details fixed).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20


def _settle_malloc():
    """Fix glibc's malloc thresholds instead of letting them adapt to the allocation history.

    By default glibc raises its mmap threshold as large blocks are freed and gives the top of
    the heap back to the system beyond twice that; whether a reference's temporaries are served
    from reused heap memory or from fresh, page-faulting memory then depends on what the harness
    allocated before, and the reference's timing with it (5x for a small softmax). Fixed: blocks
    under 32 MiB come from the heap, and up to 256 MiB of free heap top is kept, for the
    reference and the candidate alike. No-op where the C library has no mallopt.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def _vet(ctx):
    """Run the reference and the degenerate guard on workload 0 before any candidate code runs.

    The inputs are drawn like trial 0's but from their own seed, so no reference result for
    inputs a candidate will get exists before the candidate has been called on them.
    """
    workload, axes = ctx.workloads[0], ctx.axes[0]
    inputs = ctx.maker.draw(0, workload, 0, axes, stream=VET_STREAM)
    where = f"{_where(0, workload, None)}, checked before the candidate is loaded"
    refs = _run_reference(ctx, inputs, ctx.output_shapes(axes), where)
    ctx.ops.scrub(refs)


def _workload(ctx, backend, channel, index, workload):
    """The `workload` event's fields; exceptions after the load count against the candidate."""
    base = {"index": index, "uuid": workload.get("uuid"), "status": "passed", "reason": None}
    phase = ["the workload's set-up"]  # where we are, for the reason of a runtime_error
    try:
        return _check_and_time(ctx, backend, channel, index, workload, dict(base), phase)
    except CandidateError as e:
        return {**base, "status": e.status, "reason": e.reason}
    except ReferenceRaised as e:
        return {**base, "status": "runtime_error",
                "reason": _blame_reference(ctx, index, phase[0], e)}
    except TaskError:
        raise  # the request itself (axes, input descriptors) or a degenerate reference
    except Exception as e:  # noqa: BLE001 - MemoryError and anything else after the candidate ran
        try:
            traceback.print_exc(file=sys.stderr)
        except Exception:  # noqa: BLE001
            pass
        return {**base, "status": "runtime_error",
                "reason": _blame_harness(ctx, index, phase[0], e)}


def _check_and_time(ctx, backend, channel, index, workload, record, phase):
    spec = ctx.spec
    mem = ctx.mem
    axes = ctx.axes[index]
    shapes = ctx.output_shapes(axes)
    kernel = backend.prepare(spec, axes)

    tally = Tally([t.name for t in spec.outputs])
    total = ctx.trials * sum(math.prod(s) for s in shapes)
    for trial in range(ctx.trials):
        phase[0] = f"correctness trial {trial}"
        channel.progress("correctness", index, trial)
        pristine = ctx.maker.draw(index, workload, trial, axes)
        mine = mem.inputs(pristine)
        outputs = mem.outputs(shapes, spec.outputs)
        ctx.keeper.hold(index, (mine, outputs))  # what the candidate sees (see _Keeper)
        raw = mem.run(kernel.bind(mine, outputs))
        if ctx.sanitizer:
            ctx.sanitizer.check(f"correctness trial {trial}")
        # As the call left them (no later writes count); returned outputs are checked first.
        taken = mem.take(kernel.results(raw, outputs, shapes))
        del raw
        changed = mem.changed_input(spec, pristine, mine)
        refs = _run_reference(ctx, pristine, shapes, _where(index, workload, trial))
        tally.trials = trial + 1
        _tally(ctx, tally, trial, taken, refs)
        ctx.ops.scrub(refs)
        del refs
        if changed:
            return {**record, "status": "incorrect_numerical", "reason": changed,
                    "correctness": tally.record()}
        if total - tally.mismatched < ctx.matched_ratio * total:
            break  # the workload fails whatever the remaining trials show
    if tally.failed(ctx.matched_ratio):
        return {**record, "status": "incorrect_numerical",
                "reason": tally.reason(ctx.tolerances, ctx.matched_ratio),
                "correctness": tally.record()}
    record["correctness"] = tally.record()
    if ctx.sanitizer:
        return record  # under compute-sanitizer nothing is timed

    phase[0] = "timing"
    channel.progress("timing", index)
    # The correctness trials' arrays go before the timing stage allocates its own: kept into
    # it they were ~10 of the ~19 copies of a 7 GiB input and output that ran out of memory.
    del pristine, mine, outputs, taken
    ctx.keeper.let_go()
    session = TimingSession(ctx, kernel, index, workload, axes, shapes, phase)
    try:
        record["timing"] = backend.time_pairs(session, ctx.timing)
    except CandidateError as e:
        return {**record, "status": e.status, "reason": e.reason}
    return record


def _run_reference(ctx, inputs, shapes, where, guard=True):
    # Every caller hands over inputs it reads no more (the candidate has its own copies, and
    # they have been checked), so the reference runs on them instead of on one more copy.
    given = ctx.mem.reference_inputs(inputs)
    raw = ctx.reference.call(ctx.reference.arguments(given), where)
    refs = []
    try:
        refs = ctx.ops.reference_outputs(ctx.reference, raw, shapes, where)
    finally:
        ctx.mem.release_reference(raw, kept=refs)
    del raw, given
    if guard:
        for t, ref in zip(ctx.spec.outputs, refs):
            atol = ctx.tolerances[t.name][0]
            largest = ctx.ops.largest(ref)
            if not largest > atol:
                ctx.ops.scrub(refs)
                raise TaskError("reference", (
                    f"the reference's output '{t.name}' has no finite value above "
                    f"atol={atol:g} (largest |ref| = {largest:g}) on {where}, so it cannot tell "
                    f"a correct kernel from one that writes zeros; change the workload's inputs, "
                    f"the input distributions or the reference"))
    return refs


# ---- sizes and blame -----------------------------------------------------------------------

def _footprint(spec, axes):
    """(bytes, [(name, bytes)]) of one copy of a workload's inputs and outputs."""
    parts = [(t.name, math.prod(Spec.shape(t, axes)) * t.dtype.itemsize)
             for t in spec.inputs + spec.outputs]
    return sum(b for _, b in parts), parts


def _address_room():
    """(bytes this process can still map, how to describe that bound)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return MAX_WORKLOAD_BYTES, (f"the {_size(MAX_WORKLOAD_BYTES)} the harness allows one "
                                    f"workload when no address-space limit is set")
    used = 0
    try:
        with open("/proc/self/statm", "rb") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    room = max(soft - used, 0)
    return room, (f"the {_size(room)} left below the evaluation's address-space limit of "
                  f"{_size(soft)} (ksearch eval --memory-limit)")


def _check_sizes(ctx, backend):
    if not ctx.workloads:
        return
    host, device = _address_room(), backend.device_room()
    n_inputs = len(ctx.spec.inputs)
    for i, (workload, (total, parts)) in enumerate(zip(ctx.workloads, ctx.sizes)):
        largest = sorted(parts, key=lambda p: -p[1])[:3]
        listed = ", ".join(f"'{n}' {_size(b)}" for n, b in largest)
        where = f"workload {i} ({workload.get('uuid')!r})"
        if total > host[0]:
            raise TaskError(f"workloads[{i}].axes", (
                f"{where} needs {_size(total)} for one copy of its inputs and outputs "
                f"({listed}), more than {host[1]}; the harness holds several copies, so "
                f"reduce the workload's axes"))
        if device is None:
            continue
        # Host memory bounds one copy; the device, what the backend holds there at once.
        inputs = [b for _, b in parts[:n_inputs]]
        need, why = backend.device_need(ctx.trials, inputs, total - sum(inputs))
        if need > device[0]:
            raise TaskError(f"workloads[{i}].axes", (
                f"{where} needs {_size(need)} on the device at once ({why}; one copy of its "
                f"inputs and outputs is {_size(total)}: {listed}), more than {device[1]}; "
                f"reduce the workload's axes or the correctness trials"))


def _memory_limit_text():
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return "the machine's memory (no address-space limit is set)"
    return f"the evaluation's address-space limit of {_size(soft)} (ksearch eval --memory-limit)"


def _out_of_memory(ctx, index, phase, what):
    return (f"the process ran out of memory ({what}) during {phase}, after the candidate had run "
            f"in this process: most likely the candidate's own allocations used up "
            f"{_memory_limit_text()}; free what the kernel allocates and keep it proportional "
            f"to the workload (this workload's inputs and outputs take "
            f"{_size(ctx.sizes[index][0])})")


def _blame_reference(ctx, index, phase, error):
    if issubclass(error.error_type, MemoryError):
        return _out_of_memory(ctx, index, phase, "MemoryError in the reference")
    return (f"{error.message} after the candidate had run in this process; this counts against "
            f"the candidate, which may have corrupted the process's state (the reference ran "
            f"cleanly on workload 0 before the candidate was loaded; check_task mode runs the "
            f"reference alone)")


def _blame_harness(ctx, index, phase, error):
    name = type(error).__name__
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if os.path.dirname(os.path.abspath(f.filename)).startswith(_HERE)]
    frame = (ours or frames or [None])[-1]
    at = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""
    if isinstance(error, MemoryError):
        return _out_of_memory(ctx, index, phase, f"MemoryError in the harness{at}")
    text = f"{name}: {error}" if str(error) else name
    return (f"the harness failed with {text}{at} during {phase}, after the candidate had run in "
            f"this process (which it may have corrupted)")


def _size(n):
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"
