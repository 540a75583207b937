"""Protocol forgery and sandbox abuse, played against the harness itself (docs/threat-model.md).

Each candidate attacks the record the harness writes: it prints forged lines, writes them into
every descriptor it has, reopens the harness's pipes through /proc, closes its channel, kills
the harness, or ends its process early. The requests carry an `auth.key` as ksearch's do, and
the tests verify every line's code as ksearch does: a forged line must never verify, and no
attack may end in a `passed` workload for a kernel that computes nothing.

KSEARCH_SANDBOX=off and KSEARCH_IN_PROCESS=1 take a layer away, to show what the layers below
still stop (and, in the docs, what they do not).
"""

import hashlib
import hmac
import json
import os
import resource
import subprocess
import sys
import tempfile
import unittest

from ksearch_harness import sandbox, worker
from tests import support
from tests.support import request, softmax_source

LANDLOCK = sandbox.landlock_abi() > 0
SECCOMP = sandbox.seccomp_supported()
needs_landlock = unittest.skipUnless(LANDLOCK, "this kernel has no Landlock")
needs_seccomp = unittest.skipUnless(SECCOMP, "no seccomp filter for this machine")

KEY = bytes(range(32))

# The record a forger would like ksearch to read: every workload passed, quickly, then done.
FORGED = "".join(
    json.dumps({"event": "workload", "index": i, "uuid": u, "status": "passed", "reason": None,
                "correctness": {"trials": 3, "max_abs_error": 0, "max_rel_error": 0,
                                "rel_norm": 0, "matched_ratio": 1.0, "mismatched": 0,
                                "elements": 1},
                "timing": {"clock": "perf_counter_ns", "candidate_ns": [1, 1, 1],
                           "reference_ns": [1e9, 1e9, 1e9]}}) + "\n"
    for i, u in enumerate(["w0", "w1", "w2"])) + json.dumps(
    {"event": "done", "environment": {}, "harness_version": "0.2.0", "stages": {}}) + "\n"


def c_string(text):
    return json.dumps(text)  # a valid C string literal for this ASCII text


# Helpers every attack uses. Static checks are ksearch's (not the harness's), so nothing needs
# hiding here; the CLI suite (tests/adversarial) hides the same calls from them.
PRELUDE = r"""
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
static const char FORGED[] = %s;
static void spray(int fd) { if (write(fd, FORGED, sizeof FORGED - 1) < 0) {} }
""" % c_string(FORGED)


class Result:
    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stderr = proc.stderr.decode("utf-8", "replace")
        self.events, self.unauthenticated = [], []
        seq = 0
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            text, _, code = line.rpartition("\t")
            want = hmac.new(KEY, f"{seq}:".encode() + text.encode(), hashlib.sha256).hexdigest()
            if text and hmac.compare_digest(code, want):
                self.events.append(json.loads(text))
                seq += 1
            else:
                self.unauthenticated.append(line)

    def of(self, kind):
        return [e for e in self.events if e["event"] == kind]

    @property
    def statuses(self):
        return [e["status"] for e in self.of("workload")]

    @property
    def reasons(self):
        return [e["reason"] for e in self.of("workload")]


def run(req, env=None, timeout=60):
    req = dict(req, auth={"key": KEY.hex()})
    with tempfile.TemporaryDirectory(prefix="ksearch-test-") as tmp:
        environ = dict(os.environ, PYTHONPATH=support.HARNESS_DIR, TMPDIR=tmp)
        environ.update(env or {})
        proc = subprocess.run([sys.executable, "-m", "ksearch_harness"],
                              input=json.dumps(req).encode(), cwd=tmp, env=environ,
                              capture_output=True, timeout=timeout)
    return Result(proc)


def attack(code, prelude=""):
    """A softmax kernel that runs `code` on its first call and computes nothing."""
    return request(softmax_source(prelude=PRELUDE + prelude,
                                  before=f"{{ {code} }} return;"))


