"""GPU timing: (candidate, reference) pairs as on the CPU (timing.py), measured with CUDA events.

Per call, outside the timed interval: the call's fresh input contents are copied in, the L2
cache is flushed (a buffer of twice its size read and written), and the device is synchronised.
Then two clocks run around the single call:
  - CUDA events recorded on the current (default) stream before and after it: the primary
    clock, the device's own time for the work queued in between;
  - the host clock (perf_counter_ns) from before the start event to after a device-wide
    synchronise: includes launch overhead, and any work the candidate put on another stream or
    thread, which the events on the default stream can miss. Rust compares the two.

CUDA graphs (`timing.cuda_graph`: true, false or "auto"): the candidate's call and the
reference's are each captured once into a graph, two warm-up pairs before the timed ones (one
with a single warm-up pair), and from then on every call replays its graph. Inputs and outputs
stay in the same buffers, so each replay still gets its own fresh contents and its outputs are
still checked. With "auto" the graphs are kept only when the last warm-up replay of the
candidate took under GRAPH_BELOW_NS: kernels so short that launch overhead would dominate their
event time (a Python launch alone costs tens of microseconds, which is why the decision rests on
a replay and not on plain calls; and not on the first replay, which also uploads the graph to
the device, about 30 us on an H200). Only candidates that launch on torch's
current stream can be captured (backends python and triton); the cuda backend's kernels launch
on the legacy default stream, which CUDA refuses to capture. A capture that fails (a
synchronising call inside, a NumPy reference) falls back to plain event timing, with a note.
"""

from time import perf_counter_ns

from . import timing
from .errors import CandidateError
from .gpu import first_line

# Measured on the H200 (bench/results/graph-replay.md): the deciding (second) replay of a 4x64
# softmax takes 12-13 us alone and 18.6 us inside the harness, later ones about 9 us, against
# 20-30 us for a plain Python call; a 4096x4096 softmax replays in 38-41 us and gains little.
GRAPH_BELOW_NS = 30_000
# "auto" does not even try a capture when a plain warm-up call took this long: launch overhead
# is a small share of such a call, and a capture is one more way for an odd candidate to fail.
GRAPH_TRY_BELOW_NS = 100_000


def time_pairs(session, settings):
    mem = session.mem
    if not mem.is_cuda:
        return timing.time_pairs(session, settings)
    torch = mem.torch
    warmup, iterations, min_iterations, budget_ns = timing.loop_settings(settings)
    mode = settings.get("cuda_graph", "auto")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    clock = perf_counter_ns
    cand_ns, ref_ns, cand_host, ref_host, plain_warm = [], [], [], [], []
    graphs, note = None, None
    began = clock()

    def timed(call, during):
        mem.flush_l2()
        mem.synchronize(f"before {during}")
        h0 = clock()
        start.record()
        returned = call()
        end.record()
        mem.synchronize(during)
        h1 = clock()
        return returned, start.elapsed_time(end) * 1e6, h1 - h0

    if mode in (False, "false", "off"):
        capture_at = None
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
        returned, event, host = timed(call, f"the candidate's call {k}")
        session.candidate_done(k, graphs.candidate_out if graphs is not None else returned)
        del returned
        reference = session.reference(k)
        if graphs is not None:
            reference = graphs.reference
        result, ref_event, ref_hosted = timed(reference, f"the reference's call {k}")
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
        if len(cand_ns) >= min_iterations and clock() - began >= budget_ns:
            break
    return {"clock": "cuda_event", "candidate_ns": cand_ns, "reference_ns": ref_ns,
            "host_clock": "perf_counter_ns", "candidate_host_ns": cand_host,
            "reference_host_ns": ref_host, "cuda_graph": graphs is not None,
            "cuda_graph_note": note, "l2_flush_bytes": mem.flush_bytes()}


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
