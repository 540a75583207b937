"""Per-kernel resource usage from the output of `ptxas -v` (nvcc -Xptxas -v).

ptxas reports, for each entry function (kernel) it compiles:

    ptxas info    : Compiling entry function '_Z5scalePKfPfl' for 'sm_90a'
    ptxas info    : Function properties for _Z5scalePKfPfl
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem

The "Used" line varies with the version and the target: older ones write
"Used 28 registers, 1024 bytes smem, 352 bytes cmem[0], 4 bytes cmem[2]", newer ones add
"used N barriers" and "N bytes cumulative stack size", and CUDA 13 for sm_90a leaves out cmem.
So every field but the register count is optional: what the line does not state is None,
except shared memory, which ptxas omits when it is zero. "Function properties" blocks also come
for non-entry device functions; they carry a stack frame but no "Used" line and are not kernels.
"""

import re

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse(log):
    """Kernels in the order ptxas compiled them: a list of dicts with name, arch, registers,
    spill_store_bytes, spill_load_bytes, stack_frame_bytes, shared_bytes, constant_bytes,
    barriers."""
    kernels = []
    current = None      # the kernel whose "Used" line comes next
    frames = {}         # function name -> (stack frame, spill stores, spill loads)
    properties_of = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = {"name": m.group(1), "arch": m.group(2), "registers": None,
                       "spill_store_bytes": None, "spill_load_bytes": None,
                       "stack_frame_bytes": None, "shared_bytes": None,
                       "constant_bytes": None, "barriers": None}
            kernels.append(current)
            properties_of = None
            continue
        m = _PROPERTIES.search(line)
        if m:
            properties_of = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and properties_of is not None:
            frames[properties_of] = tuple(int(g) for g in m.groups())
            if current is not None and current["name"] == properties_of:
                _set_frame(current, frames[properties_of])
            properties_of = None
            continue
        m = _USED.search(line)
        if m and current is not None and current["registers"] is None:
            current["registers"] = int(m.group(1))
            rest = m.group(2)
            smem = _SMEM.search(rest)
            current["shared_bytes"] = int(smem.group(1)) if smem else 0
            banks = _CMEM.findall(rest)
            if banks:
                current["constant_bytes"] = sum(int(size) for size, _ in banks)
            barriers = _BARRIERS.search(rest)
            if barriers:
                current["barriers"] = int(barriers.group(1))
    for k in kernels:
        if k["stack_frame_bytes"] is None and k["name"] in frames:
            _set_frame(k, frames[k["name"]])
    return [k for k in kernels if k["registers"] is not None]


def _set_frame(kernel, frame):
    kernel["stack_frame_bytes"], kernel["spill_store_bytes"], kernel["spill_load_bytes"] = frame
