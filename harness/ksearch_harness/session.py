"""The timing stage's session: what the backend's `time_pairs` loop drives (timing.py on the
host, backends/torch_gpu/timing.py on a CUDA device; each backend's timing.py says which).

New input contents for every call, and every call of the candidate checked against the
reference's result on the same contents (docs/protocol.md, Timing). Where the contents, the
candidate's outputs and the reference's results live, and where they are compared, is the
memory's (`ctx.ops`: the host's NumPy, or the CUDA device's tensors).
"""

import functools

from . import timing
from .compare import Tally
from .errors import CandidateError


class TimingSession:
    def __init__(self, ctx, kernel, index, workload, axes, shapes, phase):
        spec = ctx.spec
        mem = ctx.mem
        self.ctx, self.mem, self.kernel, self.shapes, self.phase = ctx, mem, kernel, shapes, phase
        self.warmup = max(int(ctx.timing.get("warmup", 3)), 0)
        self.calls = timing.calls(ctx.timing)
        self.feed = ctx.maker.feed(index, workload, ctx.trials, axes, self.calls)
        # The candidate's inputs, refilled for every call (the same buffers every call), and
        # the reference's clone of the same contents, where the reference runs.
        self.mine = mem.feed_buffers(self.feed)
        self.theirs = mem.feed_buffers(self.feed, for_reference=True)
        self.outputs = mem.outputs(shapes, spec.outputs)
        self.taken = [None] * len(shapes)  # copies, allocated by the first take
        self.checks = [ctx.ops.fast_check(s, t, *ctx.tolerances[t.name][:2])
                       for s, t in zip(shapes, spec.outputs)]
        # Where the backend tests each call where its arrays are (backends/mlx/checks.py), the
        # host copies and tests below are only the fallback when that test fails.
        timing_checks = getattr(mem, "timing_checks", None)
        self.device = timing_checks(ctx) if timing_checks is not None else None
        # Into the next workload's first draw, as the trials' (only what the candidate is
        # given: evaluate.py's _Keeper says why).
        ctx.keeper.hold(index, (self.mine, self.outputs))
        self.where = where(index, workload, None)

    def _call(self, k):
        kind = "warm-up" if k < self.warmup else "timed"
        return f"call {k}, a {kind} call"

    def candidate(self, k):
        """Prepare call k (its contents copied in, outputs poisoned); returns the call."""
        self.phase[0] = f"timing ({self._call(k)})"
        values = self.mem.fill(self.feed, k, self.mine)
        self.mem.poison(self.outputs)
        return self.kernel.bind(values, self.outputs)

    def candidate_done(self, k, raw=None):
        """Take what call k left (`raw`: what it returned), and check its inputs."""
        results = self.kernel.results(raw, self.outputs, self.shapes)
        if self.device is not None:
            self.taken = self.device.take(results)
        elif self.taken[0] is None:
            self.taken[:] = self.mem.take(results)
        else:
            self.mem.take(results, into=self.taken)
        changed = self.mem.changed_input(self.ctx.spec, self.feed.expected(k), self.mine)
        if changed:
            raise CandidateError("incorrect_numerical", f"during timing ({self._call(k)}), "
                                                        f"{changed}")

    def reference(self, k):
        values = self.mem.fill(self.feed, k, self.theirs)
        ref = self.ctx.reference
        return functools.partial(ref.call, ref.arguments(values),
                                 f"{self.where}, timing call {k}")

    def reference_done(self, k, raw):
        ctx = self.ctx
        taken = self.taken
        if self.device is not None:
            self.taken = [None] * len(self.shapes)  # the call's outputs are not held past this
            if self.device.passes(taken, raw, self.shapes, f"{self.where}, timing call {k}"):
                return
            taken = self.device.host(taken)
        refs = []
        try:
            refs = ctx.ops.reference_outputs(ctx.reference, raw, self.shapes,
                                             f"{self.where}, timing call {k}")
        finally:
            self.mem.release_reference(raw, kept=refs)  # refs: scrubbed below
        try:
            if all(c.passes(o, r) for c, o, r in zip(self.checks, taken, refs)):
                return
            check = Tally([t.name for t in ctx.spec.outputs])
            check.trials = 1
            tally(ctx, check, k, taken, refs)
            if check.failed(ctx.matched_ratio):
                raise CandidateError("incorrect_numerical", (
                    f"during timing ({self._call(k)}; every call gets input contents no "
                    f"earlier call had, and each is compared with the reference on the same "
                    f"contents), the outputs do not match the reference although the "
                    f"correctness trials passed: are results cached, or work skipped, on "
                    f"repeated calls? "
                    + check.reason(ctx.tolerances, ctx.matched_ratio, unit="call")))
        finally:
            ctx.ops.scrub(refs)


def tally(ctx, tally_, trial, outputs, refs):
    for t, out, ref in zip(ctx.spec.outputs, outputs, refs):
        atol, rtol, _ = ctx.tolerances[t.name]
        tally_.add(trial, t.name, ctx.ops.compare(out, ref, atol, rtol))


def where(index, workload, trial):
    text = f"workload {index} ({workload.get('uuid')!r})"
    return text if trial is None else f"{text}, trial {trial}"
