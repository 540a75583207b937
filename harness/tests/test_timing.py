"""The CPU timing loop and the strict JSON of protocol lines."""

import json
import math
import os
import time
import unittest

import numpy as np

from ksearch_harness import protocol
from ksearch_harness.timing import time_pairs


class Recorder:
    def __init__(self, sleep_s=0.0):
        self.calls = []
        self.sleep_s = sleep_s

    def reference(self):
        self.calls.append("ref")
        time.sleep(self.sleep_s)
        return "result"

    def candidate(self):
        self.calls.append("cand")
        time.sleep(self.sleep_s)

    def repoison(self):
        self.calls.append("poison")

    def scrub(self, result):
        self.calls.append(f"scrub:{result}")


class TimePairs(unittest.TestCase):
    def test_warmup_then_alternating_pairs_with_hooks_outside(self):
        r = Recorder()
        out = time_pairs(r.reference, r.candidate, {"warmup": 2, "iterations": 3,
                                                    "min_iterations": 1, "max_seconds": 100},
                         r.repoison, r.scrub)
        warm = ["ref", "scrub:result", "poison", "cand"]
        even = ["ref", "scrub:result", "poison", "cand"]
        odd = ["poison", "cand", "ref", "scrub:result"]
        self.assertEqual(r.calls, warm * 2 + even + odd + even)
        self.assertEqual(out["clock"], "perf_counter_ns")
        self.assertEqual(len(out["candidate_ns"]), 3)
        self.assertEqual(len(out["reference_ns"]), 3)
        self.assertTrue(all(isinstance(n, int) for n in out["candidate_ns"]))

    def test_stops_after_min_iterations_once_the_budget_is_spent(self):
        r = Recorder(sleep_s=0.01)
        out = time_pairs(r.reference, r.candidate, {"warmup": 0, "iterations": 50,
                                                    "min_iterations": 4, "max_seconds": 0.001},
                         r.repoison, r.scrub)
        self.assertEqual(len(out["candidate_ns"]), 4)
        self.assertGreater(min(out["candidate_ns"]), 9_000_000)  # the sleep is inside the clock

    def test_iterations_cap_the_pairs(self):
        r = Recorder()
        out = time_pairs(r.reference, r.candidate, {"warmup": 0, "iterations": 7,
                                                    "min_iterations": 2, "max_seconds": 100},
                         r.repoison, r.scrub)
        self.assertEqual(len(out["reference_ns"]), 7)


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
