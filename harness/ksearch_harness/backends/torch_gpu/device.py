"""A CUDA device through PyTorch, apart from the arrays on it (memory.py): claiming it
(`open_device`), nvcc's arch for it (`arch_of`, and `early_arch` from NVML before torch is
imported), its CUDA context made while torch is imported (`warm_context`), its provenance for
`done` (`describe`), the dtypes a torch tensor can hold, how its errors read, and
compute-sanitizer's log. Imports no NumPy and no torch at module level (`backends.cuda.nvcc`,
which ksearch doctor imports, must load in an interpreter without NumPy).
"""

import ctypes
import os
import sys
import threading

from ...errors import CandidateError, SetupError
from . import info as gpu_info

# Every definition dtype but fp8 and fp4 (check_definition's refusal says so).
TORCH_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                "uint8", "bool")


def open_device(backend, name, allow_cpu=False):
    """(torch, torch.device) for a device name "cuda", "cuda:N" (or "cpu" where allowed).

    Raises SetupError with what to install or change when torch or CUDA is missing.
    """
    needs = (f"the {backend} backend needs PyTorch with CUDA in the harness's Python "
             f"(KSEARCH_PYTHON=/path/to/python selects it)")
    try:
        import torch
    except ImportError as e:
        raise SetupError(f"{needs}: {sys.executable} cannot import torch ({e})",
                         missing="torch") from None
    name = name or "cuda:0"
    kind, _, index = name.partition(":")
    if kind == "cpu" and not index:
        if not allow_cpu:
            raise SetupError(f"the {backend} backend runs kernels on a CUDA device, not on "
                             f"{name!r}; set the device to cuda or cuda:N")
        return torch, torch.device("cpu")
    if kind != "cuda" or not (index == "" or index.isdigit()):
        raise SetupError(f"unknown device {name!r}; expected cuda, cuda:N"
                         + (" or cpu" if allow_cpu else ""))
    index = int(index or 0)
    if torch.version.cuda is None:
        raise SetupError(f"{needs}: {sys.executable} has torch {torch.__version__}, built "
                         f"without CUDA")
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise SetupError(f"{needs}: torch {torch.__version__} (CUDA {torch.version.cuda}) in "
                         f"{sys.executable} finds no usable CUDA device (is the driver loaded? "
                         f"CUDA_VISIBLE_DEVICES={visible!r})")
    count = torch.cuda.device_count()
    if index >= count:
        raise SetupError(f"device {name!r} does not exist: torch sees {count} CUDA "
                         f"device(s), cuda:0 to cuda:{count - 1}")
    torch.cuda.set_device(index)
    return torch, torch.device("cuda", index)


# Compute capabilities whose newest instructions exist only in the arch-specific target
# (`a`): Hopper's wgmma and TMA (9.0), Blackwell's tcgen05 and tensor memory (10.0, 10.3, and
# 11.0, called 10.1 before CUDA 13), and the consumer Blackwell parts (12.0, 12.1).
ARCH_SPECIFIC = {(9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1)}


