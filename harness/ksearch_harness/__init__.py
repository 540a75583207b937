"""ksearch's evaluation harness: `python3 -m ksearch_harness` speaks docs/protocol.md.

It runs a candidate kernel and the task's reference side by side in one process that the Rust
`eval` layer supervises; everything it reports is raw (error counts, timing samples) so that the
verdict and the statistics are computed outside the process that hosts untrusted code.

Standard library and NumPy only (PyTorch only when a reference imports it). Tests, from the
repository root: python3 -m unittest discover -s harness/tests -t harness
"""

# Raised when a change moves the times it measures (0.3.0: the mlx backend's timed calls get
# their inputs from device pools; 0.4.0: the mlx backend tests each timed call on the device,
# backends/mlx/checks.py, so a workload's timing budget holds many more calls than 5 to 7;
# 0.4.1: a candidate stays behind its gate when only the reference's expires, while its launch
# path is short, backends/torch_gpu/gate_policy.py; 0.4.2: that decision waits for three gated
# launches): the
# engine compares times of one version only and measures a run's best again by a newer one
# (docs/engine.md, "Re-measuring a noisy best").
__version__ = "0.4.2"

# Before anything imports NumPy or torch: where their bytecode comes from (bytecode.py).
from . import bytecode as _bytecode  # noqa: E402

_bytecode.choose()
