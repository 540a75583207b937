"""Backend cuda is timed as python and triton are, with CUDA events behind the gate:
torch_gpu/timing.py (GpuBackend.time_pairs). The one difference is the kernel's: the candidate
launches on the legacy default stream, which CUDA cannot capture into a graph, so its Kernel says
graph_capturable = False (build.py)."""
