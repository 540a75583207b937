"""Backends by `device.backend` name.

A backend object provides:
  name                               the registry key;
  bfloat16_as_float32                whether bfloat16 arrays exist (as float32 on the host);
  open(request)                      claim the device (GPU backends import torch here and
                                        raise SetupError when they cannot);
  describe()                         the device's provenance for `done`, or None;
  memory(spec, reference)            where the candidate's arrays live (memory.HostMemory,
                                        gpu.TorchMemory);
  device_room()                      (free bytes, description) of the device, or None;
  sanitizer(settings)                the request's `sanitize` watcher, or None;
  check_definition(spec)             raise TaskError for dtypes or scalars it cannot pass;
  build(candidate, workdir, limits)  -> dict for the `compile` event (ok, seconds, command, log;
                                        GPU backends add resources, cached, arch);
  load(spec)                         load the candidate (runs its code: constructors), raising
                                        CandidateError (runtime_error) when unloadable;
  prepare(spec, axes)                -> Kernel with bind(inputs, outputs) -> zero-argument call
                                        and results(returned, outputs, shapes) -> the outputs,
                                        raising CandidateError (runtime_error) when unloadable;
  time_pairs(session, settings)      the timing loop suited to the device (timing.py,
                                        gpu_timing.py);
  compiler                           version string for the `done` event, or None.
Modules are imported on demand so that a run pays only for the backend it uses.
"""

import importlib

_MODULES = {
    "c": ("ksearch_harness.backends.c", "Backend"),
    "cuda": ("ksearch_harness.backends.cuda", "Backend"),
    "python": ("ksearch_harness.backends.python", "Backend"),
    "triton": ("ksearch_harness.backends.python", "TritonBackend"),
    "mlx": ("ksearch_harness.backends.mlx", "Backend"),
}


def get(name):
    if name not in _MODULES:
        raise ValueError(f"backend {name!r} is not implemented by this harness "
                         f"(available: {', '.join(sorted(_MODULES))})")
    module, cls = _MODULES[name]
    return getattr(importlib.import_module(module), cls)()
