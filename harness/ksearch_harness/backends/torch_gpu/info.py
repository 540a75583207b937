"""Provenance of GPU numbers: the device, its driver and clocks, and the software versions.

Clocks and the driver version come from NVML (libnvidia-ml, part of the driver) through ctypes,
so no Python package is needed; where NVML is missing or refuses, those fields are None. A
number measured at a throttled clock is not comparable with one at the boost clock, which is why
the current and maximum clocks are recorded with every evaluation.
"""

import ctypes
import importlib.metadata


def versions():
    """Installed versions of the packages GPU numbers depend on (None when absent)."""
    found = {}
    for name in ("torch", "triton"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


# nvmlClockType_t
_CLOCKS = {"graphics": 0, "sm": 1, "memory": 2}


def nvml(uuid=None, index=None):
    """{"driver": str, "clocks_mhz": {...}, "max_clocks_mhz": {...}} from NVML, or {} where it
    cannot be read. The device is found by UUID ("GPU-..."), else by NVML index."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return {}
    try:
        init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
        if init() != 0:
            return {}
    except AttributeError:
        return {}
    found = {}
    try:
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) == 0:
            found["driver"] = buf.value.decode("ascii", "replace")
        handle = ctypes.c_void_p()
        ok = False
        if uuid:
            ok = lib.nvmlDeviceGetHandleByUUID(uuid.encode("ascii"), ctypes.byref(handle)) == 0
        if not ok and index is not None:
            by_index = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or \
                lib.nvmlDeviceGetHandleByIndex
            ok = by_index(ctypes.c_uint(index), ctypes.byref(handle)) == 0
        if ok:
            found["clocks_mhz"] = _clocks(lib.nvmlDeviceGetClockInfo, handle)
            found["max_clocks_mhz"] = _clocks(lib.nvmlDeviceGetMaxClockInfo, handle)
    except (AttributeError, OSError, UnicodeError):
        pass
    finally:
        try:
            lib.nvmlShutdown()
        except AttributeError:
            pass
    return found


def _clocks(query, handle):
    values = {}
    for name, kind in _CLOCKS.items():
        mhz = ctypes.c_uint()
        values[name] = mhz.value if query(handle, ctypes.c_int(kind), ctypes.byref(mhz)) == 0 \
            else None
    return values
