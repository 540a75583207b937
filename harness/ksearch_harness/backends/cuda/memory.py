"""Backend cuda's arrays are torch tensors on the CUDA device, as those of python and triton are:
torch_gpu/memory.py (TorchMemory), made by torch_gpu's GpuBackend.memory. Nothing of cuda's own
is needed: the candidate gets the tensors' device pointers (build.Kernel)."""
