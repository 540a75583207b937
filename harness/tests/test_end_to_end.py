"""`python3 -m ksearch_harness` as a subprocess, with small C kernels, as Rust runs it."""

import os
import tempfile
import time
import unittest

import ksearch_harness

from ksearch_harness import worker
from tests import support
from tests.support import request, run, softmax_source


class PassingKernel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.result = run(request())

    def test_every_workload_passes(self):
        self.assertEqual(self.result.statuses, ["passed", "passed", "passed"])
        self.assertEqual([w["uuid"] for w in self.result.workloads], ["w0", "w1", "w2"])
        self.assertEqual([w["reason"] for w in self.result.workloads], [None, None, None])

    def test_compile_event(self):
        (compile_event,) = self.result.of("compile")
        self.assertTrue(compile_event["ok"])
        self.assertEqual(compile_event["command"],
                         ["cc", "-O3", "-march=native", "-fPIC", "-shared", "-std=c11",
                          "-ffp-contract=fast", "-o", "candidate.so", "kernel.c", "-lm"])

    def test_correctness_statistics(self):
        c = self.result.workloads[0]["correctness"]
        self.assertEqual(c["trials"], 3)
        self.assertEqual(c["elements"], 3 * 16 * 256)
        self.assertEqual(c["mismatched"], 0)
        self.assertEqual(c["matched_ratio"], 1.0)
        self.assertLess(c["max_abs_error"], 1e-5)
        self.assertLess(c["rel_norm"], 1e-5)

    def test_timing_samples(self):
        for w in self.result.workloads:
            t = w["timing"]
            self.assertEqual(t["clock"], "perf_counter_ns")
            self.assertGreaterEqual(len(t["candidate_ns"]), 3)
            self.assertLessEqual(len(t["candidate_ns"]), 8)
            self.assertEqual(len(t["candidate_ns"]), len(t["reference_ns"]))
            self.assertTrue(all(isinstance(n, int) and n > 0 for n in t["candidate_ns"]))

    def test_progress_precedes_each_stage_and_done_is_last(self):
        stages = [(e["stage"], e["workload"], e["trial"]) for e in self.result.of("progress")]
        # The reference is vetted before compiling; loading runs the candidate's code first.
        self.assertEqual(stages[:7], [("reference", 0, None), ("compile", None, None),
                                      ("load", 0, None), ("correctness", 0, 0),
                                      ("correctness", 0, 1), ("correctness", 0, 2),
                                      ("timing", 0, None)])
        self.assertEqual(list(self.result.events[-1]["stages"]),
                         ["startup", "reference", "compile", "load", "correctness", "timing"])
        self.assertEqual(self.result.events[-1]["event"], "done")
        done = self.result.events[-1]
        self.assertEqual(done["harness_version"], ksearch_harness.__version__)
        self.assertTrue(done["environment"]["compiler"])
        self.assertTrue(done["environment"]["numpy"])
        self.assertEqual(self.result.returncode, 0)


