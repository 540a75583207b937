"""Backend python's arrays are torch tensors on the device (a CUDA device, or the CPU with a
CPU-only torch), as for cuda and triton: torch_gpu/memory.py (TorchMemory)."""
