"""Every backend keeps the contract of backends/base.py: its class subclasses base.Backend and
implements every required method with the base's signature (and any hook it overrides with the
hook's), its package has the same files as every other (base.FILES), and the registry
(backends.NAMES) names exactly the backend packages there are. Needs neither torch nor MLX: no
backend imports them before `open`."""

import inspect
import os
import subprocess
import sys
import unittest

from ksearch_harness import backends
from ksearch_harness.backends import base

FOLDER = os.path.dirname(os.path.abspath(backends.__file__))
# The contract's methods: the abstract ones and the optional hooks, all defined in base.Backend.
METHODS = sorted(name for name, value in vars(base.Backend).items()
                 if inspect.isfunction(value) and not name.startswith("_"))


def packages():
    return sorted(name for name in os.listdir(FOLDER)
                  if os.path.isfile(os.path.join(FOLDER, name, "__init__.py")))


class Contract(unittest.TestCase):
    def test_the_registry_names_every_backend_package_and_no_other(self):
        self.assertEqual(sorted(backends.NAMES + backends.SHARED), packages())
        self.assertFalse(set(backends.NAMES) & set(backends.SHARED))

    def test_every_backend_subclasses_the_base_and_implements_it(self):
        self.assertTrue(base.Backend.__abstractmethods__)
        for name in backends.NAMES:
            with self.subTest(backend=name):
                cls = backends.backend_class(name)
                self.assertTrue(issubclass(cls, base.Backend), cls.__mro__)
                self.assertEqual(cls.name, name)
                self.assertIsInstance(cls.bfloat16_as_float32, bool)
                self.assertIsInstance(cls.builds_early, bool)
                missing = sorted(getattr(cls, "__abstractmethods__", ()))
                self.assertEqual(missing, [], f"backend {name} lacks {missing}")
                self.assertFalse(inspect.isabstract(cls))
                self.assertIsInstance(backends.get(name), base.Backend)  # no device needed

    def test_methods_have_the_bases_signatures(self):
        for name in backends.NAMES:
            cls = backends.backend_class(name)
            for method in METHODS:
                with self.subTest(backend=name, method=method):
                    mine = inspect.getattr_static(cls, method)
                    self.assertTrue(inspect.isfunction(mine),
                                    f"{name}.{method} is a {type(mine).__name__}, not a method")
                    self.assertEqual(inspect.signature(mine),
                                     inspect.signature(getattr(base.Backend, method)))
            for method in base.Backend.__abstractmethods__:
                with self.subTest(backend=name, required=method):
                    owner = next(k for k in cls.__mro__ if method in vars(k))
                    self.assertIsNot(owner, base.Backend)

    def test_every_backend_package_has_the_same_files(self):
        for name in backends.NAMES + ("torch_gpu",):
            with self.subTest(package=name):
                folder = os.path.join(FOLDER, name)
                files = set(os.listdir(folder))
                missing = sorted(set(base.FILES) - files)
                self.assertEqual(missing, [], f"backends/{name}/ lacks {missing}")

    def test_nvcc_is_found_without_numpy(self):
        # ksearch doctor and crates/search/tests/gpu_templates_build.rs import
        # ksearch_harness.backends.cuda.nvcc with whatever python3 there is.
        code = ("import sys\n"
                "class NoNumpy:\n"
                "    def find_spec(self, name, path=None, target=None):\n"
                "        if name.split('.')[0] == 'numpy':\n"
                "            raise ImportError('no numpy here')\n"
                "sys.meta_path.insert(0, NoNumpy())\n"
                "from ksearch_harness.backends.cuda import nvcc\n"
                "nvcc.find()\n"
                "print('numpy' in sys.modules)\n")
        harness = os.path.dirname(os.path.dirname(FOLDER))
        proc = subprocess.run([sys.executable, "-c", code], cwd=harness, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "False")


if __name__ == "__main__":
    unittest.main()
