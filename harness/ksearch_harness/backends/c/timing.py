"""Backend c's timing loops: with the candidate in the worker (worker.py), `in_worker` below,
timed by the worker's clock; in this process (no Linux, or KSEARCH_IN_PROCESS=1), the CPU's
loop, ksearch_harness/timing.py's time_pairs, with no device to wait for."""

from ... import timing
from ...timing import time_pairs  # noqa: F401 - in this process: the CPU's loop

PINGS = 5  # empty round trips per workload, to calibrate the timing cross-check


def in_worker(session, settings):
    """timing.time_pairs for a candidate in the worker.

    The same pairs in the same order (candidate first, every call on new contents and checked);
    the candidate's time is the worker's clock around its call, and the harness adds its own
    round trip of each timed call and the round trips of empty calls for ksearch's cross-check.
    """
    warmup, iterations, min_iterations, budget_ns = timing.loop_settings(settings)
    clock = timing.perf_counter_ns
    pings = [session.kernel.worker.ping() for _ in range(PINGS)]
    start = clock()
    ref_ns, cand_ns, outer_ns = [], [], []
    for k in range(warmup + iterations):
        candidate = session.candidate(k)
        candidate()
        session.candidate_done(k, None)
        reference = session.reference(k)
        t2 = clock(); result = reference(); t3 = clock()
        session.reference_done(k, result)
        del result
        if k >= warmup:
            cand_ns.append(candidate.ns)
            outer_ns.append(candidate.outer_ns)
            ref_ns.append(t3 - t2)
            if len(cand_ns) >= min_iterations and clock() - start >= budget_ns:
                break
    return {"clock": "perf_counter_ns", "candidate_ns": cand_ns, "reference_ns": ref_ns,
            "worker_outer_ns": outer_ns, "worker_ping_ns": pings}