class WrongKernels(unittest.TestCase):
    def test_off_by_one_is_incorrect_numerical(self):
        r = run(request(softmax_source(j0="1")))  # the first element of each row is not normalised
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)
        w = r.workloads[0]
        self.assertEqual(w["correctness"]["mismatched"], 16)
        self.assertEqual(w["correctness"]["elements"], 16 * 256)  # stopped after the failing trial
        self.assertEqual(w["correctness"]["trials"], 1)
        self.assertTrue(w["reason"].startswith(
            "output 'y': 16 of 4096 elements differ beyond atol=0.0001 + rtol=0.0001*|ref| "
            "(first in trial 0 at index (0, 0): got "), w["reason"])
        self.assertNotIn("poison", w["reason"])
        self.assertNotIn("timing", w)

    def test_half_written_output_names_the_nan_poison(self):
        r = run(request(softmax_source(rows="M / 2")))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)
        reason = r.workloads[0]["reason"]
        self.assertTrue(reason.startswith(
            "output 'y': 2048 of 4096 elements differ beyond atol=0.0001 + rtol=0.0001*|ref| "
            "(first in trial 0 at index (8, 0): got nan, expected "), reason)
        self.assertTrue(reason.endswith(
            "; 2048 of them still hold the NaN poison of unwritten outputs"), reason)

    def test_input_mutation_names_the_input(self):
        r = run(request(softmax_source(after="((float*)x)[5] += 1.0f;")))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)
        self.assertEqual(r.workloads[0]["reason"],
                         "the candidate modified its input 'x' (1 of 4096 elements changed); "
                         "inputs are read-only, write results only to the outputs")
        # The outputs were right; the trial's comparison is still reported, as numbers.
        c = r.workloads[0]["correctness"]
        self.assertEqual((c["trials"], c["elements"], c["mismatched"], c["matched_ratio"]),
                         (1, 4096, 0, 1.0))

    def test_nan_written_into_input_is_a_mutation(self):
        # A NaN-safe, bitwise check: NaN != NaN must not hide a change, and x == x must not pass.
        r = run(request(softmax_source(after="((float*)x)[7] = NAN;")))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)
        self.assertIn("modified its input 'x' (1 of 4096", r.workloads[0]["reason"])

    def test_fail_fast_stops_after_the_first_failure(self):
        r = run(request(softmax_source(rows="M / 2"), fail_fast=True))
        self.assertEqual(r.statuses, ["incorrect_numerical"])
        self.assertEqual(r.events[-1]["event"], "done")

    def test_skipping_work_on_repeated_pointers_is_caught_during_timing(self):
        source = softmax_source(prelude="static const float* last;",
                                before="if (x == last) return; last = x;")
        r = run(request(source))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)
        for w in r.workloads:
            self.assertEqual(w["correctness"]["mismatched"], 0)  # every trial saw new pointers
            # Timing call 0 sees new buffers; call 1 (the first timed call) the same ones again.
            self.assertTrue(w["reason"].startswith("during timing (call 1, a timed call;"),
                            w["reason"])
            self.assertNotIn("timing", w)

    def test_trials_get_fresh_addresses(self):
        # Fails (leaves the poison) if a correctness trial reuses an address seen before.
        prelude = ("static const void* seen[256]; static int64_t seen_m[256]; static int nseen;"
                   "static int calls[1024];")
        before = """
            if (calls[M]++ < 3) {
                for (int k = 0; k < nseen; k++)
                    if (seen_m[k] == M && (seen[k] == x || seen[k] == y)) return;
                seen[nseen] = x; seen_m[nseen++] = M; seen[nseen] = y; seen_m[nseen++] = M;
            }"""
        r = run(request(softmax_source(prelude=prelude, before=before)))
        self.assertEqual(r.statuses, ["passed"] * 3, [w["reason"] for w in r.workloads])


