"""The warm server (crates/eval/src/warm_server.py) on its own, with a stand-in harness package:
what one forked evaluation does to its own process never reaches the next one, the child gets
the environment, path and descriptors it was asked for, and what it leaves behind is killed
before its exit is reported. The full path (the real harness, hostile C candidates, the Rust
side) is crates/eval/tests/warm.rs.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

SERVER = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "eval", "src",
                      "warm_server.py")

# A stand-in ksearch_harness: reports what it sees, then does what the request's stdin says.
MAIN = r'''
import builtins, json, os, sys
req = json.loads(sys.stdin.read())
print(json.dumps({
    "patched": hasattr(builtins, "ksearch_leak"),
    "json_ok": sys.modules.get("json") is json,
    "path0": sys.path[:2],
    "cwd": os.getcwd(),
    "env": os.environ.get("WARM_TEST"),
    "pid": os.getpid(),
    "ppid": os.getppid(),
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
}), flush=True)
if req.get("hostile"):
    builtins.ksearch_leak = True
    sys.modules["json"] = None
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(req["hostile"], "w") as f:
                f.write(str(os.getpid()))
            import time
            time.sleep(60)
        os._exit(0)
    os.wait()
    while not os.path.exists(req["hostile"]) or not open(req["hostile"]).read():
        pass
os._exit(0)
'''


class WarmServer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        with open(SERVER) as f:
            source = f.read()
        self.server = subprocess.Popen([sys.executable, "-c", source, "json"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.assertEqual(json.loads(self.server.stdout.readline()), {"ready": True})

    def tearDown(self):
        self.server.kill()
        self.server.wait()
        self.server.stdin.close()
        self.server.stdout.close()
        self.tmp.cleanup()

    def evaluate(self, name, stdin):
        work = os.path.join(self.tmp.name, name)
        harness = os.path.join(work, "harness")
        os.makedirs(os.path.join(harness, "ksearch_harness"))
        with open(os.path.join(harness, "ksearch_harness", "__init__.py"), "w"):
            pass
        with open(os.path.join(harness, "ksearch_harness", "__main__.py"), "w") as f:
            f.write(MAIN)
        out, err = os.path.join(work, "out"), os.path.join(work, "err")
        os.mkfifo(out)
        os.mkfifo(err)
        reader = os.open(out, os.O_RDONLY | os.O_NONBLOCK)
        err_reader = os.open(err, os.O_RDONLY | os.O_NONBLOCK)
        req = {"workdir": work, "harness": harness, "env": {"WARM_TEST": name},
               "rlimits": {"RLIMIT_CORE": 0}, "stdin": json.dumps(stdin),
               "stdout": out, "stderr": err}
        self.server.stdin.write(json.dumps(req).encode() + b"\n")
        self.server.stdin.flush()
        pid = json.loads(self.server.stdout.readline())["pid"]
        exit = json.loads(self.server.stdout.readline())["exit"]
        data = b""
        while True:
            try:
                chunk = os.read(reader, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        os.close(reader)
        os.close(err_reader)
        return pid, exit, json.loads(data.decode().splitlines()[0]), work

    def test_a_hostile_child_changes_nothing_for_the_next(self):
        marker = os.path.join(self.tmp.name, "sleeper.pid")
        _, exit, first, work = self.evaluate("one", {"hostile": marker})
        self.assertEqual(exit, {"code": 0})
        self.assertEqual(first["env"], "one")
        self.assertEqual(first["cwd"], work)
        self.assertEqual(first["path0"], [work, os.path.join(work, "harness")])
        self.assertEqual(first["ppid"], self.server.pid)
        # 0, 1, 2 and the one listdir used: the server's control pipes are not among them.
        self.assertEqual(len(first["fds"]), 4, first["fds"])
        # The double-forked sleeper was killed before the exit was reported.
        with open(marker) as f:
            sleeper = int(f.read())
        time.sleep(0.05)
        self.assertFalse(os.path.exists(f"/proc/{sleeper}") and
                         ") Z " not in open(f"/proc/{sleeper}/stat").read(),
                         "the sleeper outlived its evaluation")
        _, exit, second, _ = self.evaluate("two", {})
        self.assertEqual(exit, {"code": 0})
        self.assertFalse(second["patched"])
        self.assertTrue(second["json_ok"])
        self.assertEqual(second["env"], "two")
        self.assertIsNone(self.server.poll(), "the server died")


if __name__ == "__main__":
    unittest.main()
