"""Hacks and failures the harness must attribute correctly, end to end with small C kernels.

Each test names the rule it guards (docs/protocol.md): fresh input contents for every timed call
and every call checked; the candidate's load as a candidate stage; the reference vetted before
the candidate loads; memory exhaustion after the candidate ran counted against it; workloads too
large to exist rejected as task errors.
"""

import copy
import unittest

from ksearch_harness import worker
from tests import support
from tests.support import matmul_request, request, run, softmax_source

# Timing settings like the tasks' defaults (warm-up 3, then timed pairs), with a budget large
# enough that every one of the 11 calls runs.
TIMING = {"warmup": 3, "iterations": 8, "min_iterations": 8, "max_seconds": 30.0}
CALLS = TIMING["warmup"] + TIMING["iterations"]


class EveryTimedCallIsChecked(unittest.TestCase):
    def test_output_cache_keyed_on_pointers_is_caught(self):
        # Correctness trials get fresh addresses (cache misses); timing reuses the buffers, so a
        # pointer-keyed cache would serve every timed call after the first from memory.
        prelude = "static const float *kA, *kB; static float* kC; static int64_t kn;"
        body = """
            size_t bytes = (size_t)(M * N) * sizeof(float);
            if (kC && A == kA && B == kB && M * N == kn) { memcpy(C, kC, bytes); return; }
            compute(A, B, C, M, K, N);
            free(kC); kC = malloc(bytes); memcpy(kC, C, bytes);
            kA = A; kB = B; kn = M * N;"""
        r = run(matmul_request(prelude, body, timing=TIMING))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 2)
        for w in r.workloads:
            self.assertEqual(w["correctness"]["mismatched"], 0)
            self.assertNotIn("timing", w)
            self.assertTrue(w["reason"].startswith("during timing (call 1, a warm-up call;"),
                            w["reason"])
            self.assertIn("are results cached, or work skipped, on repeated calls?", w["reason"])
            self.assertIn("output 'C': ", w["reason"])
            self.assertIn("(first in call 1 at index (0, 0)", w["reason"])

    def test_call_counting_kernel_that_computes_only_the_checked_calls_is_caught(self):
        # Computes on the first call with new pointers and on the last call of the timing stage
        # (the only one the harness used to check); every other call returns at once.
        prelude = f"static const float *pA, *pB; static float* pC; static int count;"
        body = f"""
            if (A == pA && B == pB && C == pC) count++;
            else {{ pA = A; pB = B; pC = C; count = 0; }}
            if (count == 0 || count == {CALLS - 1}) compute(A, B, C, M, K, N);"""
        r = run(matmul_request(prelude, body, timing=TIMING))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 2)
        reason = r.workloads[0]["reason"]
        self.assertTrue(reason.startswith("during timing (call 1, a warm-up call;"), reason)
        self.assertIn("still hold the NaN poison of unwritten outputs", reason)

    def skip_one(self, timing_call):
        # Workload m0 (M = 24) gets 3 correctness calls, then timing calls 0, 1, ...
        body = f"""
            if (M == 24 && ++calls == {3 + 1 + timing_call}) return;
            compute(A, B, C, M, K, N);"""
        return run(matmul_request("static int calls;", body, timing=TIMING))

    def test_one_skipped_timed_call_in_the_middle_is_caught(self):
        r = self.skip_one(5)
        self.assertEqual(r.statuses, ["incorrect_numerical", "passed"])
        self.assertTrue(r.workloads[0]["reason"].startswith("during timing (call 5, a timed call;"),
                        r.workloads[0]["reason"])

    def test_one_skipped_warm_up_call_is_caught(self):
        r = self.skip_one(0)
        self.assertEqual(r.statuses, ["incorrect_numerical", "passed"])
        self.assertTrue(r.workloads[0]["reason"].startswith("during timing (call 0, a warm-up "
                                                            "call;"), r.workloads[0]["reason"])

    def test_every_call_gets_input_contents_no_call_had_before(self):
        # Hashes A and B on every call (trials and timing, both workloads); a repeat leaves the
        # poison. Passes only if no two calls of the evaluation see the same contents.
        prelude = r"""
            #include <stdio.h>
            static uint64_t seen[4096]; static int nseen;
            static uint64_t fnv(const void* p, size_t n, uint64_t h) {
                const unsigned char* b = p;
                for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
                return h;
            }"""
        body = r"""
            uint64_t h = fnv(A, (size_t)(M * K) * 4, 14695981039346656037ull);
            h = fnv(B, (size_t)(K * N) * 4, h);
            for (int i = 0; i < nseen; i++)
                if (seen[i] == h) { fprintf(stderr, "repeated contents\n"); return; }
            if (nseen < 4096) seen[nseen++] = h;
            compute(A, B, C, M, K, N);"""
        r = run(matmul_request(prelude, body, timing=TIMING))
        self.assertEqual(r.statuses, ["passed", "passed"], [w["reason"] for w in r.workloads])
        self.assertNotIn("repeated contents", r.stderr)
        self.assertEqual([len(w["timing"]["candidate_ns"]) for w in r.workloads], [8, 8])

    def test_input_contents_change_for_integer_and_scalar_inputs_too(self):
        # A gather with an int32 index input (randint override bounded by an axis) and a random
        # float scalar: each timed call must still see valid indices, and new contents.
        definition = {
            "name": "gather_scale",
            "axes": {"B": {"type": "var"}, "N": {"type": "var"}},
            "inputs": {"x": {"shape": ["B", "N"], "dtype": "float32"},
                       "idx": {"shape": ["B"], "dtype": "int32"},
                       "alpha": {"shape": None, "dtype": "float32"}},
            "outputs": {"y": {"shape": ["B"], "dtype": "float32"}},
            "reference": ("import numpy as np\n"
                          "def run(x, idx, alpha):\n"
                          "    return alpha * x[np.arange(x.shape[0]), idx]\n"),
        }
        source = r"""
            #include <stdint.h>
            #include <stdio.h>
            static float last_alpha; static int32_t last_idx0 = -1; static int calls;
            void gather(const float* x, const int32_t* idx, float alpha, float* y,
                        int64_t B, int64_t N) {
                for (int64_t b = 0; b < B; b++)
                    if (idx[b] < 0 || idx[b] >= N) { fprintf(stderr, "bad index\n"); return; }
                if (calls++ > 0 && alpha == last_alpha) fprintf(stderr, "same alpha\n");
                last_alpha = alpha;
                for (int64_t b = 0; b < B; b++) y[b] = alpha * x[b * N + idx[b]];
            }"""
        r = run(request(source, definition=definition, symbol="gather",
                        workloads=[{"uuid": "g0", "axes": {"B": 64, "N": 7}}],
                        timing=TIMING,
                        correctness={"trials": 2, "distributions": ["normal"],
                                     "matched_ratio": 1.0,
                                     "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-6}},
                                     "input_overrides": {"idx": {"distribution": "randint",
                                                                 "low": 0, "high": "N"}}}))
        self.assertEqual(r.statuses, ["passed"], [w["reason"] for w in r.workloads])
        self.assertNotIn("bad index", r.stderr)
        self.assertNotIn("same alpha", r.stderr)

    def test_input_mutated_during_timing_only_is_caught(self):
        body = """
            compute(A, B, C, M, K, N);
            if (M == 24 && ++calls == 6) ((float*)A)[3] += 1.0f;"""
        r = run(matmul_request("static int calls;", body, timing=TIMING))
        self.assertEqual(r.statuses, ["incorrect_numerical", "passed"])
        self.assertEqual(r.workloads[0]["reason"],
                         "during timing (call 2, a warm-up call), the candidate modified its "
                         "input 'A' (1 of 960 elements changed); inputs are read-only, write "
                         "results only to the outputs")

    def test_outputs_written_late_by_another_thread_do_not_count(self):
        # The call returns at once and a thread writes C 2 ms later, while the (slowed) reference
        # runs: the outputs are taken as the call left them, so the poison is still there.
        source = r"""
            #define _POSIX_C_SOURCE 200809L
            #include <pthread.h>
            #include <stdint.h>
            #include <time.h>
            static struct { const float *A, *B; float* C; int64_t M, K, N; } job;
            static void* later(void* arg) {
                (void)arg;
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, 0);
                for (int64_t i = 0; i < job.M; i++)
                    for (int64_t j = 0; j < job.N; j++) {
                        float acc = 0.0f;
                        for (int64_t k = 0; k < job.K; k++)
                            acc += job.A[i * job.K + k] * job.B[k * job.N + j];
                        job.C[i * job.N + j] = acc;
                    }
                return 0;
            }
            void matmul(const float* A, const float* B, float* C, int64_t M, int64_t K,
                        int64_t N) {
                job.A = A; job.B = B; job.C = C; job.M = M; job.K = K; job.N = N;
                pthread_t t;
                pthread_create(&t, 0, later, 0);
                pthread_detach(t);
            }"""
        definition = copy.deepcopy(support.MATMUL)
        definition["reference"] = ("import time\n" + definition["reference"]).replace(
            "    return", "    time.sleep(0.02)\n    return")
        req = matmul_request(timing=TIMING, definition=definition)
        req["candidate"]["sources"][0]["content"] = source
        req["candidate"]["build"]["extra_flags"] = ["-pthread"]
        r = run(req)
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 2)
        reason = r.workloads[0]["reason"]
        self.assertTrue(reason.startswith("output 'C': 384 of 384 elements differ"), reason)
        self.assertIn("still hold the NaN poison", reason)

    def test_reference_results_are_never_in_memory_before_the_candidate_runs(self):
        # Scans the heap on every call for the reference's float64 result of *these* inputs
        # (row 0, elements 16..23) and reports a hit on stderr. The candidate runs before the
        # reference on every input contents, so no hit may ever happen.
        definition = copy.deepcopy(support.SOFTMAX)
        definition["reference"] = (
            "import numpy as np\n"
            "def run(x):\n"
            "    x = np.asarray(x, dtype=np.float64)\n"
            "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
            "    y = e / e.sum(axis=-1, keepdims=True)\n"
            "    return y.astype(np.float32)\n")
        prelude = r"""
            #include <malloc.h>
            static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }
            static void peek(const float* x, int64_t N) {
                double m = x[0], s = 0, want[8];
                for (int64_t j = 1; j < N; j++) if (x[j] > m) m = x[j];
                for (int64_t j = 0; j < N; j++) s += exp((double)x[j] - m);
                for (int k = 0; k < 8; k++) want[k] = exp((double)x[16 + k] - m) / s;
                struct mallinfo2 mi = mallinfo2();
                const char *top = sbrk(0), *lo = top - mi.arena;
                for (const double* p = (const double*)lo; (const char*)(p + 24) < top; p++) {
                    int k = 0;
                    while (k < 8 && near(p[16 + k], want[k])) k++;
                    if (k == 8) { dprintf(2, "peek: hit\n"); return; }
                }
            }"""
        source = softmax_source(prelude=prelude, before="peek(x, N);")
        source = "#define _GNU_SOURCE\n" + source
        r = run(request(source, definition=definition, timing=TIMING,
                        workloads=[{"uuid": "w0", "axes": {"M": 16}},
                                   {"uuid": "w1", "axes": {"M": 40}}]))
        self.assertEqual(r.statuses, ["passed", "passed"], [w["reason"] for w in r.workloads])
        self.assertNotIn("peek: hit", r.stderr)