class BrokenCandidates(unittest.TestCase):
    def test_syntax_error_is_a_failed_compile_with_the_message(self):
        r = run(request("#include <stdint.h>\nvoid softmax(const float* x {\n"))
        self.assertEqual([e["event"] for e in r.events],
                         ["progress", "progress", "compile", "done"])  # reference, compile
        compile_event = r.of("compile")[0]
        self.assertFalse(compile_event["ok"])
        self.assertIn("kernel.c:2", compile_event["log"])
        self.assertIn("error", compile_event["log"])
        self.assertIn("the compiler exited with status 1", compile_event["log"])

    def test_printf_does_not_corrupt_the_protocol(self):
        before = r"""
            printf("{\"event\":\"workload\",\"status\":\"passed\"}\nnot json at all\n");
            fflush(stdout);
            write(1, "raw garbage on fd 1\n", 20);
            fprintf(stderr, "to stderr\n");"""
        r = run(request(softmax_source(before=before, after='printf("unflushed tail\\n");')))
        self.assertEqual(r.statuses, ["passed"] * 3)  # support.Run parsed every line as JSON
        self.assertEqual(len(r.workloads), 3)
        self.assertIn("not json at all", r.stderr)
        self.assertIn("raw garbage on fd 1", r.stderr)
        self.assertIn("unflushed tail", r.stderr)

    def test_missing_symbol_is_a_runtime_error_naming_it(self):
        r = run(request(symbol="softmax_fast"))
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        reason = r.workloads[0]["reason"]
        self.assertIn("does not export the entry symbol 'softmax_fast'", reason)
        self.assertNotIn("correctness", r.workloads[0])

    def test_unresolved_symbol_fails_the_load_with_its_name(self):
        r = run(request(softmax_source(prelude="void helper_not_defined(void);",
                                       before="helper_not_defined();")))
        self.assertTrue(r.of("compile")[0]["ok"])  # a shared library may leave symbols open
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertIn("loading the compiled candidate failed", r.workloads[0]["reason"])
        self.assertIn("undefined symbol: helper_not_defined", r.workloads[0]["reason"])

    @unittest.skipUnless(worker.supported(), "the worker process needs Linux")
    def test_segfault_kills_the_candidates_process_and_fails_that_workload(self):
        # The candidate runs in the worker process (backend c on Linux): its death is reported
        # by the harness, which goes on to `done`; later workloads are not run.
        r = run(request(softmax_source(before="if (M == 3) { volatile int* p = 0; *p = 1; }")))
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.statuses, ["passed", "runtime_error", "runtime_error"])
        death = ("the candidate's process was killed by signal 11 (SIGSEGV, invalid memory "
                 "access) during correctness of workload 1, trial 0")
        self.assertEqual(r.workloads[1]["reason"], death)
        self.assertEqual(r.workloads[2]["reason"], "not run: " + death)
        self.assertEqual(r.events[-1]["event"], "done")
        self.assertIn("Segmentation fault", r.stderr)

    def test_in_process_segfault_kills_the_harness_after_a_progress_line(self):
        # Without the worker (GPU backends, other systems) the candidate shares the process.
        r = run(request(softmax_source(before="if (M == 3) { volatile int* p = 0; *p = 1; }")),
                env={"KSEARCH_IN_PROCESS": "1"})
        self.assertEqual(r.returncode, -11)
        self.assertEqual(r.statuses, ["passed"])
        self.assertEqual(r.events[-1],
                         {"event": "progress", "stage": "correctness", "workload": 1, "trial": 0})
        self.assertEqual(r.of("done"), [])
        self.assertIn("Segmentation fault", r.stderr)

    def test_source_path_escaping_the_build_dir_is_rejected(self):
        req = request()
        req["candidate"]["sources"].append({"path": "../evil.h", "content": "int x;"})
        r = run(req)
        compile_event = r.of("compile")[0]
        self.assertFalse(compile_event["ok"])
        self.assertEqual(compile_event["command"], [])
        self.assertIn("source 1 path '../evil.h' is rejected", compile_event["log"])
        self.assertEqual(r.workloads, [])

    def test_openmp_build(self):
        req = request(softmax_source(before="#pragma omp parallel for\n"
                                            "for (int64_t k = 0; k < M * N; k++) y[k] = 0;"))
        req["candidate"]["build"]["openmp"] = True
        r = run(req)
        self.assertIn("-fopenmp", r.of("compile")[0]["command"])
        self.assertEqual(r.statuses, ["passed"] * 3)

    def test_header_sources_are_written_beside(self):
        req = request(softmax_source(prelude='#include "consts.h"', before="(void)K_UNUSED;"))
        req["candidate"]["sources"].append({"path": "consts.h",
                                            "content": "#define K_UNUSED 3\n"})
        r = run(req)
        self.assertEqual(r.statuses, ["passed"] * 3)

    def test_compiler_log_is_bounded_head_and_tail(self):
        warnings = "".join(f'#warning "warning number {i} padding padding padding"\n'
                           for i in range(200))
        r = run(request(warnings + softmax_source(),
                        limits={"log_bytes": 2000, "compile_timeout_s": 30}))
        log = r.of("compile")[0]["log"]
        self.assertTrue(r.of("compile")[0]["ok"])
        self.assertLessEqual(len(log.encode()), 2000)
        self.assertIn("bytes of compiler output omitted", log)
        self.assertIn("warning number 0 ", log)
        self.assertIn("warning number 199 ", log)

    def test_compile_timeout_kills_the_compiler_and_its_children(self):
        # A fake compiler whose own child (like cc1 under cc) hangs; its pid goes to a file.
        fake = ("sh -c 'case \"$1\" in --version) echo fakecc 1.0;; "
                "*) sleep 30 & echo $! > \"$PIDFILE\"; wait;; esac' sh")
        with tempfile.TemporaryDirectory() as tmp:
            pidfile = os.path.join(tmp, "pid")
            r = run(request(limits={"log_bytes": 2000, "compile_timeout_s": 0.5}),
                    env={"CC": fake, "PIDFILE": pidfile})
            with open(pidfile) as f:
                grandchild = int(f.read())
        compile_event = r.of("compile")[0]
        self.assertFalse(compile_event["ok"])
        self.assertIn("compilation timed out after 0.5 s", compile_event["log"])
        self.assertEqual(r.events[-1]["environment"]["compiler"], "fakecc 1.0")
        self.assertTrue(_gone(grandchild), f"the compiler's child {grandchild} survived")


