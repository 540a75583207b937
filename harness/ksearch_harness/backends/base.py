"""The contract every harness backend keeps: the class `Backend`, and the files of its package.

Each backend is a package under backends/ named by its `device.backend` (c, cpp, cuda, cuda_binding, mlx, python,
triton), whose `Backend` class subclasses the one here, and every package has the same files
(FILES), as MLX's own backends do (one interface, implemented per backend under the same file
names, with stubs where a backend has nothing to put):

  __init__.py   the Backend class: this contract's methods, short, calling the files below;
  build.py      the candidate compiled or checked, loaded, and its call (the kernel `prepare`
                returns);
  memory.py     where the candidate's arrays live: inputs, outputs, uploads, the L2 flush (an
                object with the methods listed in ksearch_harness/memory.py);
  timing.py     the timing loop suited to the device (`time_pairs`).

A file a backend does not need is a short stub saying where that part lives and why. Files
beyond these sit beside them only where a backend needs them (cuda/nvcc.py, mlx/spec.py).
backends/common/ is shared code and no backend; backends/torch_gpu/ is the shared base of the
backends that run on a CUDA device through PyTorch (cuda, python, triton), with the same files.
harness/tests/test_backend_contract.py checks every backend against this module.

The methods, in the order evaluate.py calls them (`profile` and `check_task` call a prefix;
mode `build` calls only prepare_build and build). The abstract ones every backend implements;
the others are optional hooks whose default here is what a backend without them needs, so
callers never ask whether a backend has one.
"""

import abc

from ..errors import TaskError

# The files of every backend package (and of backends/torch_gpu/).
FILES = ("__init__.py", "build.py", "memory.py", "timing.py")


class Backend(abc.ABC):
    """One kernel language: how its candidate is built, loaded, called and timed, and where."""

    name = None
    """The registry key (`device.backend` in the request); set by every backend class."""

    bfloat16_as_float32 = False
    """Whether bfloat16 arrays exist for this backend, drawn as float32 on the host and rounded
    where the candidate's arrays live; False: a bfloat16 definition is a task error."""

    builds_early = False
    """Whether evaluate.py may start `build(..., arch=...)` on a thread before `open`, for the
    arch the request gives or NVML reports (backend cuda: nvcc runs while torch loads), and
    build again when `arch()` after `open` differs."""

    compiler = None
    """The compiler's version for the `done` event, set by `build`; None when unknown."""

    def before_open(self, request):
        """Called first in evaluate, before `open`: work that can start while `open` imports its
        libraries (the torch GPU backends create the CUDA context on a thread). Default:
        nothing."""

    @abc.abstractmethod
    def open(self, request):
        """Claim the device the request names (`device.name`). GPU backends import torch or MLX
        here and raise SetupError (with `missing`) when they cannot."""

    @abc.abstractmethod
    def describe(self):
        """The device's provenance for `done.environment.device` (a dict), or None."""

    @abc.abstractmethod
    def check_definition(self, spec):
        """Raise TaskError for the definition's dtypes or scalars this backend cannot pass."""

    def device_room(self):
        """(free bytes, a description of them) of the device, which bounds a workload's arrays
        beside the host's address space; None where the arrays live in host memory (the
        default)."""
        return None

    def device_need(self, trials, inputs, output_bytes):
        """(bytes, why) the device must hold at once for a workload whose inputs take
        `inputs` bytes each (a list) and whose outputs take `output_bytes`, in one copy,
        evaluated with `trials` correctness trials: what `device_room` is compared with before
        anything runs. The default is one copy; a backend that knows its arrays' lifetimes
        counts them (a lower bound: a workload refused by it could not have fitted)."""
        return sum(inputs) + output_bytes, "one copy of its inputs and outputs"

    @abc.abstractmethod
    def memory(self, spec, reference):
        """Where the candidate's arrays live for this run (called once, after `open`): an
        object with the methods of ksearch_harness/memory.py (memory.HostMemory, c's
        SharedMemory, torch_gpu's TorchMemory, mlx's MlxMemory). `reference` is the task's
        reference.Reference (it says whether the reference runs on the device)."""

    def sanitizer(self, settings):
        """The request's `sanitize` watcher (an object with `check(during)`), or None when
        `settings` is empty. Default: no sanitizer, so any settings are a task error."""
        if settings:
            raise TaskError("sanitize", f"backend {self.name} has no sanitizer (leave sanitize "
                                        f"unset)")
        return None

    def prepare_build(self, request):
        """Mode `build` (no device: `open` is not called): set up what `build` reads from the
        request. Default: nothing."""

    def arch(self):
        """The opened device's architecture in the form `build(arch=...)` takes (nvcc's -arch),
        or None where builds are not made per arch (the default)."""
        return None

    @abc.abstractmethod
    def build(self, candidate, workdir, limits, arch=None):
        """Compile or check the request's `candidate` in `workdir`, running none of its code,
        and set `compiler`. Returns the `compile` event's fields as a dict: ok, seconds,
        command, log (backend cuda adds resources, cached, arch). A candidate that does not
        build is ok false, not an exception; a missing tool is a SetupError. `limits`: the
        request's limits (compile_timeout_s, log_bytes). `arch`: the target to build for
        (backend cuda's early build, see `builds_early`); None: the backend's own choice;
        backends that build for no arch ignore it."""

    @abc.abstractmethod
    def load(self, spec):
        """Load the built candidate, which runs its code (constructors, module level), raising
        CandidateError (runtime_error) when it cannot be loaded; every later `load` and
        `prepare` raise the same again."""

    @abc.abstractmethod
    def prepare(self, spec, axes):
        """The kernel for one workload's axes, an object with
        bind(inputs, outputs) -> a zero-argument call of the candidate on those arrays, and
        results(returned, outputs, shapes) -> the outputs in definition order (raising
        CandidateError for a wrong dtype or shape); optionally `graph_capturable` (true where a
        CUDA graph can capture the call: torch_gpu/timing.py). Raises CandidateError
        (runtime_error) when the candidate is unloadable."""

    @abc.abstractmethod
    def time_pairs(self, session, settings):
        """The timing loop suited to the device: (candidate, reference) pairs of calls driven
        through `session` (session.TimingSession) under the request's `timing` settings,
        returning the raw samples (ksearch_harness/timing.py's time_pairs is the CPU's)."""
