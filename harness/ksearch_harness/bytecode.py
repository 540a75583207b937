"""Where the interpreter reads compiled bytecode from (issue 16).

Python keeps a module's compiled bytecode in `__pycache__` beside its source. Where that folder
cannot be written (a read-only image, a pip `--no-compile` install), every process compiles the
sources it imports again: on the H200 machine `import torch` spent 3.2 of its 5.0 s in
`compile()`. ksearch then names a cache of its own (KSEARCH_BYTECODE_CACHE, under the ksearch
cache folder), and the interpreter reads and writes bytecode there instead (`sys.pycache_prefix`).

The decision is the same in every process of one interpreter: only when torch (or, without
torch, NumPy) has no bytecode beside its sources. Where it has, the prefix would hide the
bytecode that is there, so it is not set. The warm server (crates/eval/src/warm_server.py) makes
the same decision with its own copy of this code, since it loads no harness module, and it alone
writes the cache: harness processes run with PYTHONDONTWRITEBYTECODE and only read it.
"""

import importlib.util
import os
import sys

ENV = "KSEARCH_BYTECODE_CACHE"


def choose(environ=os.environ):
    """Set sys.pycache_prefix to the ksearch cache when the interpreter's own bytecode of torch
    (else NumPy) is missing; returns the prefix in use (None: the interpreter's own folders)."""
    cache = environ.get(ENV)
    if not cache or sys.pycache_prefix is not None:
        return sys.pycache_prefix
    for name in ("torch", "numpy"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = getattr(spec, "origin", None) if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        if not os.path.exists(importlib.util.cache_from_source(origin)):
            sys.pycache_prefix = cache
        break
    return sys.pycache_prefix
