"""Backends `python` and `triton`: the candidate is a Python module, loaded into the harness's
process from the private build folder, and its entry is called with torch tensors.

`python` is plain PyTorch code (native baselines); `triton` is the same loader with Triton
kernels inside (Triton compiles them at their first call, which is a correctness call, never
a timed one). Calling conventions, `candidate.calling` (docs/protocol.md):

  dps      entry(*inputs, *outputs, *var_axes), writing the outputs in place; an entry
           whose signature takes exactly the inputs and outputs (FlashInfer-Bench's
           destination-passing style) is called without the var axes;
  returns  entry(*inputs), returning the output, or a tuple of outputs in definition order;
  tuple    entry(tuple(inputs)), returning likewise (GPU MODE's custom_kernel(data)).

A class entry (KernelBench's ModelNew) is constructed once, at load, as
`torch.manual_seed(init.seed); obj = cls(*init.args)` (with its dropout modules then put in eval
mode when `init.eval_dropout` is set), moved to the device, then called like `returns`.
Scalars are passed as Python numbers, var axes as ints.
"""

from ..common import pyloader
from ..torch_gpu import GpuBackend
from . import build


class Backend(GpuBackend):
    name = "python"
    allow_cpu = True  # plain PyTorch also runs on a CPU-only torch

    def __init__(self):
        super().__init__()
        self._module = None  # build.Module, once built
        self._loaded = pyloader.LoadOnce("candidate", self._import)

    def build(self, candidate, workdir, limits, arch=None):
        """Write the sources and check their syntax (compile() runs none of their code)."""
        result, module = build.check_module(candidate, workdir, self.name)
        if module is not None:
            self._module = module
            self.compiler = build.compiler()
        return result

    def load(self, spec):
        self._loaded.get(self._module.folder)

    def prepare(self, spec, axes):
        module = self._module
        return build.Kernel(self._loaded.get(module.folder), module.calling_of(), spec, axes,
                            self.mem, self.torch, module.folder)

    def _import(self):
        return self._module.import_entry(self.torch, self.device)
