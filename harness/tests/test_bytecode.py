"""ksearch's bytecode cache (ksearch_harness/bytecode.py, issue 16): used only where torch (else
NumPy) has no bytecode beside its sources, decided alike by the harness and by the warm server's
own copy, and written by the server alone: its evaluations read it and write nothing.
"""

import ast
import importlib
import json
import os
import py_compile
import subprocess
import sys
import tempfile
import unittest

from ksearch_harness import bytecode

SERVER = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "eval", "src",
                      "warm_server.py")


def server_choose():
    """warm_server.py's `_choose_bytecode_cache`, taken out of the server's source."""
    with open(SERVER) as f:
        tree = ast.parse(f.read())
    [fn] = [n for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name == "_choose_bytecode_cache"]
    scope = {"os": os, "sys": sys}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), SERVER, "exec"), scope)
    return scope["_choose_bytecode_cache"]


def fake_package(root, compiled, name="torch"):
    package = os.path.join(root, name)
    os.makedirs(package)
    source = os.path.join(package, "__init__.py")
    with open(source, "w") as f:
        f.write("WHERE = __file__\n")
    if compiled:
        py_compile.compile(source, cfile=importlib.util.cache_from_source(source))
    return source


class Choose(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.saved = sys.pycache_prefix, list(sys.path), os.environ.get(bytecode.ENV)
        self.cache = os.path.join(self.tmp.name, "cache")
        os.environ[bytecode.ENV] = self.cache

    def tearDown(self):
        sys.pycache_prefix, sys.path[:], env = self.saved
        if env is None:
            os.environ.pop(bytecode.ENV, None)
        else:
            os.environ[bytecode.ENV] = env
        importlib.invalidate_caches()

    def decide(self, compiled, numpy_compiled=None):
        root = os.path.join(self.tmp.name, f"site-{compiled}-{numpy_compiled}")
        fake_package(root, compiled)
        fake_package(root, compiled if numpy_compiled is None else numpy_compiled, "numpy")
        sys.path.insert(0, root)
        importlib.invalidate_caches()
        # find_spec answers from sys.modules for a module already imported (by other tests):
        # hide those, as the harness decides before anything imported them.
        loaded = {name: sys.modules.pop(name) for name in ("torch", "numpy") if name in sys.modules}
        try:
            sys.pycache_prefix = None
            mine = bytecode.choose()
            sys.pycache_prefix = None
            servers = server_choose()()
        finally:
            sys.pycache_prefix = None
            sys.modules.update(loaded)
            sys.path.remove(root)
        return mine, servers

    def test_torch_without_bytecode_uses_the_cache(self):
        self.assertEqual(self.decide(compiled=False), (self.cache, self.cache))

    def test_torch_with_its_own_bytecode_keeps_it(self):
        # The server's copy returns None when it sets nothing (it need not write then).
        self.assertEqual(self.decide(compiled=True), (None, None))

    def test_numpy_with_its_own_bytecode_keeps_it_even_if_torch_has_none(self):
        # A CPU evaluation imports NumPy alone, and nothing writes the cache for it.
        self.assertEqual(self.decide(compiled=False, numpy_compiled=True), (None, None))

    def test_no_cache_named_or_a_prefix_of_the_users_is_left_alone(self):
        del os.environ[bytecode.ENV]
        sys.pycache_prefix = None
        self.assertIsNone(bytecode.choose())
        os.environ[bytecode.ENV] = self.cache
        sys.pycache_prefix = "/users/own"
        self.assertEqual(bytecode.choose(), "/users/own")


# A stand-in harness that reports how its interpreter handles bytecode.
MAIN = r'''
import json, sys
print(json.dumps({"dont_write": sys.dont_write_bytecode, "prefix": sys.pycache_prefix}),
      flush=True)
'''


class ServerWritesTheCache(unittest.TestCase):
    def test_the_server_writes_it_and_its_evaluation_only_reads(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        site = os.path.join(tmp.name, "site")
        source = fake_package(site, compiled=False)
        fake_package(site, compiled=False, name="numpy")
        cache = os.path.join(tmp.name, "cache")
        env = dict(os.environ, PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1",
                   KSEARCH_BYTECODE_CACHE=cache)
        env.pop("PYTHONPYCACHEPREFIX", None)
        with open(SERVER) as f:
            server = subprocess.Popen([sys.executable, "-c", f.read(), "torch"], env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(server.wait)
        self.addCleanup(server.kill)
        self.assertEqual(json.loads(server.stdout.readline()), {"ready": True})
        # The server compiled the fake torch into the cache, nothing beside its source.
        sys_prefix, sys.pycache_prefix = sys.pycache_prefix, cache
        try:
            written = importlib.util.cache_from_source(os.path.abspath(source))
        finally:
            sys.pycache_prefix = sys_prefix
        self.assertTrue(os.path.exists(written), os.listdir(tmp.name))
        self.assertFalse(os.path.exists(os.path.join(site, "torch", "__pycache__")))

        work = os.path.join(tmp.name, "work")
        harness = os.path.join(work, "harness", "ksearch_harness")
        os.makedirs(harness)
        open(os.path.join(harness, "__init__.py"), "w").close()
        with open(os.path.join(harness, "__main__.py"), "w") as f:
            f.write(MAIN)
        out = os.path.join(work, "out")
        os.mkfifo(out)
        reader = os.open(out, os.O_RDONLY | os.O_NONBLOCK)
        req = {"workdir": work, "harness": os.path.dirname(harness),
               "env": {"PYTHONDONTWRITEBYTECODE": "1", "KSEARCH_BYTECODE_CACHE": cache},
               "rlimits": {"RLIMIT_CORE": 0}, "stdin": "", "stdout": out, "stderr": os.devnull}
        server.stdin.write(json.dumps(req).encode() + b"\n")
        server.stdin.flush()
        json.loads(server.stdout.readline())  # the child's pid
        self.assertEqual(json.loads(server.stdout.readline())["exit"], {"code": 0})
        seen = json.loads(os.read(reader, 65536).decode().splitlines()[0])
        os.close(reader)
        self.assertEqual(seen, {"dont_write": True, "prefix": cache})


if __name__ == "__main__":
    unittest.main()