class CandidateLoad(unittest.TestCase):
    CTOR = r"""
        #include <stdint.h>
        #include <stdlib.h>
        __attribute__((constructor)) static void boom(void) { %s }
        void softmax(const float* x, float* y, int64_t M) {}
    """

    @unittest.skipUnless(worker.supported(), "the worker process needs Linux")
    def test_crash_in_a_constructor_happens_during_stage_load(self):
        r = run(request(self.CTOR % "__builtin_trap();"))
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.of("compile")[0]["ok"])
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertEqual(r.workloads[0]["reason"],
                         "not run: the candidate's process was killed by signal 4 (SIGILL, "
                         "illegal instruction) during load of workload 0")
        self.assertEqual(r.events[-1]["event"], "done")

    def test_in_process_crash_in_a_constructor_happens_during_stage_load(self):
        r = run(request(self.CTOR % "__builtin_trap();"), env={"KSEARCH_IN_PROCESS": "1"})
        self.assertEqual(r.returncode, -4)  # SIGILL
        self.assertTrue(r.of("compile")[0]["ok"])
        self.assertEqual(r.events[-1],
                         {"event": "progress", "stage": "load", "workload": 0, "trial": None})
        self.assertEqual(r.of("done"), [])

    @unittest.skipUnless(worker.supported(), "the worker process needs Linux")
    def test_exit_in_a_constructor_happens_during_stage_load(self):
        r = run(request(self.CTOR % "exit(3);"))
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.workloads[0]["reason"],
                         "not run: the candidate's process exited with code 3 during load of "
                         "workload 0 (a kernel returns; it does not end its process)")
        r = run(request(self.CTOR % "exit(3);"), env={"KSEARCH_IN_PROCESS": "1"})
        self.assertEqual(r.returncode, 3)
        self.assertEqual(r.events[-1],
                         {"event": "progress", "stage": "load", "workload": 0, "trial": None})

    def test_reference_is_vetted_before_the_candidate_is_loaded(self):
        definition = copy.deepcopy(support.SOFTMAX)
        definition["reference"] = "def run(x):\n    raise ValueError('bad axis')\n"
        r = run(request(self.CTOR % "__builtin_trap();", definition=definition))
        self.assertEqual(r.returncode, 0)
        self.assertEqual([e["event"] for e in r.events], ["progress", "task_error", "done"])
        self.assertEqual(r.events[0], {"event": "progress", "stage": "reference", "workload": 0,
                                       "trial": None})
        self.assertEqual(r.of("task_error")[0]["message"],
                         "the reference raised ValueError: bad axis (workload 0 ('w0'), checked "
                         "before the candidate is loaded)")


