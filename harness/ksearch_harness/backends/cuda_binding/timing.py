"""Backend cuda_binding is timed as cuda, python and triton are, with CUDA events behind the
gate: torch_gpu/timing.py (GpuBackend.time_pairs). Its Kernel says graph_capturable = False:
a module's kernels may launch on the legacy default stream."""