@unittest.skipUnless(worker.supported(), "the worker process needs Linux")
class ProtocolForgery(unittest.TestCase):
    def test_honest_lines_all_verify(self):
        r = run(request())
        self.assertEqual(r.unauthenticated, [])
        self.assertEqual(r.statuses, ["passed"] * 3)
        self.assertEqual(r.events[-1]["event"], "done")
        sandbox = r.of("done")[0]["environment"]["sandbox"]
        self.assertTrue(sandbox["worker"])

    def test_forged_record_printed_on_stdout_lands_in_the_log(self):
        r = run(attack("spray(1); printf(\"%s\", FORGED); fflush(stdout);"))
        self.assertEqual(r.unauthenticated, [])
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)
        self.assertIn('"status": "passed"', r.stderr)

    def test_forged_record_on_every_descriptor_breaks_only_the_worker(self):
        # The worker's descriptors: /dev/null, stderr twice, and its socket to the harness; the
        # forged text in the socket is not an answer the harness accepts.
        r = run(attack("for (int fd = 0; fd < 1024; fd++) spray(fd);"))
        self.assertEqual(r.unauthenticated, [])
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertTrue(r.reasons[0].startswith(
            "the candidate's process broke the worker protocol (an answer the harness's worker "
            "did not write: '{\"event\": \"workload\""), r.reasons[0])
        self.assertIn("during correctness of workload 0, trial 0; it was killed", r.reasons[0])
        self.assertEqual(r.events[-1]["event"], "done")

    def test_closing_every_descriptor_ends_the_worker_not_the_record(self):
        r = run(attack("for (int fd = 0; fd < 1024; fd++) close(fd);"))
        self.assertEqual(r.unauthenticated, [])
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertIn("the candidate's process", r.reasons[0])
        self.assertIn("during correctness of workload 0, trial 0", r.reasons[0])
        self.assertEqual(r.events[-1]["event"], "done")

    def test_exiting_with_code_0_early_is_a_runtime_error(self):
        r = run(attack("exit(0);"))
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertEqual(r.reasons[0], "the candidate's process exited with code 0 during "
                                       "correctness of workload 0, trial 0 (a kernel returns; "
                                       "it does not end its process)")

    def test_a_worker_killed_by_its_own_code_is_not_called_out_of_memory(self):
        # Issue 19, item 7: a SIGKILL the candidate sent itself is said to be its own, not
        # "possibly out of memory" (the machine's count of out-of-memory kills did not move).
        r = run(attack("kill(getpid(), SIGKILL);"))
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertEqual(r.reasons[0], "the candidate's process was killed by signal 9 (SIGKILL, "
                                       "sent by the candidate's code to its own process (not "
                                       "the out-of-memory killer, not a limit)) during "
                                       "correctness of workload 0, trial 0")
        self.assertEqual(r.events[-1]["event"], "done")

    @needs_seccomp
    def test_killing_the_harness_is_stopped_by_the_sandbox(self):
        r = run(attack("kill(getppid(), SIGKILL);"))
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertTrue(r.reasons[0].startswith(
            "the candidate's process was killed by signal 31 (SIGSYS, a system call the sandbox "
            "forbids"), r.reasons[0])

    def test_killing_the_harness_without_the_sandbox_leaves_no_done(self):
        # What ksearch then sees: a harness killed during a candidate stage (runtime_error).
        r = run(attack("kill(getppid(), SIGKILL);"), env={"KSEARCH_SANDBOX": "off"})
        self.assertEqual(r.returncode, -9)
        self.assertEqual(r.of("done"), [])
        self.assertEqual(r.events[-1], {"event": "progress", "stage": "correctness",
                                        "workload": 0, "trial": 0})

    # Reopen the harness's pipes through /proc (all but the log) and write the forged record.
    REOPEN = r"""
        char path[64], link[128], mine[128] = "";
        ssize_t n = readlink("/proc/self/fd/2", mine, sizeof mine - 1);
        if (n > 0) mine[n] = 0;
        int reached = 0;
        for (int fd = 0; fd < 64; fd++) {
            snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getppid(), fd);
            ssize_t k = readlink(path, link, sizeof link - 1);
            if (k <= 0) continue;
            link[k] = 0;
            if (strncmp(link, "pipe:", 5) != 0 || strcmp(link, mine) == 0) continue;
            int w = open(path, O_WRONLY | O_NONBLOCK);
            if (w < 0) continue;
            spray(w);
            reached++;
        }
        fprintf(stderr, "reopened %d pipes\n", reached);
    """

    @needs_landlock
    def test_reopening_the_harness_pipes_through_proc_is_refused_by_the_sandbox(self):
        r = run(attack(self.REOPEN))
        self.assertIn("reopened 0 pipes", r.stderr)
        self.assertEqual(r.unauthenticated, [])
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)

    def test_lines_forged_through_proc_without_the_sandbox_fail_authentication(self):
        # Without Landlock the worker can reopen the protocol pipe (as root, or while the
        # harness is dumpable); the forged lines reach the stream but never verify.
        r = run(attack(self.REOPEN), env={"KSEARCH_SANDBOX": "off"})
        if "reopened 0 pipes" in r.stderr:
            self.skipTest("this user cannot open the harness's /proc/PID/fd (not root)")
        # One forgery (three workloads and a done) per call: each workload fails at trial 0.
        self.assertEqual(len(r.unauthenticated), 3 * 4)
        self.assertIn('"status": "passed"', r.unauthenticated[0])
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)

    def test_in_process_forgery_on_the_protocol_descriptor_fails_authentication(self):
        # No worker: the candidate shares the harness's process and writes straight into the
        # protocol descriptor. Only the authentication stops it (see the threat model for a
        # candidate that also reads the key from memory).
        r = run(attack("for (int fd = 3; fd < 64; fd++) spray(fd);"),
                env={"KSEARCH_IN_PROCESS": "1"})
        self.assertGreaterEqual(len(r.unauthenticated), 4)
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3)


