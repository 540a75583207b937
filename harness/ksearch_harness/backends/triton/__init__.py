"""Backend `triton`: the candidate is a Python module with Triton kernels inside, served by backend
python's loader (python/__init__.py says how it is called); Triton compiles the kernels at their
first call, which is a correctness call, never a timed one. Unlike python, it needs a CUDA
device (Triton has no CPU target here).
"""

from .. import python


class Backend(python.Backend):
    name = "triton"
    allow_cpu = False
