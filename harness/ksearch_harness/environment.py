"""Provenance for the `done` event: what produced these numbers."""

import platform
import sys


def collect(compiler=None, device=None):
    """`device`: what a GPU backend found (torch_gpu/device.py's describe: name, driver, versions, clocks)."""
    numpy = sys.modules.get("numpy")
    found = {
        "python": platform.python_version(),
        "numpy": getattr(numpy, "__version__", None),
        "compiler": compiler,
        "cpu": _cpu(),
        "platform": platform.platform(),
    }
    if device is not None:
        found["device"] = device
    return found


def _cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None
