"""bench/importers_suite.sh with a stand-in `ksearch` (a script that imports and evaluates by the
problem's name, no PyTorch): an evaluation that runs out of device memory is retried once alone,
while the others share the device; the table says so; KEEP=1 with ONLY reruns some problems into
an earlier run; TABLE_ONLY=1 remakes the table from rows.tsv; reasons are ksearch's `error:` line.
"""

import json
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "importers_suite.sh")

# The stand-in ksearch. `eval` records how many evaluations were in flight beside it (marker files
# in $FAKE_STATE/running) in $FAKE_STATE/log. Evaluations that share the device wait a moment for
# a second one to be in flight (so the test sees that they do share it); the retry of *_oom stays
# in flight a while, so one that started beside it would be seen.
FAKE = textwrap.dedent('''\
    #!/usr/bin/env python3
    import json, os, sys, time
    state = os.environ["FAKE_STATE"]
    cmd = sys.argv[1]
    if cmd == "import":
        kind, path, out = sys.argv[2], sys.argv[3], sys.argv[sys.argv.index("--out") + 1]
        if "bad" in os.path.basename(path):
            print(f"error: {path}: defines no class Model (a KernelBench problem defines ...)")
            sys.exit(1)
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, "seed.py"), "w").write("# seed\\n")
        sys.exit(0)
    task = sys.argv[2]
    name = os.path.basename(task)
    running = os.path.join(state, "running")
    os.makedirs(running, exist_ok=True)
    marker = os.path.join(running, f"{name}.{os.getpid()}")
    open(marker, "w").close()
    retry = "oom" in name and os.path.exists(os.path.join(task, ".tried"))
    start, most = time.time(), 1
    while time.time() - start < (1.5 if retry else 3.0):
        most = max(most, len(os.listdir(running)))
        if not retry and most >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.2)
    most = max(most, len(os.listdir(running)))
    os.remove(marker)
    with open(os.path.join(state, "log"), "a") as f:
        f.write(f"{name} {'retry' if retry else 'first'} {most}\\n")
    if "oom" in name and not retry:
        open(os.path.join(task, ".tried"), "w").close()
        print(json.dumps({"status": "runtime_error", "reason": "workload 0: the harness failed "
                          "with OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB"}))
        sys.exit(1)
    if "vet" in name and os.environ.get("FAKE_VET_PASSES") != "1":
        sys.stderr.write(f"error: {task}/definition.json: reference: the reference's output "
                         "'output' has no finite value above atol=0.0001\\n(the task cannot be "
                         "used as it is; this is for its author to fix)\\n")
        sys.exit(1)
    if "multi" in name:
        print(json.dumps({"status": "compile_error", "reason": "compilation failed:\\nline two"}))
        sys.exit(1)
    if retry and most > 1:
        print(json.dumps({"status": "runtime_error", "reason": f"not alone: {most} in flight"}))
        sys.exit(1)
    print(json.dumps({"status": "passed"}))
''')


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