@unittest.skipUnless(worker.supported(), "the worker process needs Linux")
class CandidateStoppedWhileTheHarnessWorks(unittest.TestCase):
    # A reference that looks at its own child processes (the worker) and raises if any thread
    # of theirs is running: it runs in the vetting (worker idle: sleeping), in every trial and
    # in every timing call.
    REFERENCE = (
        "import os\n"
        "import numpy as np\n"
        "def _running_children():\n"
        "    me, found = os.getpid(), []\n"
        "    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "        try:\n"
        "            stat = open(f'/proc/{pid}/stat').read()\n"
        "            if int(stat[stat.rfind(')') + 2:].split()[1]) != me:\n"
        "                continue\n"
        "            for t in os.listdir(f'/proc/{pid}/task'):\n"
        "                s = open(f'/proc/{pid}/task/{t}/stat').read()\n"
        "                if s[s.rfind(')') + 2] == 'R':\n"
        "                    found.append(t)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return found\n"
        "def run(x):\n"
        "    running = _running_children()\n"
        "    if running:\n"
        "        raise ValueError(f'candidate threads running: {running}')\n"
        "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n")
    SPINNERS = softmax_source(
        prelude="#include <pthread.h>\n"
                "static void* spin(void* a) { for (volatile long i = 0;; i++) {} return a; }\n"
                "static int started;",
        before="if (!started++) for (int i = 0; i < 4; i++) "
               "{ pthread_t t; pthread_create(&t, 0, spin, 0); }")

    def test_threads_left_spinning_never_run_while_the_reference_runs(self):
        definition = dict(support.SOFTMAX, reference=self.REFERENCE)
        req = request(self.SPINNERS, definition=definition,
                      timing={"warmup": 2, "iterations": 10, "min_iterations": 10,
                              "max_seconds": 5.0})
        r = run(req)
        self.assertEqual(r.statuses, ["passed"] * 3, r.reasons)
        self.assertEqual(len(r.of("workload")[2]["timing"]["candidate_ns"]), 10)

    def test_the_same_check_sees_threads_that_are_not_stopped(self):
        # Shows the reference's check works: in-process (no worker, no sandbox) a constructor
        # forks a child that spins, unstopped, for 3 s (then SIGALRM ends it), holding none of
        # the harness's descriptors; the reference sees its running thread.
        source = ("#include <signal.h>\n#include <unistd.h>\n"
                  "__attribute__((constructor)) static void child(void) {\n"
                  "  if (fork() == 0) {\n"
                  "    for (int fd = 0; fd < 1024; fd++) close(fd);\n"
                  "    alarm(3);\n"
                  "    for (volatile long i = 0;; i++) {}\n"
                  "  }\n}\n"
                  + softmax_source())
        definition = dict(support.SOFTMAX, reference=self.REFERENCE)
        r = run(request(source, definition=definition), env={"KSEARCH_IN_PROCESS": "1"})
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertIn("candidate threads running", r.reasons[0])


