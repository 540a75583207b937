"""Nothing to build here: torch_gpu is the shared base of cuda, python and triton, and each of them
builds and loads its own candidate (cuda/build.py, python/build.py)."""
