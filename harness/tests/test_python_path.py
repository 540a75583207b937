"""[kernel].python_path: the task's module folders (GPU MODE's task.py and utils.py) are on a
Python candidate's module path after the candidate's own folder, so `from utils import ...`
works without code in the candidate that registers the modules. Needs no PyTorch."""

import os
import sys
import tempfile
import unittest

from ksearch_harness.backends.common import pyloader
from ksearch_harness.backends.python.build import python_path_of


class PythonPath(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.candidate = os.path.join(self.dir, "build")
        self.modules = os.path.join(self.dir, "modules")
        os.makedirs(self.candidate)
        os.makedirs(self.modules)
        self.saved_path = list(sys.path)
        self.addCleanup(self.restore)

    def restore(self):
        sys.path[:] = self.saved_path
        for name in ("ksearch_pp_helper", "ksearch_pp_candidate", "ksearch_pp_sibling"):
            sys.modules.pop(name, None)

    def write(self, folder, name, text):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)

    def test_a_candidate_imports_the_tasks_helper_module(self):
        self.write(self.modules, "ksearch_pp_helper.py", "def scale(x):\n    return 2 * x\n")
        self.write(self.candidate, "k.py",
                   "from ksearch_pp_helper import scale\n\ndef entry(x):\n    return scale(x)\n")
        entry = pyloader.import_symbol(self.candidate, "k.py", "ksearch_pp_candidate", "entry",
                                       python_path_of({"python_path": [self.modules]}))
        self.assertEqual(entry(3), 6)

    def test_the_candidates_own_sibling_wins_over_the_tasks_module(self):
        self.write(self.modules, "ksearch_pp_sibling.py", "WHO = 'task'\n")
        self.write(self.candidate, "ksearch_pp_sibling.py", "WHO = 'candidate'\n")
        self.write(self.candidate, "k.py", "from ksearch_pp_sibling import WHO\n")
        who = pyloader.import_symbol(self.candidate, "k.py", "ksearch_pp_candidate", "WHO",
                                     [self.modules])
        self.assertEqual(who, "candidate")

    def test_entries_that_are_not_absolute_existing_folders_are_named(self):
        self.assertEqual(python_path_of({}), [])
        for bad in (["relative/modules"], [os.path.join(self.dir, "absent")], [3]):
            with self.assertRaises(ValueError) as e:
                python_path_of({"python_path": bad})
            self.assertIn(repr(bad[0]), str(e.exception))
        with self.assertRaises(ValueError):
            python_path_of({"python_path": "modules"})


if __name__ == "__main__":
    unittest.main()