@unittest.skipUnless(worker.supported(), "the worker process needs Linux")
class SandboxAbuse(unittest.TestCase):
    @needs_seccomp
    def test_fork_is_killed(self):
        r = run(attack("for (;;) fork();"))
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertIn("signal 31 (SIGSYS", r.reasons[0])

    def test_a_thread_is_allowed(self):
        # OpenMP and pthreads need clone with CLONE_THREAD: the filter lets it through.
        source = softmax_source(prelude="#include <pthread.h>\nstatic void* idle(void* a) "
                                        "{ return a; }",
                                before="pthread_t t; pthread_create(&t, 0, idle, 0); "
                                       "pthread_join(t, 0);")
        req = request(source)
        req["candidate"]["build"]["extra_flags"] = ["-pthread"]
        r = run(req)
        self.assertEqual(r.statuses, ["passed"] * 3, r.reasons)

    @needs_seccomp
    def test_a_socket_is_killed(self):
        r = run(attack("socket(2, 1, 0);", prelude="#include <sys/socket.h>\n"))
        self.assertEqual(r.statuses, ["runtime_error"] * 3)
        self.assertIn("signal 31 (SIGSYS", r.reasons[0])

    @needs_seccomp
    def test_writing_a_file_is_killed(self):
        for where in ("getenv(\"TMPDIR\")", "\"/tmp\""):
            with self.subTest(where=where):
                r = run(attack(f'char p[512]; snprintf(p, sizeof p, "%s/fill", {where}); '
                               f'int fd = open(p, O_WRONLY | O_CREAT, 0600); '
                               f'fprintf(stderr, "opened %d\\n", fd);'))
                self.assertEqual(r.statuses, ["runtime_error"] * 3)
                self.assertIn("signal 31 (SIGSYS", r.reasons[0])
                self.assertNotIn("opened", r.stderr)

    @needs_landlock
    def test_reading_files_outside_the_build_folder_is_refused(self):
        with tempfile.TemporaryDirectory() as other:
            secret = os.path.join(other, "secret")
            with open(secret, "w") as f:
                f.write("42")
            code = (f'FILE* f = fopen({c_string(secret)}, "r"); '
                    f'fprintf(stderr, "secret %s\\n", f ? "read" : "refused");')
            r = run(attack(code))
            self.assertIn("secret refused", r.stderr)
            r = run(attack(code), env={"KSEARCH_SANDBOX": "off"})
            self.assertIn("secret read", r.stderr)

    @needs_landlock
    def test_the_interpreters_packages_are_out_of_reach(self):
        # NumPy's files (site-packages) cannot be opened, so the embedded interpreter cannot
        # import the framework for the candidate.
        import numpy
        init = numpy.__file__
        code = (f'FILE* f = fopen({c_string(init)}, "r"); '
                f'fprintf(stderr, "numpy %s\\n", f ? "readable" : "refused");')
        r = run(attack(code))
        self.assertIn("numpy refused", r.stderr)


# Issue 19, items 3 and 4: other processes are out of the candidate's reach, and it holds no
# privilege. Every call below names the harness (getppid()), the only process these tests may
# safely aim at: with the defences missing, it is the harness that dies or slows down.
OTHER_PROCESS_PRELUDE = r"""
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#define IDLE_POLICY 5  /* SCHED_IDLE and SCHED_BATCH: only with _GNU_SOURCE, which comes too late */
#define BATCH_POLICY 3
static void said(const char* what, long r) {
    fprintf(stderr, "%s %s (%s)\n", what, r < 0 ? "refused" : "reached", r < 0 ? strerror(errno) : "");
}
"""

ROOT = os.geteuid() == 0


def status_fields(text):
    """The /proc/self/status lines a candidate printed (`Name:\tvalue`), as a dict."""
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":\t")
        if sep and name in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd",
                            "CapAmb", "NoNewPrivs"):
            fields[name] = value.strip()
    return fields


