"""The mlx backend's timing loop: (candidate, reference) pairs as on the CPU
(ksearch_harness/timing.py), perf_counter_ns around each call, between a device-wide synchronise
before it and mx.eval of its results plus a synchronise after it; before each call a 256 MiB
buffer is read and written on the device (memory.py's flush_l2), which evicts the GPU's
last-level cache (the H200's 50 MiB L2, an Apple GPU's system-level cache).
"""

from time import perf_counter_ns

from ... import timing
from .memory import evaluate


def time_pairs(session, settings):
    """(candidate, reference) pairs as on the CPU (timing.py), each call between a device-wide
    synchronise and the evaluation of its results plus another synchronise."""
    mem = session.mem
    mx = mem.mx
    warmup, iterations, min_iterations, budget_ns = timing.loop_settings(settings)
    clock = perf_counter_ns
    cand_ns, ref_ns = [], []
    began = clock()
    for k in range(warmup + iterations):
        call = session.candidate(k)  # fresh inputs for call k, outputs' buffers poisoned
        mem.flush_l2()
        mem.synchronize("before the candidate's call")
        t0 = clock()
        returned = call()  # the call evaluates its outputs (mx.eval) before returning
        mem.synchronize(f"after the candidate's call {k}")
        t1 = clock()
        session.candidate_done(k, returned)
        del returned
        reference = session.reference(k)
        mem.flush_l2()
        mem.synchronize("before the reference's call")
        t2 = clock()
        result = reference()
        evaluate(mx, result)  # MLX is lazy: the reference's work happens here
        mx.synchronize()
        t3 = clock()
        session.reference_done(k, result)
        del result
        if k < warmup:
            continue
        cand_ns.append(t1 - t0)
        ref_ns.append(t3 - t2)
        if len(cand_ns) >= min_iterations and clock() - began >= budget_ns:
            break
    return {"clock": "perf_counter_ns", "candidate_ns": cand_ns, "reference_ns": ref_ns,
            "l2_flush_bytes": mem.flush_bytes()}