def arch_of(major, minor):
    """nvcc's -arch for a compute capability: sm_90a on Hopper, sm_100a on the B200 (their
    newest instructions exist only in the arch-specific target), sm_XY elsewhere."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) in ARCH_SPECIFIC else "")


def device_index(name):
    """The CUDA ordinal of a device name ("cuda" -> 0, "cuda:N" -> N), or None."""
    kind, _, index = (name or "cuda:0").partition(":")
    if kind != "cuda" or not (index == "" or index.isdigit()):
        return None
    return int(index or 0)


def early_arch(name):
    """nvcc's -arch for device `name`, read from NVML before torch is imported, so the build can
    start while torch loads; None when it cannot be told that early. Only when every GPU NVML
    sees has the same compute capability: then CUDA's numbering (CUDA_VISIBLE_DEVICES, device
    order) cannot matter. The caller checks it against the device torch opens."""
    if device_index(name) is None:
        return None
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
        if init() != 0:
            return None
    except (OSError, AttributeError):
        return None
    try:
        count = ctypes.c_uint()
        get_count = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
        if get_count(ctypes.byref(count)) != 0 or count.value == 0:
            return None
        by_index = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or \
            lib.nvmlDeviceGetHandleByIndex
        caps = set()
        for i in range(count.value):
            handle, major, minor = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
            if by_index(ctypes.c_uint(i), ctypes.byref(handle)) != 0 or \
                    lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major),
                                                           ctypes.byref(minor)) != 0:
                return None
            caps.add((major.value, minor.value))
        return arch_of(*caps.pop()) if len(caps) == 1 else None
    except (AttributeError, OSError):
        return None
    finally:
        try:
            lib.nvmlShutdown()
        except AttributeError:
            pass


def warm_context(name):
    """Create the device's primary CUDA context on a thread while torch is being imported.

    Creating a context takes a few tenths of a second (the driver maps the device's address
    space); torch's runtime later finds the primary context already made and uses it. ctypes
    releases the GIL during the driver's calls, so the import goes on meanwhile. Failures are
    silent: torch then creates the context itself, as before.
    """
    index = device_index(name)
    if index is None:
        return None

    def work():
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            if lib.cuInit(0) != 0:
                return
            dev, context = ctypes.c_int(), ctypes.c_void_p()
            if lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(index)) != 0:
                return
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), dev)
        except (OSError, AttributeError):
            pass

    thread = threading.Thread(target=work, name="ksearch-cuda-context", daemon=True)
    thread.start()
    return thread


def describe(torch, device):
    """Provenance of the device for the `done` event (docs/protocol.md, Environment)."""
    found = {"kind": device.type, **gpu_info.versions()}
    if device.type != "cuda":
        return found
    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    uuid = f"GPU-{uuid}" if uuid is not None and not str(uuid).startswith("GPU-") else uuid
    found.update({
        "name": props.name,
        "index": device.index,
        "capability": f"{props.major}.{props.minor}",
        "arch": arch_of(props.major, props.minor),
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "uuid": None if uuid is None else str(uuid),
        "cuda_runtime": torch.version.cuda,
        "driver": None, "clocks_mhz": None, "max_clocks_mhz": None,
    })
    # Without CUDA_VISIBLE_DEVICES, the CUDA index is NVML's index too.
    index = device.index if "CUDA_VISIBLE_DEVICES" not in os.environ else None
    found.update(gpu_info.nvml(found["uuid"], index))
    return found


def torch_dtype(torch, name):
    if name not in TORCH_DTYPES:
        return None
    return getattr(torch, name)


def is_device_error(error):
    """True for errors CUDA reported (torch raises RuntimeError or AcceleratorError)."""
    text = str(error)
    return type(error).__name__ == "AcceleratorError" or "CUDA error" in text or \
        "CUDA driver error" in text or "cudaError" in text


def first_line(error, limit=400):
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line[:limit]



class SanitizerLog:
    """New error lines compute-sanitizer wrote to its log file since the last look.

    The supervisor runs the harness under `compute-sanitizer --tool memcheck --log-file PATH`;
    every line of its report starts with "=========". Its banner and summary are not errors.
    """

    MAX_LINES = 12

    def __init__(self, path, tool):
        self.path = path
        self.tool = tool
        self.offset = 0

    def new_errors(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = []
        for line in data.decode("utf-8", "replace").splitlines():
            if not line.startswith("========="):
                continue
            text = line[len("========="):].strip()
            if not text or text.startswith("COMPUTE-SANITIZER") or \
                    text.startswith("ERROR SUMMARY: 0 errors"):
                continue
            lines.append(text)
        return lines[:self.MAX_LINES]

    def check(self, during):
        lines = self.new_errors()
        if lines:
            raise CandidateError("runtime_error", f"compute-sanitizer ({self.tool}) reported "
                                                  f"errors during {during}: "
                                                  + " | ".join(lines))
