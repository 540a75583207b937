"""Which callee stays behind the gate when one's gate expires (backends/torch_gpu/gate_policy.py),
without a GPU: the rules Rust's cross-check of the clocks relies on."""

import unittest

from ksearch_harness.backends.torch_gpu.gate_policy import (MIN_LAUNCH_SAMPLES,
                                                             MIXED_LAUNCH_LIMIT_NS, GatePolicy)


class GatePolicyTests(unittest.TestCase):
    def test_both_gated_until_something_expires(self):
        p = GatePolicy(True)
        for k in range(3):
            p.launched("candidate", k, 30_000)
            p.launched("reference", k, 200_000)
        self.assertEqual(p.gated, {"candidate": True, "reference": True})
        self.assertEqual(p.state, {"candidate": "gated", "reference": "gated"})

    def test_no_gate_anywhere(self):
        p = GatePolicy(False, "no driver")
        self.assertEqual(p.gated, {"candidate": False, "reference": False})
        self.assertEqual(p.state["candidate"], "unavailable: no driver")

    def test_the_candidates_expiry_takes_both_off(self):
        p = GatePolicy(True)
        p.launched("candidate", 0, 10_000)
        p.expired("candidate", 1, 10)
        self.assertEqual(p.gated, {"candidate": False, "reference": False})
        self.assertTrue(p.state["candidate"].startswith("expired at call 1"), p.state)
        self.assertTrue(p.state["reference"].startswith("off from call 1"), p.state)

    def test_a_short_launch_path_keeps_the_candidate_gated_beside_an_expired_reference(self):
        p = GatePolicy(True)
        p.launched("candidate", 0, 35_000)
        p.expired("reference", 0, 10)
        for k in range(1, 6):
            p.launched("candidate", k, 38_000)
        self.assertEqual(p.gated, {"candidate": True, "reference": False})
        self.assertTrue(p.state["reference"].startswith("expired at call 0"), p.state)
        self.assertTrue(p.state["candidate"].startswith("gated (the reference's gate expired"),
                        p.state)

    def test_a_long_launch_path_is_timed_alike_with_the_ungated_reference(self):
        long = MIXED_LAUNCH_LIMIT_NS + 1_000
        p = GatePolicy(True)
        p.launched("candidate", 0, long)
        p.expired("reference", 0, 10)
        for k in range(1, MIN_LAUNCH_SAMPLES - 1):
            p.launched("candidate", k, long)
            self.assertTrue(p.gated["candidate"], (k, p.state))  # too few samples to decide
        p.launched("candidate", MIN_LAUNCH_SAMPLES - 1, long)
        self.assertEqual(p.gated, {"candidate": False, "reference": False})
        self.assertIn("too long for the clocks' cross-check", p.state["candidate"])

    def test_a_slow_first_launch_alone_does_not_decide(self):
        # Harness 0.4.1 on the H200: the first gated call took 187 us, and alone it took the
        # candidate off the gate.
        p = GatePolicy(True)
        p.launched("candidate", 0, 187_000)
        p.expired("reference", 0, 10)
        self.assertTrue(p.gated["candidate"], p.state)
        p.launched("candidate", 1, 20_000)
        p.launched("candidate", 2, 21_000)
        self.assertTrue(p.gated["candidate"], p.state)
        self.assertTrue(p.state["candidate"].startswith("gated (the reference's gate expired"),
                        p.state)

    def test_the_median_decides_not_one_slow_launch(self):
        p = GatePolicy(True)
        p.expired("reference", 0, 10)  # expired before the candidate's first gated call ended
        p.launched("candidate", 1, 20_000)
        p.launched("candidate", 2, 20_000)
        p.launched("candidate", 3, 5 * MIXED_LAUNCH_LIMIT_NS)  # one outlier
        self.assertTrue(p.gated["candidate"], p.state)
        for k in range(4, 8):
            p.launched("candidate", k, 2 * MIXED_LAUNCH_LIMIT_NS)  # then slower for good
        self.assertFalse(p.gated["candidate"], p.state)
        self.assertTrue(p.state["candidate"].startswith("off from call"), p.state)
        # Once off, it stays off: later launches are not recorded as gated ones.
        p.launched("candidate", 9, 1_000)
        self.assertFalse(p.gated["candidate"])

    def test_the_references_launches_do_not_count(self):
        p = GatePolicy(True)
        p.launched("reference", 0, 10 * MIXED_LAUNCH_LIMIT_NS)
        p.launched("candidate", 0, 30_000)
        p.expired("reference", 1, 10)
        self.assertTrue(p.gated["candidate"], p.state)


if __name__ == "__main__":
    unittest.main()
