"""Backend python is timed as cuda and triton are: torch_gpu/timing.py (CUDA events behind the
gate on a CUDA device; on a CPU device, the CPU's loop, ksearch_harness/timing.py)."""
