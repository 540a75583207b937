"""Backend `triton`: the candidate is a Python module with Triton kernels inside, served by backend
python's loader (python/__init__.py says how it is called); Triton compiles the kernels at their
first call, which is a correctness call, never a timed one. Unlike python, it is not run on a
CPU device (allow_cpu is False).
"""

from .. import python


class Backend(python.Backend):
    name = "triton"
    allow_cpu = False