class MemoryAfterTheCandidateRan(unittest.TestCase):
    # Takes every block of 1 MiB or more that the address space still has, and keeps it.
    HOG = r"""
        static int grabbed;
        static void hog(void) {
            if (grabbed) return;
            grabbed = 1;
            for (size_t size = (size_t)1 << 32; size >= ((size_t)1 << 20); )
                if (!malloc(size)) size /= 2;
        }"""

    @unittest.skipUnless(worker.supported(), "the worker process needs Linux")
    def test_memory_hog_in_the_worker_is_the_candidates_runtime_error(self):
        # The candidate's process has its own address space (and limit): the hog starves only
        # it, and the next arena the harness shares with it cannot be mapped.
        source = softmax_source(prelude="#include <stdlib.h>\n" + self.HOG, before="hog();")
        r = run(request(source, workloads=[{"uuid": "big", "axes": {"M": 4096}},
                                           {"uuid": "w1", "axes": {"M": 2048}}]),
                address_space=2 << 30)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.of("task_error") + r.of("harness_error"), [])
        self.assertEqual(r.statuses, ["runtime_error", "runtime_error"])
        reason = r.workloads[0]["reason"]
        self.assertTrue(reason.startswith("the candidate's process could not map 4194304 bytes "
                                          "of shared memory for its arrays during correctness "
                                          "of workload 0, trial 1: Cannot allocate memory"),
                        reason)
        self.assertEqual(r.events[-1]["event"], "done")

    def test_memory_hog_is_the_candidates_runtime_error_not_a_task_error(self):
        source = softmax_source(prelude="#include <stdlib.h>\n" + self.HOG, before="hog();")
        r = run(request(source, workloads=[{"uuid": "big", "axes": {"M": 4096}},
                                           {"uuid": "w1", "axes": {"M": 2048}}]),
                address_space=2 << 30, env={"KSEARCH_IN_PROCESS": "1"})
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.of("task_error"), [])
        self.assertEqual(r.of("harness_error"), [])
        self.assertEqual(r.statuses, ["runtime_error", "runtime_error"])
        reason = r.workloads[0]["reason"]
        self.assertTrue(reason.startswith("the process ran out of memory (MemoryError in the "),
                        reason)
        self.assertIn("after the candidate had run in this process: most likely the candidate's "
                      "own allocations used up the evaluation's address-space limit of 2 GiB "
                      "(ksearch eval --memory-limit)", reason)
        self.assertIn("this workload's inputs and outputs take 8 MiB", reason)
        self.assertNotIn("correctness", r.workloads[0])
        self.assertEqual(r.events[-1]["event"], "done")

    def test_reference_raising_after_the_candidate_ran_counts_against_the_candidate(self):
        definition = copy.deepcopy(support.SOFTMAX)
        definition["reference"] = definition["reference"].replace(
            "def run(x):\n", "def run(x):\n    if x.shape[0] == 3:\n"
                             "        raise ValueError('rows')\n")
        r = run(request(definition=definition))
        self.assertEqual(r.of("task_error"), [])
        self.assertEqual(r.statuses, ["passed", "runtime_error", "passed"])
        self.assertEqual(r.workloads[1]["reason"],
                         "the reference raised ValueError: rows (workload 1 ('w1'), trial 0) "
                         "after the candidate had run in this process; this counts against the "
                         "candidate, which may have corrupted the process's state (the reference "
                         "ran cleanly on workload 0 before the candidate was loaded; check_task "
                         "mode runs the reference alone)")


