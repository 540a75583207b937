"""Backend triton is timed as cuda and python are, with CUDA events behind the gate:
torch_gpu/timing.py. Its kernels launch on torch's current stream, so a CUDA graph can capture
them (python/build.py's Kernel says graph_capturable on a CUDA device)."""
