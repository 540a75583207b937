"""Backend triton's arrays are torch tensors on the CUDA device, as for cuda and python:
torch_gpu/memory.py (TorchMemory)."""