class HugeWorkloads(unittest.TestCase):
    def definition(self):
        definition = copy.deepcopy(support.SOFTMAX)
        definition["axes"]["N"] = {"type": "var"}
        return definition

    def test_axes_too_large_to_exist_are_a_task_error_before_anything_runs(self):
        workloads = [{"uuid": "ok", "axes": {"M": 4, "N": 256}},
                     {"uuid": "huge", "axes": {"M": 4_000_000, "N": 8_000_000}}]
        for mode in ("evaluate", "check_task"):
            r = run(request(definition=self.definition(), workloads=workloads, mode=mode))
            self.assertEqual([e["event"] for e in r.events], ["task_error", "done"], mode)
            error = r.of("task_error")[0]
            self.assertEqual(error["field"], "workloads[1].axes")
            self.assertEqual(error["message"],
                             "workload 1 ('huge') needs 233 TiB for one copy of its inputs and "
                             "outputs ('x' 116 TiB, 'y' 116 TiB), more than the 64 GiB the "
                             "harness allows one workload when no address-space limit is set; "
                             "the harness holds several copies, so reduce the workload's axes")

    def test_a_workload_above_the_address_space_limit_is_a_task_error(self):
        # 2 * 1.5M * 256 * 4 bytes = 3 GiB under a 2 GiB limit.
        workloads = [{"uuid": "big", "axes": {"M": 1_572_864, "N": 256}}]
        r = run(request(definition=self.definition(), workloads=workloads),
                address_space=2 << 30)
        (error,) = r.of("task_error")
        self.assertEqual(error["field"], "workloads[0].axes")
        self.assertTrue(error["message"].startswith(
            "workload 0 ('big') needs 3 GiB for one copy of its inputs and outputs ('x' 1.5 GiB, "
            "'y' 1.5 GiB), more than the "), error["message"])
        self.assertIn("left below the evaluation's address-space limit of 2 GiB "
                      "(ksearch eval --memory-limit)", error["message"])

    def test_a_workload_the_device_cannot_hold_at_once_is_refused_before_it_runs(self):
        # The torch GPU backend counts what it holds at once (test_memory_peak.py measures it):
        # with 3 trials, 9 copies of a one-input one-output workload's tensor. A device with
        # room for 8.5 refuses the workload up front, naming the count; one with 9.5 takes it.
        # (The cuda backend stands for the torch GPU backends; nothing here opens a device.)
        from types import SimpleNamespace
        from ksearch_harness import evaluate
        from ksearch_harness.backends.cuda import Backend as GpuBackend
        tensor = 1 << 30
        ctx = SimpleNamespace(workloads=[{"uuid": "norm"}], trials=3,
                              spec=SimpleNamespace(inputs=["x"]),
                              sizes=[(2 * tensor, [("x", tensor), ("y", tensor)])])

        class Device(GpuBackend):
            free = 0

            def device_room(self):
                return self.free, f"the {self.free / tensor:g} GiB free of the device"

        backend = Device()
        backend.free = int(8.5 * tensor)
        with self.assertRaises(evaluate.TaskError) as caught:
            evaluate._check_sizes(ctx, backend)
        self.assertEqual(caught.exception.field, "workloads[0].axes")
        self.assertEqual(str(caught.exception),
                         "workload 0 ('norm') needs 9 GiB on the device at once (the arrays the "
                         "harness holds at once with 3 correctness trial(s): the candidate's "
                         "inputs and outputs of each earlier trial, the pristine inputs and the "
                         "candidate's copy, its outputs, a copy of them and the reference's "
                         "result; one copy of its inputs and outputs is 2 GiB: 'x' 1 GiB, 'y' 1 "
                         "GiB), more than the 8.5 GiB free of the device; reduce the workload's "
                         "axes or the correctness trials")
        backend.free = int(9.5 * tensor)
        evaluate._check_sizes(ctx, backend)
        # One trial holds no earlier trial's arrays; the timing stage's pools are then the
        # peak: the 1 GiB input's pool (64 MiB more for the windows) twice, and three outputs.
        ctx.trials = 1
        backend.free = int(5.2 * tensor)
        evaluate._check_sizes(ctx, backend)
        backend.free = int(5.1 * tensor)
        with self.assertRaises(evaluate.TaskError) as caught:
            evaluate._check_sizes(ctx, backend)
        self.assertIn("needs 5.12 GiB on the device at once (the arrays the harness holds at "
                      "once while timing", str(caught.exception))


