"""Provenance of CPU numbers: the CPU an evaluation ran on, its ISA extensions, vector width,
caches and cores.

Backend c reports this as `done.environment.device` (docs/protocol.md, Lines the harness
writes), so every record says on what CPU its times were taken: a kernel using AVX-512 is not
comparable with one timed where there is none, nor a blocking tuned for a 48 KB L1d with one
timed on a 32 KB one. Read from /proc/cpuinfo and /sys/devices/system/cpu/cpu0/cache on Linux,
from `sysctl` on macOS; what cannot be read is None, never guessed. ksearch detects the same
facts where it builds a task's prompts (crates/run/src/knowledge/host.rs).
"""

import os
import platform
import subprocess

# ISA extensions worth recording, in the kernel's spelling (x86 `flags`, Arm `Features`).
NOTABLE = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2", "sme",
)

# macOS sysctl names of the same extensions.
_SYSCTL_FLAGS = {
    "hw.optional.sse4_2": "sse4_2", "hw.optional.avx1_0": "avx", "hw.optional.avx2_0": "avx2",
    "hw.optional.fma": "fma", "hw.optional.f16c": "f16c", "hw.optional.avx512f": "avx512f",
    "hw.optional.avx512dq": "avx512dq", "hw.optional.avx512cd": "avx512cd",
    "hw.optional.avx512bw": "avx512bw", "hw.optional.avx512vl": "avx512vl",
    "hw.optional.avx512ifma": "avx512ifma", "hw.optional.avx512vbmi": "avx512vbmi",
    "hw.optional.avx512vnni": "avx512_vnni", "hw.optional.neon": "asimd",
    "hw.optional.AdvSIMD": "asimd", "hw.optional.neon_fp16": "asimdhp",
    "hw.optional.arm.FEAT_FP16": "asimdhp", "hw.optional.arm.FEAT_DotProd": "asimddp",
    "hw.optional.arm.FEAT_I8MM": "i8mm", "hw.optional.arm.FEAT_BF16": "bf16",
    "hw.optional.arm.FEAT_SME": "sme",
}

_VENDORS = {"AuthenticAMD": "amd", "GenuineIntel": "intel", "0x41": "arm", "0x61": "apple",
            "0xc0": "ampere", "0x48": "hisilicon", "0x51": "qualcomm", "0x4e": "nvidia"}


def parse_cpuinfo(text):
    """{"name", "vendor", "flags" (set), "processors"} of /proc/cpuinfo's text: the first
    processor's model (`model name`; on Arm `CPU implementer` and `CPU part`) and flags."""
    name = vendor = implementer = part = None
    flags = None
    processors = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            processors += 1
        elif key in ("model name", "Model name") and name is None and value:
            name = value
        elif key == "vendor_id" and vendor is None:
            vendor = _VENDORS.get(value, value)
        elif key in ("flags", "Features") and flags is None:
            flags = set(value.split())
        elif key == "CPU implementer" and implementer is None:
            implementer = value
        elif key == "CPU part" and part is None:
            part = value
    if implementer is not None:
        vendor = vendor or _VENDORS.get(implementer, implementer)
        name = name or f"Arm CPU (implementer {implementer}, part {part or '?'})"
    return {"name": name, "vendor": vendor, "flags": flags or set(), "processors": processors}


def _size_kb(text):
    text = text.strip()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(text[-1:].upper())
    try:
        return float(text[:-1]) * scale if scale else float(text) / 1024
    except ValueError:
        return None


def _count(cpu_list):
    """How many CPUs a list such as `0-3,8-11` or `0,2` names (None when it is not one)."""
    n = 0
    for part in filter(None, cpu_list.strip().split(",")):
        a, sep, b = part.partition("-")
        if not (a.isdigit() and (b.isdigit() or not sep)):
            return None
        n += int(b) - int(a) + 1 if sep else 1
    return n if n > 0 else None


