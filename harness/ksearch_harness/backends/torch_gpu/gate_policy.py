"""Which callee is timed behind the gate, call by call (timing.py): a pure bookkeeping class, so
that the rules are tested without a GPU (tests/test_gate_policy.py).

Rust's cross-check of the two clocks (crates/eval/src/gpu_checks.rs) flags a candidate whose gap
between its host time and its event time exceeds the reference's gap by more than 50 us. A gated
call's gap holds its launch path (the device waited behind the gate until the host had enqueued
the call); an ungated call's does not (the device ran the work while the host launched it). So:

- the candidate's gate expires (the call waits for the device, or fills the launch queue): both
  callees are timed without the gate from then on. The candidate must not keep a margin as wide
  as the gated reference's launch path (200-270 us for rmsnorm_llm's seven torch ops) when its
  own gap no longer holds one: a candidate that synchronises on purpose would widen the check.
- the reference's gate expires (a reference that reads a value back to the host: the first
  gqa_paged_decode reference, which tasks snapshotted in runs still carry): only the reference
  goes ungated. The candidate stays behind its gate while its launch path is short, so its times
  stay its device time and not a ~20 us floor of ctypes launches that a search then chases
  (gqa_paged_decode, harness 0.4.0: every candidate at 22-25 us on a 102-token workload, the
  launch path alone 38 us). Its gap is then its launch path plus the synchronise against the
  reference's synchronise alone, so the cross-check holds only while the candidate's launch path
  stays under the check's 50 us slack: once the median of its gated launch paths so far (at
  least MIN_LAUNCH_SAMPLES of them) exceeds MIXED_LAUNCH_LIMIT_NS, it is timed without the gate
  too, as before, and the record says why. Calls before that are gated.
"""

import statistics

# Below the cross-check's 50 us slack (gpu_checks.rs HOST_GAP_SLACK_NS), with room for the
# synchronise's jitter: a ctypes launch of one or two kernels takes 30-40 us on the H200.
MIXED_LAUNCH_LIMIT_NS = 42_000
# Gated launch paths seen before deciding: the first call after the correctness trials is slow
# (harness 0.4.1 decided on it alone; a one-op Python add's first gated launch took 187 us on
# the H200, its later ones a fraction of that), so the median needs a few.
MIN_LAUNCH_SAMPLES = 3
CALLEES = ("candidate", "reference")


class GatePolicy:
    """Per callee: whether its next call is gated, and the record's `gate` line."""

    def __init__(self, available, note=None):
        self.gated = {who: available for who in CALLEES}
        self.state = {who: ("gated" if available else f"unavailable: {note}") for who in CALLEES}
        self._launches = []  # the candidate's gated launch paths (ns), warm-up calls included
        self._mixed_from = None  # the call at which the reference's gate expired

    def expired(self, who, k, limit_ms):
        """`who`'s gate opened itself at call k: that call, and later ones, without a gate."""
        self.gated[who] = False
        self.state[who] = (f"expired at call {k}: the call could not be enqueued behind a closed "
                           f"gate within {limit_ms:g} ms (it waits for the device, or fills the "
                           f"launch queue); timed without the gate from then on")
        if who == "candidate":
            if self.state["reference"] == "gated":
                self.state["reference"] = (f"off from call {k}: the candidate's gate expired, "
                                           f"and both are timed alike")
            self.gated["reference"] = False
        else:
            self._mixed_from = k
            self._check_candidate(k)

    def launched(self, who, k, enqueue_ns):
        """A gated call of `who` at call k took `enqueue_ns` from h0 until the gate opened."""
        if who != "candidate" or not self.gated["candidate"]:
            return
        self._launches.append(enqueue_ns)
        if self._mixed_from is not None:
            self._check_candidate(k)

    def _check_candidate(self, k):
        if not self.gated["candidate"] or len(self._launches) < MIN_LAUNCH_SAMPLES:
            return
        median = statistics.median(self._launches)
        if median > MIXED_LAUNCH_LIMIT_NS:
            self.gated["candidate"] = False
            self.state["candidate"] = (
                f"off from call {k}: the reference's gate expired at call {self._mixed_from}, and "
                f"the candidate's launch path (median {median / 1e3:.1f} us) is too long for the "
                f"clocks' cross-check beside an ungated reference (over "
                f"{MIXED_LAUNCH_LIMIT_NS / 1e3:g} us); both are timed alike")
        elif self.state["candidate"] == "gated":
            self.state["candidate"] = (
                f"gated (the reference's gate expired at call {self._mixed_from}; the candidate's "
                f"launch path, median {median / 1e3:.1f} us, stays under "
                f"{MIXED_LAUNCH_LIMIT_NS / 1e3:g} us)")
