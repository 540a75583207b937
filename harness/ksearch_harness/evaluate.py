"""The two modes: `evaluate` (compile, check, time a candidate) and `check_task` (reference only).

One correctness trial, in this order (docs/protocol.md): draw fresh inputs and keep a pristine
copy; poison fresh outputs; call the candidate on its own copy; compare its inputs with the
pristine copy; only then run the reference on a fresh clone; compare the outputs.
"""

import functools
import math
import tempfile

import numpy as np

from . import backends, dtypes
from .compare import Tally, compare, largest_finite_magnitude
from .definition import Spec
from .errors import CandidateError, TaskError
from .inputs import InputMaker
from .reference import Reference


class _Context:
    """What every workload of a run shares."""

    def __init__(self, request, spec):
        self.spec = spec
        correctness = request.get("correctness") or {}
        self.trials = int(correctness.get("trials", 3))
        if self.trials < 1:
            raise TaskError("correctness.trials", "trials must be at least 1")
        self.matched_ratio = float(correctness.get("matched_ratio", 1.0))
        self.reference = Reference((request.get("definition") or {}).get("reference"), spec)
        self.maker = InputMaker(spec, correctness, request.get("seed", 0), request.get("task_dir"))
        table = correctness.get("tolerance") or {}
        self.tolerances = {t.name: (*dtypes.tolerance(t.dtype_name, table), t.dtype)
                           for t in spec.outputs}
        self.workloads = request.get("workloads") or []
        self.timing = request.get("timing") or {}
        self.keeper = _Keeper()

    def output_shapes(self, axes):
        return [Spec.shape(t, axes) for t in self.spec.outputs]


class _Keeper:
    """Keeps the arrays of a workload's earlier trials alive, so later draws get new addresses.

    The previous workload's arrays are let go only after the next workload's first draw.
    """

    def __init__(self):
        self._held = []

    def hold(self, index, arrays):
        self._held.append((index, arrays))
        self._held = [(i, a) for i, a in self._held if i == index]


def evaluate(request, channel, environment):
    backend = backends.get((request.get("device") or {}).get("backend", "c"))
    spec = Spec(request.get("definition"))
    backend.check_definition(spec)
    spec.require_numpy()
    ctx = _Context(request, spec)
    with tempfile.TemporaryDirectory(prefix="ksearch-") as workdir:
        channel.progress("compile")
        result = backend.build(request.get("candidate"), workdir, request.get("limits") or {})
        environment["compiler"] = backend.compiler
        channel.emit("compile", **result)
        if not result["ok"]:
            return
        for index, workload in enumerate(ctx.workloads):
            record = _workload(ctx, backend, channel, index, workload)
            channel.emit("workload", **record)
            if request.get("fail_fast") and record["status"] != "passed":
                break


def check_task(request, channel, environment):
    spec = Spec(request.get("definition"))
    spec.require_numpy()
    ctx = _Context(request, spec)
    for index, workload in enumerate(ctx.workloads):
        axes = spec.axes_for(workload, index)
        shapes = ctx.output_shapes(axes)
        for trial in range(ctx.trials):
            channel.progress("reference", index, trial)
            inputs = ctx.maker.draw(index, workload, trial, axes)
            refs = _run_reference(ctx, inputs, shapes, _where(index, workload, trial))
            _scrub(refs)


def _workload(ctx, backend, channel, index, workload):
    record = {"index": index, "uuid": workload.get("uuid"), "status": "passed", "reason": None}
    spec = ctx.spec
    axes = spec.axes_for(workload, index)
    shapes = ctx.output_shapes(axes)
    try:
        kernel = backend.prepare(spec, axes)
    except CandidateError as e:
        return {**record, "status": e.status, "reason": e.reason}

    tally = Tally([t.name for t in spec.outputs])
    total = ctx.trials * sum(math.prod(s) for s in shapes)
    for trial in range(ctx.trials):
        channel.progress("correctness", index, trial)
        pristine = ctx.maker.draw(index, workload, trial, axes)
        mine = [_clone(v) for v in pristine]
        outputs = [_poisoned(s, t.dtype) for s, t in zip(shapes, spec.outputs)]
        ctx.keeper.hold(index, (pristine, mine, outputs))
        kernel.bind(mine, outputs)()
        changed = _changed_input(spec, pristine, mine)
        refs = _run_reference(ctx, pristine, shapes, _where(index, workload, trial))
        tally.trials = trial + 1
        _tally(ctx, tally, trial, outputs, refs)
        _scrub(refs)
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

    channel.progress("timing", index)
    problem, samples = _time(ctx, backend, kernel, index, workload, axes, shapes)
    if problem:
        return {**record, "status": "incorrect_numerical", "reason": problem}
    record["timing"] = samples
    return record