@unittest.skipUnless(shutil.which("flock") and shutil.which("bash"), "needs bash and flock")
class ImportersSuiteTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.kb = os.path.join(self.dir, "kb")
        for level, names in ((1, ["1_ok", "2_oom", "3_bad", "4_vet"]), (2, ["1_ok2"]), (3, [])):
            folder = os.path.join(self.kb, "KernelBench", f"level{level}")
            os.makedirs(folder)
            for n in names:
                write(os.path.join(folder, f"{n}.py"), "# a problem\n")
        self.rk = os.path.join(self.dir, "rk")
        for group, problem in (("pmpp", "sum_py"), ("pmpp", "multi_py"), ("amd_only", "gemm")):
            folder = os.path.join(self.rk, "problems", group, problem)
            os.makedirs(folder)
            write(os.path.join(folder, "task.yml"), "lang: py\n")
        self.bin = os.path.join(self.dir, "ksearch")
        write(self.bin, FAKE)
        os.chmod(self.bin, os.stat(self.bin).st_mode | stat.S_IXUSR)
        self.state = os.path.join(self.dir, "state")
        os.makedirs(self.state)
        self.out = os.path.join(self.dir, "out")

    def suite(self, *args, **env):
        run = subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "FAKE_STATE": self.state, **env})
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        return run

    def rows(self):
        with open(os.path.join(self.out, "rows.tsv")) as f:
            return {line.split("\t")[1]: line.rstrip("\n").split("\t") for line in f}

    def test_out_of_memory_is_retried_alone_and_reruns_and_tables_work_on_an_existing_run(self):
        self.suite(self.kb, self.rk, self.bin, self.out, JOBS="3")
        rows = self.rows()
        self.assertEqual(sorted(rows), ["level1-1_ok", "level1-2_oom", "level1-3_bad", "level1-4_vet",
                                        "level2-1_ok2", "pmpp-multi_py", "pmpp-sum_py"], "amd_* groups left out")
        # A reason of several lines stays on its problem's row.
        self.assertEqual(rows["pmpp-multi_py"][3:5], ["no", "compile_error: compilation failed: line two"], rows["pmpp-multi_py"])
        self.assertEqual(rows["level1-1_ok"][2:4], ["yes", "yes"])
        oom = rows["level1-2_oom"]
        self.assertEqual(oom[2:4], ["yes", "yes"], oom)
        self.assertIn("passed on a retry alone", oom[5])
        self.assertEqual(rows["level1-3_bad"][2], "no")
        self.assertTrue(rows["level1-3_bad"][4].startswith("error: ") and
                        "defines no class Model" in rows["level1-3_bad"][4], rows["level1-3_bad"])
        # ksearch's error line, not the hint printed after it.
        vet = rows["level1-4_vet"]
        self.assertEqual(vet[3], "no")
        self.assertIn("has no finite value above atol", vet[4])
        with open(os.path.join(self.state, "log")) as f:
            log = [line.split() for line in f]
        retries = [int(n) for name, when, n in log if when == "retry"]
        self.assertEqual(retries, [1], f"the retry ran alone: {log}")
        self.assertTrue(any(when == "first" and int(n) > 1 for _, when, n in log),
                        f"the other evaluations shared the device: {log}")
        self.assertTrue(os.path.exists(os.path.join(self.out, "logs", "kernelbench-level1-2_oom.first.eval.json")))
        with open(os.path.join(self.out, "results.json")) as f:
            totals = json.load(f)["totals"]["kernelbench"]
        self.assertEqual(totals, {"problems": 5, "imported": 4, "seed_passes": 3,
                                  "passed_on_a_retry_alone": 1})
        with open(os.path.join(self.out, "table.md")) as f:
            self.assertIn("| kernelbench | 5 | 4 | 3 | 1 |", f.read())

        # Rerun one problem into the same folder: its row is replaced, the others stay.
        self.suite(self.kb, self.rk, self.bin, self.out, KEEP="1", ONLY="4_vet", FAKE_VET_PASSES="1")
        rows = self.rows()
        self.assertEqual(len(rows), 7)
        self.assertEqual(rows["level1-4_vet"][3], "yes")
        self.assertIn("passed on a retry alone", rows["level1-2_oom"][5])

        # The table again from rows.tsv alone, including rows of the five-column format.
        with open(os.path.join(self.out, "rows.tsv"), "a") as f:
            f.write("gpumode\tpmpp-old_py\tyes\tno\ttimeout: the evaluation exceeded its 60 s limit\n")
        os.remove(os.path.join(self.out, "table.md"))
        self.suite(self.out, TABLE_ONLY="1")
        with open(os.path.join(self.out, "table.md")) as f:
            table = f.read()
        self.assertIn("| kernelbench | 5 | 4 | 4 | 1 |", table)
        self.assertIn("| gpumode | pmpp-old_py | yes | no | timeout: the evaluation exceeded its 60 s limit |  |",
                      table)


if __name__ == "__main__":
    unittest.main()
