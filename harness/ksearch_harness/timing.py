"""CPU timing: (candidate, reference) pairs around single calls, every call on new inputs.

Only raw samples leave this module; the statistics are computed by Rust, outside the process
that hosts the candidate.
"""

from time import perf_counter_ns


def time_pairs(session, settings):
    """Run `warmup` untimed pairs, then time up to `iterations` pairs.

    Pair k: `session.candidate(k)` prepares call k (its own input contents copied in, outputs
    poisoned) and returns the call; it is timed; `session.candidate_done(k, result)` takes what
    the call left (and what it returned); `session.reference(k)` prepares the reference on a clone of the same contents; it is
    timed; `session.reference_done(k, result)` checks the candidate's call k against it.
    Everything but the two calls runs outside the timed intervals; a failed check raises out of
    here. The candidate always runs first: the reference's result for these inputs must not
    exist before the candidate has been called on them.

    Timing stops early after `min_iterations` timed pairs once `max_seconds` have elapsed since
    the first warm-up pair began.
    """
    warmup, iterations, min_iterations, budget_ns = loop_settings(settings)
    clock = perf_counter_ns
    start = clock()
    ref_ns, cand_ns = [], []
    for k in range(warmup + iterations):
        candidate = session.candidate(k)
        t0 = clock(); returned = candidate(); t1 = clock()
        session.candidate_done(k, returned)
        del returned
        reference = session.reference(k)
        t2 = clock(); result = reference(); t3 = clock()
        session.reference_done(k, result)
        del result
        if k >= warmup:
            cand_ns.append(t1 - t0)
            ref_ns.append(t3 - t2)
            if len(cand_ns) >= min_iterations and clock() - start >= budget_ns:
                break
    return {"clock": "perf_counter_ns", "candidate_ns": cand_ns, "reference_ns": ref_ns}


def loop_settings(settings):
    """(warmup, iterations, min_iterations, budget in ns) of a timing loop."""
    return (int(settings.get("warmup", 3)), int(settings.get("iterations", 50)),
            int(settings.get("min_iterations", 5)),
            int(float(settings.get("max_seconds", 1.0)) * 1e9))


def calls(settings):
    """The most calls of each kind `time_pairs` makes with these settings."""
    return max(int(settings.get("warmup", 3)), 0) + max(int(settings.get("iterations", 50)), 0)
