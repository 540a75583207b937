"""CPU timing: interleaved (reference, candidate) pairs around single calls.

Only raw samples leave this module; the statistics are computed by Rust, outside the process
that hosts the candidate.
"""

from time import perf_counter_ns


def time_pairs(reference, candidate, settings, before_candidate, after_reference):
    """Warm up, then time up to `iterations` pairs; the order inside a pair alternates.

    `before_candidate` (re-poisoning the outputs) and `after_reference` (scrubbing the
    reference's result) run outside the timed intervals.
    """
    warmup = int(settings.get("warmup", 3))
    iterations = int(settings.get("iterations", 50))
    min_iterations = int(settings.get("min_iterations", 5))
    budget_ns = int(float(settings.get("max_seconds", 1.0)) * 1e9)
    clock = perf_counter_ns
    start = clock()
    for _ in range(warmup):
        after_reference(reference())
        before_candidate()
        candidate()

    ref_ns, cand_ns = [], []
    for k in range(iterations):
        if k % 2 == 0:
            t0 = clock(); result = reference(); t1 = clock()
            after_reference(result)
            before_candidate()
            t2 = clock(); candidate(); t3 = clock()
        else:
            before_candidate()
            t2 = clock(); candidate(); t3 = clock()
            t0 = clock(); result = reference(); t1 = clock()
            after_reference(result)
        ref_ns.append(t1 - t0)
        cand_ns.append(t3 - t2)
        if k + 1 >= min_iterations and clock() - start >= budget_ns:
            break
    return {"clock": "perf_counter_ns", "candidate_ns": cand_ns, "reference_ns": ref_ns}
