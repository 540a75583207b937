"""An experiment of bench/mlx_timing_probe.py: MLX's buffer cache off on its CUDA backend, with
CUDA's default pool keeping its memory, so that no device request lands in a buffer the host
touched. The harness applied this for one session (11) and dropped it: the probe measured no
gain, and with the cache off every intermediate of an MLX reference (2 GiB of scores in
mlx_attention's) is allocated inside its timed call (bench/results/searches.md, Session 11).

Why. On MLX's CUDA backend (0.32) one buffer cache holds two kinds of memory: device buffers
(cudaMallocAsync, what a kernel's outputs get) and managed buffers (cudaMallocManaged, what an
array made from NumPy gets, and what a device buffer becomes once the host reads it). A request
for either kind takes any cached buffer of a fitting size. The harness touches buffers on the
host on every call (fresh inputs from NumPy, outputs copied back for the comparison), so the
cache fills with managed buffers whose pages sit on the host, and a later device request (a
timed call's outputs, or the device copy of an input, memory.py) can land in one of them, so the
kernel works on managed memory instead of device memory. On its own this setting changed nothing
measurable in session 11's probe (bench/results/raw-2026-12-02-session11/probe.txt), because the
inputs' device copies were then donated host buffers anyway (memory.py, "Residency"); it keeps a
device copy from landing in a recycled managed buffer once that is fixed.

What. MLX's own cache is turned off (`mx.set_cache_limit(0)`): a freed buffer goes back to CUDA
at once, so a managed buffer is never reused by a kernel. Device buffers then come from CUDA's
stream-ordered pool; that pool hands memory back to the OS at every synchronisation unless its
release threshold says otherwise, and mapping memory again inside a timed call would be a cost
of its own, so the device's default pool (the one MLX allocates from) is told to keep what it
holds. The threshold is set through the CUDA driver (libcuda, present wherever the GPU is); if
that cannot be done, MLX's cache is left as it is and the note says why, since an empty cache
over a pool that unmaps memory would be worse than the faults.

Apple GPUs have truly unified memory (no pages move), so this is for the cuda dialect only.
"""

import ctypes

# CUmemPool_attribute (cuda.h): CU_MEMPOOL_ATTR_RELEASE_THRESHOLD.
_RELEASE_THRESHOLD = 4
_KEEP_ALL = ctypes.c_uint64(2 ** 64 - 1)


def retain_device_pool(device=0, load=ctypes.CDLL):
    """Tell the CUDA device's default memory pool to keep the memory it holds across
    synchronisations. Returns None when done, else why not (a sentence)."""
    try:
        cuda = load("libcuda.so.1")
    except OSError as e:
        return f"the CUDA driver library could not be loaded ({e})"
    dev = ctypes.c_int(0)
    pool = ctypes.c_void_p(0)
    steps = (("cuInit", lambda: cuda.cuInit(0)),
             ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev), device)),
             ("cuDeviceGetDefaultMemPool",
              lambda: cuda.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev)),
             ("cuMemPoolSetAttribute",
              lambda: cuda.cuMemPoolSetAttribute(pool, _RELEASE_THRESHOLD,
                                                 ctypes.byref(_KEEP_ALL))))
    for name, step in steps:
        try:
            code = step()
        except (AttributeError, OSError, ctypes.ArgumentError) as e:
            return f"{name} could not be called ({e})"
        if code != 0:
            return f"{name} returned CUDA error {code}"
    return None


def configure(mx, dialect, on_gpu, retain=retain_device_pool):
    """Set MLX's allocator for timing on this device; returns a note for the record's
    environment (what was done, or why nothing was)."""
    if not on_gpu or dialect != "cuda":
        return None
    why_not = retain()
    if why_not is not None:
        return (f"MLX's buffer cache left on: the CUDA pool's release threshold could not be "
                f"raised ({why_not}); timed calls may fault in host-touched pages")
    mx.set_cache_limit(0)
    mx.clear_cache()  # what was cached before this (the backend's own set-up) goes too
    return ("MLX's buffer cache off (freed buffers go back to CUDA, so host-touched managed "
            "buffers are never reused by a timed call); CUDA's default pool keeps its memory")
