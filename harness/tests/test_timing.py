"""The CPU timing loop and the strict JSON of protocol lines."""

import json
import math
import os
import time
import unittest

import numpy as np

from ksearch_harness import protocol
from ksearch_harness.errors import CandidateError
from ksearch_harness.timing import calls, time_pairs


class Recorder:
    """A session that logs what the loop asks for, in order."""

    def __init__(self, sleep_s=0.0, fail_at=None):
        self.log = []
        self.sleep_s = sleep_s
        self.fail_at = fail_at

    def candidate(self, k):
        self.log.append(f"prepare cand {k}")
        return lambda: (self.log.append("cand"), time.sleep(self.sleep_s))

    def candidate_done(self, k, returned):
        self.log.append(f"take {k}")

    def reference(self, k):
        self.log.append(f"prepare ref {k}")
        return lambda: (self.log.append("ref"), time.sleep(self.sleep_s), f"result {k}")[-1]

    def reference_done(self, k, result):
        self.log.append(f"check {k} against {result}")
        if k == self.fail_at:
            raise CandidateError("incorrect_numerical", f"call {k}")


def pair(k):
    return [f"prepare cand {k}", "cand", f"take {k}", f"prepare ref {k}", "ref",
            f"check {k} against result {k}"]


class TimePairs(unittest.TestCase):
    def test_candidate_first_in_every_pair_and_every_call_checked(self):
        r = Recorder()
        out = time_pairs(r, {"warmup": 2, "iterations": 3, "min_iterations": 1,
                             "max_seconds": 100})
        self.assertEqual(r.log, sum((pair(k) for k in range(5)), []))
        self.assertEqual(out["clock"], "perf_counter_ns")
        self.assertEqual(len(out["candidate_ns"]), 3)  # warm-up pairs are not reported
        self.assertEqual(len(out["reference_ns"]), 3)
        self.assertTrue(all(isinstance(n, int) for n in out["candidate_ns"]))

    def test_a_failed_check_ends_timing_with_its_error(self):
        r = Recorder(fail_at=1)
        with self.assertRaises(CandidateError) as caught:
            time_pairs(r, {"warmup": 3, "iterations": 5, "min_iterations": 1,
                           "max_seconds": 100})
        self.assertEqual(caught.exception.reason, "call 1")
        self.assertEqual(r.log, pair(0) + pair(1))

    def test_stops_after_min_iterations_once_the_budget_is_spent(self):
        r = Recorder(sleep_s=0.01)
        out = time_pairs(r, {"warmup": 0, "iterations": 50, "min_iterations": 4,
                             "max_seconds": 0.001})
        self.assertEqual(len(out["candidate_ns"]), 4)
        self.assertGreater(min(out["candidate_ns"]), 9_000_000)  # the sleep is inside the clock
        self.assertGreater(min(out["reference_ns"]), 9_000_000)

    def test_iterations_cap_the_pairs(self):
        r = Recorder()
        out = time_pairs(r, {"warmup": 0, "iterations": 7, "min_iterations": 2,
                             "max_seconds": 100})
        self.assertEqual(len(out["reference_ns"]), 7)
        self.assertEqual(calls({"warmup": 3, "iterations": 7}), 10)


class ProtocolLines(unittest.TestCase):
    def test_non_finite_numbers_become_null_and_numpy_scalars_plain(self):
        read, write = os.pipe()
        channel = protocol.Channel(write)
        channel.emit("workload", a=math.nan, b=[math.inf, -math.inf, 1.5],
                     c=np.float32(0.5), d=np.int64(3), e={"f": np.float64("nan")})
        os.close(write)
        with os.fdopen(read, "rb") as f:
            line = f.read().decode()
        self.assertTrue(line.endswith("\n") and line.count("\n") == 1)
        self.assertEqual(json.loads(line), {"event": "workload", "a": None,
                                            "b": [None, None, 1.5], "c": 0.5, "d": 3,
                                            "e": {"f": None}})


if __name__ == "__main__":
    unittest.main()