@unittest.skipUnless(worker.supported(), "the worker process needs Linux")
class OtherProcessesAreOutOfReach(unittest.TestCase):
    # Each of these reaches another process: its CPU-time limit (a prlimit of 0 kills it), its
    # priority or scheduling policy (a starved harness times a slow reference), its I/O
    # priority, its memory placement, a signal.
    CALLS = {
        "prlimit": "struct rlimit zero = {0, 0}; said(\"prlimit\", "
                   "syscall(SYS_prlimit64, getppid(), RLIMIT_CPU, &zero, NULL));",
        "setpriority": "said(\"setpriority\", setpriority(PRIO_PROCESS, getppid(), 19));",
        "setpriority_group": "said(\"setpriority\", setpriority(PRIO_PGRP, 0, 19));",
        "sched_setscheduler": "struct sched_param p = {0}; said(\"sched_setscheduler\", "
                              "sched_setscheduler(getppid(), IDLE_POLICY, &p));",
        "sched_setparam": "struct sched_param p = {0}; said(\"sched_setparam\", "
                          "sched_setparam(getppid(), &p));",
        "sched_setattr": "unsigned int a[14] = {56, 5}; said(\"sched_setattr\", "
                         "syscall(SYS_sched_setattr, getppid(), a, 0));",
        "ioprio_set": "said(\"ioprio_set\", syscall(SYS_ioprio_set, 1, getppid(), 7 << 13));",
        "migrate_pages": "unsigned long m = 1; said(\"migrate_pages\", "
                         "syscall(SYS_migrate_pages, getppid(), 64, &m, &m));",
        "signal_probe": "said(\"kill\", kill(getppid(), 0));",
        "pidfd_open": "said(\"pidfd_open\", syscall(SYS_pidfd_open, getppid(), 0));",
    }

    @needs_seccomp
    def test_limits_priorities_and_scheduling_of_the_harness_are_killed(self):
        for name, code in self.CALLS.items():
            with self.subTest(call=name):
                r = run(attack(code, prelude=OTHER_PROCESS_PRELUDE))
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(r.statuses, ["runtime_error"] * 3, r.reasons)
                self.assertTrue(r.reasons[0].startswith(
                    "the candidate's process was killed by signal 31 (SIGSYS, a system call "
                    "the sandbox forbids"), r.reasons[0])
                self.assertIn("other processes", r.reasons[0])
                self.assertNotIn(" reached ", r.stderr)
                self.assertNotIn(" refused ", r.stderr)
                self.assertEqual(r.events[-1]["event"], "done")

    def test_its_own_limits_priority_and_affinity_stay_its_own(self):
        # The same calls on its own process (0 or its pid) are a kernel's business: allowed, and
        # the kernel (which computes correctly) passes. A thread's affinity named by its tid is
        # refused (EPERM), not killed: the filter cannot tell a thread from another process.
        code = (
            "struct rlimit r; said(\"getrlimit\", "
            "syscall(SYS_prlimit64, 0, RLIMIT_CORE, NULL, &r));"
            "said(\"prlimit_self\", syscall(SYS_prlimit64, getpid(), RLIMIT_CORE, &r, NULL));"
            "said(\"setrlimit\", setrlimit(RLIMIT_CORE, &r));"
            "said(\"nice\", setpriority(PRIO_PROCESS, 0, 1));"
            "unsigned long s[16] = {0}; said(\"getaffinity\", "
            "syscall(SYS_sched_getaffinity, 0, sizeof s, s));"
            "said(\"setaffinity\", syscall(SYS_sched_setaffinity, 0, sizeof s, s));"
            "said(\"setaffinity_other\", syscall(SYS_sched_setaffinity, getppid(), sizeof s, s));"
            "struct sched_param p = {0}; said(\"batch\", sched_setscheduler(0, BATCH_POLICY, &p));"
        )
        source = softmax_source(prelude=OTHER_PROCESS_PRELUDE,
                                before="static int once; if (!once++) {" + code + "}")
        r = run(request(source))
        self.assertEqual(r.statuses, ["passed"] * 3, r.reasons)
        for name in ("getrlimit", "prlimit_self", "setrlimit", "nice", "getaffinity",
                     "setaffinity", "batch"):
            self.assertIn(f"{name} reached", r.stderr)
        if SECCOMP and os.environ.get("KSEARCH_SANDBOX") != "off":
            self.assertIn("setaffinity_other refused (Operation not permitted)", r.stderr)

    def test_real_time_scheduling_and_a_raised_priority_are_refused_even_for_itself(self):
        # A real-time spinning worker would starve the harness (and ksearch) on its cores.
        code = ("struct sched_param p = {1}; said(\"fifo\", sched_setscheduler(0, SCHED_FIFO, &p));"
                "struct sched_param o = {0}; sched_setscheduler(0, SCHED_OTHER, &o);"
                "said(\"nice\", setpriority(PRIO_PROCESS, 0, -5));"
                "setpriority(PRIO_PROCESS, 0, 0);")
        r = run(attack(code, prelude=OTHER_PROCESS_PRELUDE))
        self.assertEqual(r.statuses, ["incorrect_numerical"] * 3, r.reasons)
        self.assertIn("fifo refused (Operation not permitted)", r.stderr)
        self.assertIn("nice refused (Permission denied)", r.stderr)

    PROBE = r"""
        FILE* f = fopen("/proc/self/status", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
        if (f) fclose(f);
        char name[256] = "";
        gethostname(name, sizeof name);
        fprintf(stderr, "probe done\n");
        said("sethostname", sethostname(name, strlen(name)));
    """

    def test_the_candidate_holds_no_capability_and_is_nobody_when_started_as_root(self):
        r = run(attack(self.PROBE, prelude=OTHER_PROCESS_PRELUDE))
        fields = status_fields(r.stderr)
        self.assertIn("probe done", r.stderr)
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            self.assertEqual(fields[cap], "0000000000000000", (cap, fields))
        self.assertEqual(fields["NoNewPrivs"], "1", fields)
        privileges = r.of("done")[0]["environment"]["sandbox"]["privileges"]
        self.assertEqual(privileges["capabilities"], 0, privileges)
        if ROOT:
            self.assertEqual(fields["CapBnd"], "0000000000000000", fields)
            self.assertEqual(fields["Uid"].split(), ["65534"] * 4, fields)
            self.assertEqual(fields["Gid"].split(), ["65534"] * 4, fields)
            self.assertEqual(fields["Groups"], "", fields)
            self.assertEqual((privileges["uid"], privileges["gid"]), (65534, 65534), privileges)
        if SECCOMP:
            # The machine's name is seccomp's too: killed before the kernel is asked.
            self.assertEqual(r.statuses, ["runtime_error"] * 3, r.reasons)
            self.assertIn("signal 31 (SIGSYS", r.reasons[0])
            self.assertNotIn("sethostname reached", r.stderr)

    def test_without_the_sandbox_root_keeps_its_capabilities(self):
        # Layer shown: KSEARCH_SANDBOX=off leaves the worker as it was forked.
        if not ROOT:
            self.skipTest("only root has capabilities to keep")
        probe = self.PROBE.replace('said("sethostname"', '(void)said; (void)("sethostname"')
        r = run(attack(probe, prelude=OTHER_PROCESS_PRELUDE), env={"KSEARCH_SANDBOX": "off"})
        fields = status_fields(r.stderr)
        self.assertNotEqual(fields["CapEff"], "0000000000000000", fields)
        self.assertEqual(fields["Uid"].split()[0], "0", fields)


