"""Mode `profile`: the candidate called a few times on one workload, for a profiler that watches
this process from outside (ksearch runs the harness under Nsight Compute: docs/protocol.md,
Profiling).

Nothing is checked or timed here: the evaluation did that, in its own process, and a profiler's
kernel replay (each kernel run tens of times, caches flushed between passes) would spoil any
timing. The order is evaluate's, cut short: open the device, compile (the build cache makes this
cheap after an evaluation), load the candidate, draw one set of inputs for the request's single
workload, call the candidate once unwatched (Triton's JIT, lazy module loading), then call it
`profile.calls` times between cudaProfilerStart and cudaProfilerStop, so a profiler started with
`--profile-from-start off` sees the candidate's kernels and none of the harness's own (input
uploads, output poisoning). The last line before `done` is

  {"event": "profiled", "workload": "<uuid>", "calls": 2, "bracketed": true}

`bracketed` is false where no CUDA profiler API could be reached (backend c, a CPU device): the
calls ran, but nothing marked them for a profiler.
"""

import ctypes
import sys
import tempfile

from . import backends
from .definition import Spec
from .errors import CandidateError, TaskError
from .evaluate import _Context, _settle_malloc

MAX_CALLS = 10


def profile(request, channel, environment):
    _settle_malloc()
    settings = request.get("profile") or {}
    calls = settings.get("calls", 2)
    if not isinstance(calls, int) or isinstance(calls, bool) or not 1 <= calls <= MAX_CALLS:
        raise TaskError("profile.calls", f"must be an integer from 1 to {MAX_CALLS}, got {calls!r}")
    backend = backends.get((request.get("device") or {}).get("backend", "c"))
    backend.open(request)
    environment["device"] = backend.describe()
    spec = Spec(request.get("definition"))
    spec.set_writable((request.get("correctness") or {}).get("writable_inputs"))
    backend.check_definition(spec)
    spec.require_numpy(bfloat16_as_float32=backend.bfloat16_as_float32)
    ctx = _Context(request, spec, backend)
    if len(ctx.workloads) != 1:
        raise TaskError("workloads", f"profile mode takes exactly one workload, got "
                                     f"{len(ctx.workloads)}")
    with tempfile.TemporaryDirectory(prefix="ksearch-") as workdir:
        channel.progress("compile")
        result = backend.build(request.get("candidate"), workdir, request.get("limits") or {})
        environment["compiler"] = backend.compiler
        channel.emit("compile", **result)
        if not result["ok"]:
            return
        channel.progress("load", 0)
        workload = ctx.workloads[0]
        try:
            backend.load(spec)
            bracketed = _call(ctx, backend, channel, workload, calls)
        except CandidateError as e:
            channel.emit("profile_error", status=e.status, reason=e.reason)
            return
        channel.emit("profiled", workload=workload.get("uuid"), calls=calls, bracketed=bracketed)


def _call(ctx, backend, channel, workload, calls):
    """One unwatched call, then `calls` calls inside the profiler's range."""
    spec, mem = ctx.spec, ctx.mem
    axes = ctx.axes[0]
    shapes = ctx.output_shapes(axes)
    kernel = backend.prepare(spec, axes)
    pristine = ctx.maker.draw(0, workload, 0, axes)
    mine = mem.inputs(pristine)
    outputs = mem.outputs(shapes, spec.outputs)
    channel.progress("profile", 0)
    mem.run(kernel.bind(mine, outputs))  # warm-up: JIT compilation, lazy loading
    start, stop = _profiler_api()
    started = start is not None and start()
    try:
        for _ in range(calls):
            mem.run(kernel.bind(mine, outputs))
    finally:
        if started:
            stop()
    return bool(started)


def _profiler_api():
    """(start, stop) of the CUDA profiler range, each returning True on success, or (None, None).

    Through torch's runtime when the backend imported torch and sees a GPU (its primary context is
    the current one), else the driver API's cuProfilerStart on the current context (MLX's CUDA
    backend)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                return _quiet(torch.cuda.profiler.start), _quiet(torch.cuda.profiler.stop)
        except Exception:  # noqa: BLE001 - a torch without CUDA runtime bindings
            pass
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, None
    context = ctypes.c_void_p()
    try:
        if driver.cuCtxGetCurrent(ctypes.byref(context)) != 0 or not context.value:
            return None, None
        return (lambda: driver.cuProfilerStart() == 0, lambda: driver.cuProfilerStop() == 0)
    except AttributeError:
        return None, None


def _quiet(call):
    """`call` as a function returning True when it did not raise."""
    def run():
        try:
            call()
            return True
        except Exception:  # noqa: BLE001 - no profiler range: the calls still run
            return False
    return run