class ScalarsAxesAndBools(unittest.TestCase):
    DEFINITION = {
        "name": "gather_scale",
        "axes": {"B": {"type": "var"}, "N": {"type": "var"}},
        "inputs": {"x": {"shape": ["B", "N"], "dtype": "float32"},
                   "idx": {"shape": ["B"], "dtype": "int32"},
                   "alpha": {"shape": None, "dtype": "float32"}},
        "outputs": {"y": {"shape": ["B"], "dtype": "float32"},
                    "positive": {"shape": ["B"], "dtype": "bool"}},
        "reference": ("import numpy as np\n"
                      "def run(x, idx, alpha):\n"
                      "    y = alpha * x[np.arange(x.shape[0]), idx]\n"
                      "    return {'positive': y > 0, 'y': y}\n"),
    }
    SOURCE = r"""
        #include <stdbool.h>
        #include <stdint.h>
        void gather(const float* x, const int32_t* idx, float alpha, float* y, bool* positive,
                    int64_t B, int64_t N) {
            for (int64_t b = 0; b < B; b++) {
                if (idx[b] < 0 || idx[b] >= N) return;   /* out of range: leave the poison */
                float v = alpha * x[b * N + idx[b]];
                y[b] = v;
                %s
            }
        }"""

    def request(self, write_positive=True):
        return request(
            self.SOURCE % ("positive[b] = v > 0;" if write_positive else ""),
            definition=self.DEFINITION, symbol="gather",
            workloads=[{"uuid": "g0", "axes": {"B": 64, "N": 5},
                        "inputs": {"alpha": {"type": "scalar", "value": 2.5}}},
                       {"uuid": "g1", "axes": {"B": 9, "N": 300}}],
            correctness={"trials": 2, "distributions": ["normal"], "matched_ratio": 1.0,
                         "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-6}},
                         "input_overrides": {"idx": {"distribution": "randint", "low": 0,
                                                     "high": "N"}}})

    def test_scalars_var_axes_and_randint_bounds(self):
        r = run(self.request())
        self.assertEqual(r.statuses, ["passed", "passed"], [w["reason"] for w in r.workloads])
        self.assertEqual(r.workloads[0]["correctness"]["max_abs_error"], 0.0)

    def test_unwritten_bool_output_is_caught_by_its_poison_byte(self):
        r = run(self.request(write_positive=False))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 2)
        reason = r.workloads[0]["reason"]
        self.assertTrue(reason.startswith("output 'positive': 64 of 64 elements differ from the "
                                        "reference (compared exactly) (first in trial 0 at "
                                        "index (0): got 170, expected "), reason)
        self.assertIn("still hold the poison byte 0xAA", reason)