class SeccompProgram(unittest.TestCase):
    """The worker's filter as a program (sandbox.seccomp_program), checked without a kernel."""

    def test_every_call_has_one_verdict_and_every_jump_lands_inside(self):
        import struct
        from ksearch_harness import sandbox
        named = [set(sandbox.X86_64_ALLOWED.values()), set(sandbox.X86_64_FORBIDDEN.values()),
                 set(sandbox.X86_64_SIGNAL_SELF_ONLY.values()),
                 set(sandbox.X86_64_PROCESS_SELF_ONLY.values()),
                 {2, 56, 141, 203, 257, 435, 437}]
        for i, a in enumerate(named):
            for b in named[i + 1:]:
                self.assertEqual(a & b, set(), "a system call in two lists")
        # The calls issue 19 found reaching other processes are never plainly allowed.
        for name in ("prlimit64", "sched_setscheduler", "sched_setparam", "sched_setattr"):
            self.assertIn(name, sandbox.X86_64_PROCESS_SELF_ONLY)
        for name in ("reboot", "sethostname", "init_module", "syslog", "ioprio_set"):
            self.assertIn(name, sandbox.X86_64_FORBIDDEN)
        program = sandbox.seccomp_program(4242)
        self.assertLess(len(program), 4096)
        for at, ins in enumerate(program):
            code, jt, jf, _ = struct.unpack("<HBBI", ins)
            if code & 0x07 == 0x05:  # a jump
                self.assertLess(at + 1 + max(jt, jf), len(program), f"jump at {at}")
        code, _, _, k = struct.unpack("<HBBI", program[-1])
        self.assertEqual((code, k), (0x06, 0x00050000 | 38), "the default is ENOSYS")


if __name__ == "__main__":
    unittest.main()
