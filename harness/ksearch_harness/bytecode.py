"""Where the interpreter reads compiled bytecode from (issue 16).

Python keeps a module's compiled bytecode in `__pycache__` beside its source. Where that folder
cannot be written (a read-only image, a pip `--no-compile` install), every process compiles the
sources it imports again: on the H200 machine `import torch` spent 3.2 of its 5.0 s in
`compile()`. ksearch then names a cache of its own (KSEARCH_BYTECODE_CACHE, under the ksearch
cache folder), and the interpreter reads and writes bytecode there instead (`sys.pycache_prefix`).

The decision is the same in every process of one interpreter: only when neither torch nor NumPy
(those of them that are installed) has bytecode beside its sources. Where one has, the prefix
would hide the bytecode that is there (a CPU evaluation imports NumPy alone, and only the warm
server of a GPU backend writes the cache), so it is not set. The warm server (crates/eval/src/warm_server.py) makes
the same decision with its own copy of this code, since it loads no harness module, and it alone
writes the cache: harness processes run with PYTHONDONTWRITEBYTECODE and only read it.
"""

import importlib.util
import os
import sys

ENV = "KSEARCH_BYTECODE_CACHE"


def choose(environ=os.environ):
    """Set sys.pycache_prefix to the ksearch cache when the interpreter has no bytecode of its own
    for torch and NumPy; returns the prefix in use (None: the interpreter's own folders)."""
    cache = environ.get(ENV)
    if not cache or sys.pycache_prefix is not None:
        return sys.pycache_prefix
    sources = [_source(name) for name in ("torch", "numpy")]
    sources = [s for s in sources if s]
    if sources and not any(os.path.exists(importlib.util.cache_from_source(s)) for s in sources):
        sys.pycache_prefix = cache
    return sys.pycache_prefix


def _source(name):
    """The `__init__.py` of top-level package `name`, found without importing it, or None."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    return origin if origin and origin.endswith(".py") else None
