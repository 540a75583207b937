"""Mode `profile` (ksearch_harness/profile.py) on the CPU: the candidate is built, loaded and called
on the request's one workload; no profiler is there to watch, so `bracketed` is false."""

import unittest

from tests.support import request, run, softmax_source


def profile_request(source=None, calls=2, workloads=None, **overrides):
    req = request(source, workloads=workloads if workloads is not None else [
        {"uuid": "big", "axes": {"M": 40}, "inputs": {}}], **overrides)
    req["mode"] = "profile"
    req["profile"] = {"calls": calls}
    return req


class ProfileMode(unittest.TestCase):
    def test_the_candidate_is_called_on_the_one_workload(self):
        # Each call of the kernel says so on stderr (the worker's stderr is the harness's).
        said = 'fprintf(stderr, "kernel called\\n"); fflush(stderr);'
        r = run(profile_request(softmax_source(before=said), calls=3))
        self.assertEqual(r.returncode, 0, r.stderr)
        (compile_event,) = r.of("compile")
        self.assertTrue(compile_event["ok"])
        (profiled,) = r.of("profiled")
        self.assertEqual(profiled, {"event": "profiled", "workload": "big", "calls": 3,
                                    "bracketed": False})
        self.assertEqual(r.events[-1]["event"], "done")
        self.assertEqual(r.of("workload"), [])  # nothing checked or timed
        self.assertEqual(r.stderr.count("kernel called"), 1 + 3)  # the warm-up and 3 calls
        stages = [e["stage"] for e in r.of("progress")]
        self.assertEqual(stages, ["compile", "load", "profile"])

    def test_a_compile_error_ends_before_any_call(self):
        r = run(profile_request("this is not C"))
        (compile_event,) = r.of("compile")
        self.assertFalse(compile_event["ok"])
        self.assertEqual(r.of("profiled"), [])
        self.assertEqual(r.events[-1]["event"], "done")

    def test_a_crashing_candidate_is_a_profile_error(self):
        r = run(profile_request(softmax_source(before="if (M > 0) { volatile int *p = 0; *p = 1; }")))
        self.assertEqual(r.of("profiled"), [])
        (error,) = r.of("profile_error")
        self.assertEqual(error["status"], "runtime_error")
        self.assertIn("SIGSEGV", error["reason"])

    def test_exactly_one_workload_and_a_bounded_call_count(self):
        two = [{"uuid": "a", "axes": {"M": 4}}, {"uuid": "b", "axes": {"M": 5}}]
        (error,) = run(profile_request(workloads=two)).of("task_error")
        self.assertEqual(error["field"], "workloads")
        for calls in (0, 11, "2", True):
            (error,) = run(profile_request(calls=calls)).of("task_error")
            self.assertEqual(error["field"], "profile.calls", calls)


if __name__ == "__main__":
    unittest.main()
