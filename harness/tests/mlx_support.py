"""What the MLX tests share: whether this interpreter has MLX (and mlx-lm), the CI switch that
turns a missing MLX into a failure, and an interpreter environment in which MLX cannot be
imported, for the tests of what happens without it.

MLX's CPU build (`pip install 'mlx[cpu]==0.32.4'`, which .ci/run installs) runs Python launchers
of MLX operations, the tasks' references and baselines, and bench/mlx_mamba.py's checks (with
mlx-lm, installed with --no-deps). Without MLX those tests skip, printing why, unless
KSEARCH_REQUIRE_MLX=1 (set by .ci/run) makes that a failure, as KSEARCH_REQUIRE_NVCC does for
nvcc.
"""

import os
import subprocess
import sys
import tempfile
import unittest

INSTALL = "pip install 'mlx[cpu]==0.32.4'"
_PROBE = ("import mlx.core as mx\n"
          "has = lambda m: bool(getattr(getattr(mx, m, None), 'is_available', lambda: 0)())\n"
          "print('metal' if has('metal') else 'cuda' if has('cuda') else 'cpu')\n")


def _probe():
    found = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


# None without MLX; else where it runs kernels: 'metal', 'cuda', or 'cpu' (no custom kernels).
STATE = _probe()


def has_mlx_lm():
    """mlx-lm's model code is importable (bench/mlx_mamba.py loads it without its __init__)."""
    import importlib.util
    return STATE is not None and importlib.util.find_spec("mlx_lm") is not None


def required():
    return os.environ.get("KSEARCH_REQUIRE_MLX") == "1"


def requires_mlx(reason_missing=None, available=None):
    """A class decorator: the tests run where MLX is importable (or `available()` is true); else
    they skip with a printed reason, or fail when KSEARCH_REQUIRE_MLX=1."""
    def decorate(cls):
        ok = available() if available is not None else STATE is not None
        if ok:
            return cls
        reason = reason_missing or (f"{sys.executable} cannot import mlx.core ({INSTALL})")
        if required():
            def setUp(self):
                self.fail(f"KSEARCH_REQUIRE_MLX=1 but {reason}")
            cls.setUp = setUp
            return cls
        print(f"skipping {cls.__module__}.{cls.__name__}: {reason}", file=sys.stderr)
        return unittest.skip(reason)(cls)
    return decorate


# sitecustomize.py runs at interpreter start-up from PYTHONPATH: a meta-path finder that fails
# every import of mlx or a submodule exactly as a Python without the package does.
_BLOCKER = '''
import sys


class _NoMlx:
    def find_spec(self, name, path=None, target=None):
        if name == "mlx" or name.startswith("mlx."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoMlx())
'''


class WithoutMlx:
    """A context giving `env` for a subprocess whose Python cannot import mlx (PYTHONPATH: a
    folder with the blocker's sitecustomize.py, then `pythonpath`)."""

    def __init__(self, pythonpath):
        self._pythonpath = pythonpath

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ksearch-no-mlx-")
        with open(os.path.join(self._tmp.name, "sitecustomize.py"), "w") as f:
            f.write(_BLOCKER)
        return {"PYTHONPATH": os.pathsep.join([self._tmp.name, self._pythonpath])}

    def __exit__(self, *exc):
        self._tmp.cleanup()
