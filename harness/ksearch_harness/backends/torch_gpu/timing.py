"""GPU timing: (candidate, reference) pairs as on the CPU (timing.py), measured with CUDA events
around a call that the device runs only once the host has enqueued all of it.

Per call, outside the timed interval: the call's fresh input contents are copied in (device to
device), the outputs poisoned, the L2 cache flushed (a buffer of twice its size read and
written), and the device synchronised. Then:
  - host clock h0;
  - the gate (gate.py) is enqueued closed on the current (default) stream, then the start
    event, the call, the end event; the host opens the gate, and synchronises the whole device;
  - host clock h1.
The device reaches the start event only when the gate opens, with the call's work queued behind
it, so the events measure the device time of the work the call enqueued, not the host's launch
path (a ctypes or Python launch costs 5-30 us, which an idle device used to spend inside the
interval). From each gated event time the median of 15 empty gated intervals (start and end
event with nothing between, about 1.3 us on an H200) measured before the workload's calls is
subtracted: the events' own cost, not the call's (`event_overhead_ns`).

The host clock (h1 - h0) still starts before anything of the call is enqueued and ends after a
device-wide synchronise, so work the candidate puts on another stream or thread is inside it,
as before; Rust compares the two clocks.

A call that cannot be enqueued behind a closed gate (it synchronises, frees memory or fills the
launch queue) makes the gate open itself after gpu_gate.LIMIT_NS; that call is timed as without
a gate, and later calls as gate_policy.py decides (`gate` says so): the candidate's expiry
takes both callees off the gate, the reference's only the reference while the candidate's launch
path stays short enough for Rust's comparison of the two callees' gaps between the clocks.
Where no gate can be made, every call is timed without one.

CUDA graphs (`timing.cuda_graph`: true, false or "auto"): with true, the candidate's call and
the reference's are each captured once into a graph two warm-up pairs before the timed ones
(one with a single warm-up pair), and from then on every call replays its graph; inputs and
outputs stay in the same buffers, so each replay still gets its own fresh contents and its
outputs are still checked. "auto" captures only where there is no gate, and keeps the graphs
when the last warm-up replay of the candidate took under GRAPH_BELOW_NS (without a gate a
Python launch costs tens of microseconds of event time; with it, none). Only candidates that
launch on torch's current stream can be captured (backends python and triton); the cuda
backend's kernels launch on the legacy default stream, which CUDA refuses to capture. A
capture that fails (a synchronising call inside, a NumPy reference) falls back to plain calls,
with a note.
"""

import statistics
from time import perf_counter_ns

from ... import timing
from ...errors import CandidateError
from . import gate as gpu_gate
from .gate_policy import GatePolicy
from .device import first_line

# Measured on the H200 (bench/results/graph-replay.md): the deciding (second) replay of a 4x64
# softmax takes 12-13 us alone and 18.6 us inside the harness, later ones about 9 us, against
# 20-30 us for a plain Python call; a 4096x4096 softmax replays in 38-41 us and gains little.
GRAPH_BELOW_NS = 30_000
# "auto" does not even try a capture when a plain warm-up call took this long: launch overhead
# is a small share of such a call, and a capture is one more way for an odd candidate to fail.
GRAPH_TRY_BELOW_NS = 100_000
# Empty gated intervals measured per workload; their median is the events' own cost.
OVERHEAD_SAMPLES = 15