def read_caches(folder="/sys/devices/system/cpu/cpu0/cache"):
    """{"l1d_kb", "l2_kb", "l2_shared_by", "l3_kb", "l3_shared_by", "line_bytes"} from sysfs's
    index*/ folders (level, type, size, shared_cpu_list, coherency_line_size); None where absent."""
    found = dict.fromkeys(("l1d_kb", "l2_kb", "l2_shared_by", "l3_kb", "l3_shared_by",
                           "line_bytes"))
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith("index"))
    except OSError:
        return found

    def read(index, name):
        try:
            with open(os.path.join(folder, index, name), encoding="ascii", errors="replace") as f:
                return f.read().strip()
        except OSError:
            return None

    for index in names:
        level, kind, size = read(index, "level"), read(index, "type"), read(index, "size")
        kb = _size_kb(size) if size else None
        if kb is None or kind not in ("Data", "Unified"):
            continue
        shared = read(index, "shared_cpu_list")
        shared = _count(shared) if shared else None
        line = read(index, "coherency_line_size")
        if found["line_bytes"] is None and line and line.isdigit():
            found["line_bytes"] = int(line)
        if level == "1":
            found["l1d_kb"] = kb
        elif level in ("2", "3"):
            found[f"l{level}_kb"], found[f"l{level}_shared_by"] = kb, shared
    return found


def parse_sysctl(text):
    """The same description from `sysctl hw machdep.cpu`'s `name: value` lines (macOS)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip()

    def number(*keys):
        for key in keys:
            try:
                v = float(values[key])
            except (KeyError, ValueError):
                continue
            if v > 0:
                return v
        return None

    def kb(*keys):
        v = number(*keys)
        return None if v is None else v / 1024

    name = values.get("machdep.cpu.brand_string")
    vendor = None
    if name:
        vendor = "apple" if name.startswith("Apple") else "intel" if "Intel" in name else None
    l2_shared = number("hw.perflevel0.cpusperl2")
    line = number("hw.cachelinesize")
    logical = number("hw.logicalcpu")
    return {
        "name": name, "vendor": vendor,
        "flags": {flag for key, flag in _SYSCTL_FLAGS.items() if values.get(key) == "1"},
        "processors": int(logical) if logical else 0,
        "caches": {
            "l1d_kb": kb("hw.perflevel0.l1dcachesize", "hw.l1dcachesize"),
            "l2_kb": kb("hw.perflevel0.l2cachesize", "hw.l2cachesize"),
            "l2_shared_by": int(l2_shared) if l2_shared else None,
            "l3_kb": kb("hw.l3cachesize"), "l3_shared_by": None,
            "line_bytes": int(line) if line else None,
        },
    }


def vector_bits(flags, sve_bits=None):
    """The widest fp32 vector registers the flags give: 512 (AVX-512F), 256 (AVX), 128 (SSE,
    NEON), SVE's length where the kernel says; None when the flags say nothing."""
    if "sve" in flags and sve_bits:
        return sve_bits
    if "avx512f" in flags:
        return 512
    if "avx" in flags:
        return 256
    if flags & {"sse2", "sse4_2", "asimd"}:
        return 128
    return None


def _sve_bits():
    try:
        with open("/proc/sys/abi/sve_default_vector_length", encoding="ascii") as f:
            return int(f.read().strip()) * 8
    except (OSError, ValueError):
        return None


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def describe():
    """The CPU for the `done` event's environment: kind, name, vendor, arch, isa (the notable
    extensions present), vector_bits, cores (usable by this process), logical_cpus, caches."""
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "hw", "machdep.cpu"], capture_output=True,
                                 timeout=10, stdin=subprocess.DEVNULL)
            info = parse_sysctl(out.stdout.decode("utf-8", "replace"))
        except (OSError, subprocess.TimeoutExpired):
            info = parse_sysctl("")
        caches, sve = info["caches"], None
        source = "sysctl"
    else:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                info = parse_cpuinfo(f.read())
        except OSError:
            info = parse_cpuinfo("")
        caches, sve = read_caches(), _sve_bits()
        source = "/proc/cpuinfo, /sys/devices/system/cpu/cpu0/cache"
    flags = info["flags"]
    return {
        "kind": "cpu",
        "name": info["name"] or platform.processor() or None,
        "vendor": info["vendor"],
        "arch": platform.machine() or None,
        "isa": [f for f in NOTABLE if f in flags],
        "vector_bits": vector_bits(flags, sve),
        "cores": _cores(),
        "logical_cpus": info["processors"] or None,
        "caches": caches,
        "source": source,
    }