@unittest.skipUnless(ROOT and worker.supported(), "dropping root needs root")
class PrivilegesAlone(unittest.TestCase):
    """drop_privileges without Landlock or seccomp: the layer on its own stops what the issue's
    probes did as root (a limit or priority of root's processes, the machine's name)."""

    def test_a_process_that_dropped_root_reaches_no_root_process(self):
        from ksearch_harness import sandbox
        import ctypes
        import socket as socket_module
        theirs, ours = socket_module.socketpair()
        self.addCleanup(ours.close)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                applied = sandbox.drop_privileges(parent)
                libc = ctypes.CDLL(None, use_errno=True)
                results = {"applied": applied}

                def errno_of(r):
                    return 0 if r == 0 else ctypes.get_errno()
                # prlimit(parent, RLIMIT_CORE, its own limit): harmless if it ever got through.
                core = (ctypes.c_ulong * 2)()
                libc.prlimit(parent, resource.RLIMIT_CORE, None, core)
                results["prlimit"] = errno_of(libc.prlimit(parent, resource.RLIMIT_CORE, core,
                                                           None))
                results["kill"] = errno_of(libc.kill(parent, 0))
                results["setpriority"] = errno_of(libc.setpriority(0, parent, 0))
                name = socket_module.gethostname().encode()
                results["sethostname"] = errno_of(libc.sethostname(name, len(name)))
                results["uid"] = os.getuid()
                results["caps"] = list(sandbox.capabilities())
                theirs.sendall(json.dumps(results).encode())
            finally:
                os._exit(0)
        theirs.close()
        data = b""
        while chunk := ours.recv(65536):
            data += chunk
        os.waitpid(pid, 0)
        results = json.loads(data)
        import errno as errno_module
        self.assertEqual(results["uid"], 65534, results)
        self.assertEqual(results["caps"], [0, 0, 0], results)
        self.assertEqual(results["prlimit"], errno_module.EPERM, results)
        self.assertEqual(results["kill"], errno_module.EPERM, results)
        self.assertEqual(results["setpriority"], errno_module.EPERM, results)
        self.assertEqual(results["sethostname"], errno_module.EPERM, results)


if __name__ == "__main__":
    unittest.main()