def time_pairs(session, settings):
    mem = session.mem
    if not mem.is_cuda:
        return timing.time_pairs(session, settings)
    torch = mem.torch
    warmup, iterations, min_iterations, budget_ns = timing.loop_settings(settings)
    mode = settings.get("cuda_graph", "auto")
    gate, gate_note = mem.gate()
    clock = perf_counter_ns
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream().cuda_stream
    overhead = event_overhead(mem, gate, start, end, stream) if gate is not None else 0.0
    policy = GatePolicy(gate is not None, gate_note)
    cand_ns, ref_ns, cand_host, ref_host, plain_warm = [], [], [], [], []
    cand_enqueue, ref_enqueue = [], []
    graphs, note = None, None
    began = clock()

    def timed(who, call, during, k):
        mem.flush_l2()
        mem.synchronize(f"before {during}")
        use = policy.gated[who]
        h0 = clock()
        if use:
            gate.close()
            gate.enqueue(stream)
        start.record()
        try:
            returned = call()
            end.record()
        finally:
            if use:
                gate.open()
        # The call's launch path: from h0 until the device may run it (behind the gate it waits
        # for this moment). Rust compares the rest of the host interval, h1 - opened, less the
        # events, with the reference's: work the events do not see that runs after the call
        # returned (another stream, a thread) shows there, apart from the launch path.
        opened = clock()
        mem.synchronize(during)
        h1 = clock()
        event = start.elapsed_time(end) * 1e6
        if use:
            if gate.opened_by() == gpu_gate.OPENED:
                event = max(event - overhead, 1.0)
                policy.launched(who, k, opened - h0)
            else:
                # It opened itself: this call without a gate, and later ones as gate_policy.py
                # decides (the cross-check of the clocks compares the two callees' gaps).
                policy.expired(who, k, gpu_gate.LIMIT_NS / 1e6)
        return returned, event, h1 - h0, opened - h0

    if mode in (False, "false", "off") or (mode == "auto" and gate is not None):
        capture_at = None
        if mode == "auto":
            note = "not used: the gate keeps launch overhead out of the events"
    elif warmup >= 1:
        capture_at = max(warmup - 2, 0)  # warm-up pairs: the last one's replay decides "auto"
    else:
        capture_at = 0 if mode is True else None
    for k in range(warmup + iterations):
        if k == capture_at:
            if mode == "auto" and plain_warm and min(plain_warm) >= GRAPH_TRY_BELOW_NS:
                note = None  # long calls: nothing to gain
            else:
                graphs, note = _capture(session, k, mode)
        call = session.candidate(k)
        if graphs is not None:
            call = graphs.candidate
        returned, event, host, enqueue = timed("candidate", call, f"the candidate's call {k}", k)
        session.candidate_done(k, graphs.candidate_out if graphs is not None else returned)
        del returned
        reference = session.reference(k)
        if graphs is not None:
            reference = graphs.reference
        result, ref_event, ref_hosted, ref_enqueued = timed("reference", reference,
                                                            f"the reference's call {k}", k)
        session.reference_done(k, graphs.reference_out if graphs is not None else result)
        del result
        if k < warmup:
            if graphs is None:
                plain_warm.append(event)
            if graphs is not None and k == warmup - 1 and mode == "auto" and \
                    event >= GRAPH_BELOW_NS:
                graphs = None
                note = (f"not used: a replay of the candidate's graph took {event / 1e3:.1f} us, "
                        f"not under {GRAPH_BELOW_NS / 1e3:g} us")
            continue
        cand_ns.append(event)
        ref_ns.append(ref_event)
        cand_host.append(host)
        ref_host.append(ref_hosted)
        cand_enqueue.append(enqueue)
        ref_enqueue.append(ref_enqueued)
        if len(cand_ns) >= min_iterations and clock() - began >= budget_ns:
            break
    return {"clock": "cuda_event", "candidate_ns": cand_ns, "reference_ns": ref_ns,
            "host_clock": "perf_counter_ns", "candidate_host_ns": cand_host,
            "reference_host_ns": ref_host, "candidate_enqueue_ns": cand_enqueue,
            "reference_enqueue_ns": ref_enqueue, "cuda_graph": graphs is not None,
            "cuda_graph_note": note, "l2_flush_bytes": mem.flush_bytes(),
            "gate": policy.state, "event_overhead_ns": overhead}


def event_overhead(mem, gate, start, end, stream):
    """Median device time between a start and an end event recorded back to back behind an
    opened gate: what the events themselves cost, subtracted from every gated sample."""
    samples = []
    for _ in range(OVERHEAD_SAMPLES):
        mem.synchronize("before the timing's calibration")
        gate.close()
        gate.enqueue(stream)
        start.record()
        end.record()
        gate.open()
        mem.synchronize("during the timing's calibration")
        if gate.opened_by() == gpu_gate.OPENED:
            samples.append(start.elapsed_time(end) * 1e6)
    return statistics.median(samples) if samples else 0.0


class _Graphs:
    def __init__(self, candidate, candidate_out, reference, reference_out):
        self.candidate_graph, self.reference_graph = candidate, reference
        self.candidate_out, self.reference_out = candidate_out, reference_out

    def candidate(self):
        self.candidate_graph.replay()

    def reference(self):
        self.reference_graph.replay()


def _capture(session, k, mode):
    """(graphs or None, a note saying why not, or what was done), for call k."""
    if not getattr(session.kernel, "graph_capturable", False):
        return None, (None if mode == "auto" else
                      "not captured: this backend's kernels launch on the legacy default stream, "
                      "which CUDA cannot capture into a graph")
    if not session.mem.reference_on_device:
        return None, (None if mode == "auto" else
                      "not captured: the reference runs on the host (NumPy), not on the device")
    mem = session.mem
    torch = mem.torch
    try:
        call = session.candidate(k)
        reference_call = session.reference(k)
        mem.capturing = True
        candidate = torch.cuda.CUDAGraph()
        with torch.cuda.graph(candidate):
            candidate_out = call()
        reference = torch.cuda.CUDAGraph()
        with torch.cuda.graph(reference):
            reference_out = reference_call()
        mem.capturing = False
        torch.cuda.synchronize()
    except (Exception, CandidateError) as e:  # noqa: BLE001 - any failure: time without graphs
        mem.capturing = False
        # A refused capture leaves the context usable; anything else shows at the next call.
        if not mem.usable():
            mem.broken = f"the CUDA context is unusable after a failed graph capture ({first_line(e)})"
        return None, f"not captured ({first_line(e)}); timed without graphs"
    return _Graphs(candidate, candidate_out, reference, reference_out), \
        "timed by replaying CUDA graphs of the candidate's and the reference's calls"
