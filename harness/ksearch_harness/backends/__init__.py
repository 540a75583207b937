"""Backends by `device.backend` name.

A backend object provides:
  name                               the registry key;
  check_definition(spec)             raise TaskError for dtypes or scalars it cannot pass;
  build(candidate, workdir, limits)  -> dict for the `compile` event (ok, seconds, command, log);
  load(spec)                         load the candidate (runs its code: constructors), raising
                                        CandidateError (runtime_error) when unloadable;
  prepare(spec, axes)                -> Kernel with bind(inputs, outputs) -> zero-argument call,
                                        raising CandidateError (runtime_error) when unloadable;
  time_pairs(session, settings)      the timing loop suited to the device (see timing.py);
  compiler                           version string for the `done` event, or None.
Modules are imported on demand so that a run pays only for the backend it uses.
"""

import importlib

_MODULES = {
    "c": "ksearch_harness.backends.c",
    # "cuda", "triton", "mlx": to come, each a module exposing Backend.
}


def get(name):
    if name not in _MODULES:
        raise ValueError(f"backend {name!r} is not implemented by this harness "
                         f"(available: {', '.join(sorted(_MODULES))})")
    return importlib.import_module(_MODULES[name]).Backend()
