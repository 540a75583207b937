"""Backend cuda_binding's arrays are torch tensors on the CUDA device, as cuda's are:
torch_gpu/memory.py (TorchMemory), made by torch_gpu's GpuBackend.memory."""
