"""Backend cuda_binding builds and loads with cpp/build.py (compile_module with cuda=True, load,
Kernel): one build of FlashInfer-Bench's bindings for C++ and CUDA alike."""