def _time(ctx, backend, kernel, index, workload, axes, shapes):
    """Time on a draw no correctness trial used, then check that the last call still computed.

    Outputs are re-poisoned before every candidate call and the reference's results scrubbed
    after every reference call, so a kernel that skips work when it sees the same pointers
    again, or copies the reference's result out of freed memory, fails the final check.
    """
    spec = ctx.spec
    pristine = ctx.maker.draw(index, workload, ctx.trials, axes)
    mine = [_clone(v) for v in pristine]
    outputs = [_poisoned(s, t.dtype) for s, t in zip(shapes, spec.outputs)]
    theirs = [_clone(v) for v in pristine]
    ctx.keeper.hold(index, (pristine, mine, outputs, theirs))
    protected = [a for a in theirs if isinstance(a, np.ndarray)]
    where = _where(index, workload, None)
    reference = functools.partial(ctx.reference.call, ctx.reference.arguments(theirs), where)

    def scrub(raw):
        _scrub(ctx.reference.outputs(raw, shapes, where), protected)

    def repoison():
        for o in outputs:
            dtypes.poison(o)

    samples = backend.time_pairs(reference, kernel.bind(mine, outputs), ctx.timing,
                                 repoison, scrub)
    changed = _changed_input(spec, pristine, mine)
    if changed:
        return f"during timing, {changed}", None
    refs = _run_reference(ctx, pristine, shapes, where, guard=False)
    check = Tally([t.name for t in spec.outputs])
    check.trials = 1
    _tally(ctx, check, 0, outputs, refs)
    if check.failed(ctx.matched_ratio):
        return ("the outputs of the last timed call do not match the reference although the "
                "correctness trials passed (is work skipped on repeated calls with the same "
                "pointers?): " + check.reason(ctx.tolerances, ctx.matched_ratio)), None
    return None, samples


def _run_reference(ctx, inputs, shapes, where, guard=True):
    clone = [_clone(v) for v in inputs]
    raw = ctx.reference.call(ctx.reference.arguments(clone), where)
    refs = ctx.reference.outputs(raw, shapes, where)
    if guard:
        for t, ref in zip(ctx.spec.outputs, refs):
            atol = ctx.tolerances[t.name][0]
            largest = largest_finite_magnitude(ref)
            if not largest > atol:
                raise TaskError("reference", (
                    f"the reference's output '{t.name}' has no finite value above "
                    f"atol={atol:g} (largest |ref| = {largest:g}) on {where}, so it cannot tell "
                    f"a correct kernel from one that writes zeros; change the workload's inputs, "
                    f"the input distributions or the reference"))
    return refs


def _tally(ctx, tally, trial, outputs, refs):
    for t, out, ref in zip(ctx.spec.outputs, outputs, refs):
        atol, rtol, _ = ctx.tolerances[t.name]
        tally.add(trial, t.name, compare(out, ref, atol, rtol))


def _changed_input(spec, pristine, mine):
    """Bitwise (NaN-safe) comparison of the candidate's inputs with the pristine copy."""
    for t, before, after in zip(spec.inputs, pristine, mine):
        if not isinstance(before, np.ndarray) or before.size == 0:
            continue
        b = before.reshape(-1).view(np.uint8)
        a = after.reshape(-1).view(np.uint8)
        if np.array_equal(a, b):
            continue
        n = before.size
        changed = int(np.count_nonzero(
            (a.reshape(n, -1) != b.reshape(n, -1)).any(axis=1)))
        return (f"the candidate modified its input '{t.name}' ({changed} of {n} elements "
                f"changed); inputs are read-only, write results only to the outputs")
    return None


def _scrub(arrays, protected=()):
    """Poison reference results before they are freed, so no candidate finds them in memory."""
    for a in arrays:
        if a.flags.writeable and a.size and not any(np.may_share_memory(a, p) for p in protected):
            dtypes.poison(a)


def _clone(value):
    return value.copy() if isinstance(value, np.ndarray) else value


def _poisoned(shape, dtype):
    array = np.empty(shape, dtype)
    dtypes.poison(array)
    return array


def _where(index, workload, trial):
    text = f"workload {index} ({workload.get('uuid')!r})"
    return text if trial is None else f"{text}, trial {trial}"
