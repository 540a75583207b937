"""Backend cpp's arrays are NumPy arrays in this process's memory (ksearch_harness/memory.py's
HostMemory): the module is called here, not in c's worker."""

from ...memory import HostMemory


def memory():
    return HostMemory()