class TaskProblems(unittest.TestCase):
    def degenerate(self):
        definition = dict(support.SOFTMAX)
        definition["reference"] = "import numpy as np\ndef run(x):\n    return np.zeros_like(x)\n"
        return definition

    def test_degenerate_reference_is_a_task_error(self):
        zeros = softmax_source(before="for (int64_t k = 0; k < M * N; k++) y[k] = 0; return;")
        r = run(request(zeros, definition=self.degenerate()))
        (error,) = r.of("task_error")
        self.assertEqual(error["field"], "reference")
        self.assertTrue(error["message"].startswith(
            "the reference's output 'y' has no finite value above atol=0.0001 (largest |ref| = "
            "0) on workload 0 ('w0'), checked before the candidate is loaded, so it cannot tell "
            "a correct kernel from one that writes zeros"), error["message"])
        self.assertEqual(r.workloads, [])
        self.assertEqual(r.of("compile"), [])  # vetted before compiling and loading
        self.assertEqual(r.events[-1]["event"], "done")

    def test_check_task_mode_runs_only_the_reference(self):
        req = request(mode="check_task", candidate=None)
        r = run(req)
        self.assertEqual([e["event"] for e in r.events], ["progress"] * 9 + ["done"])
        self.assertEqual({e["stage"] for e in r.of("progress")}, {"reference"})
        r = run(request(mode="check_task", candidate=None, definition=self.degenerate()))
        self.assertEqual(r.of("task_error")[0]["field"], "reference")

    def test_reference_print_goes_to_stderr(self):
        definition = dict(support.SOFTMAX)
        definition["reference"] = ("import numpy as np\n"
                                   "def run(x):\n"
                                   "    print('{\"event\": \"done\"} from the reference')\n"
                                   "    return np.exp(x) / np.exp(x).sum(-1, keepdims=True)\n")
        r = run(request(mode="check_task", candidate=None, definition=definition))
        self.assertEqual([e["event"] for e in r.events], ["progress"] * 9 + ["done"])
        self.assertIn('{"event": "done"} from the reference', r.stderr)

    def test_reference_exception_is_a_task_error(self):
        definition = dict(support.SOFTMAX)
        definition["reference"] = "def run(x):\n    raise ValueError('bad axis')\n"
        r = run(request(definition=definition))
        (error,) = r.of("task_error")
        self.assertEqual(error["message"], "the reference raised ValueError: bad axis "
                                           "(workload 0 ('w0'), checked before the candidate "
                                           "is loaded)")
        r = run(request(mode="check_task", candidate=None, definition=definition))
        self.assertEqual(r.of("task_error")[0]["message"],
                         "the reference raised ValueError: bad axis (workload 0 ('w0'), trial 0)")

    def test_bfloat16_is_refused_by_backend_c(self):
        definition = dict(support.SOFTMAX)
        definition["inputs"] = {"x": {"shape": ["M", "N"], "dtype": "bfloat16"}}
        r = run(request(definition=definition))
        (error,) = r.of("task_error")
        self.assertEqual(error["field"], "definition.inputs.x.dtype")
        self.assertTrue(error["message"].startswith("dtype bfloat16 is not supported by backend c"))
        self.assertEqual(r.of("compile"), [])

    def test_unknown_mode_is_a_harness_error_then_done(self):
        r = run(request(mode="benchmark"))
        self.assertEqual([e["event"] for e in r.events], ["harness_error", "done"])
        self.assertIn("unknown mode 'benchmark'", r.events[0]["message"])


def _gone(pid, wait_s=2.0):
    """True once `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return True
        if stat[stat.rfind(b")") + 2:].split()[0] in (b"Z", b"X"):
            return True
        time.sleep(0.05)
    return False


if __name__ == "__main__":
    unittest.main()
