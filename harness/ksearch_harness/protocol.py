"""The protocol stream: JSON lines on a descriptor that candidate output cannot reach.

Rust parses every line as untrusted input, so lines are strict JSON: non-finite floats become
null instead of the NaN/Infinity literals json.dumps would otherwise write.
"""

import json
import math
import os


class Channel:
    def __init__(self, fd):
        self._fd = fd

    def emit(self, event, **fields):
        line = json.dumps(_strict({"event": event, **fields}), allow_nan=False,
                          separators=(",", ":"))
        data = (line + "\n").encode("utf-8")
        # os.write straight to the descriptor: no buffer a crash could strand.
        while data:
            data = data[os.write(self._fd, data):]

    def progress(self, stage, workload=None, trial=None):
        self.emit("progress", stage=stage, workload=workload, trial=trial)


def claim_stdout():
    """Move the protocol to a private copy of fd 1 and point fd 1 at stderr.

    After this, C printf and Python print from candidates and references land in the captured
    log. os.dup makes the copy non-inheritable, so compilers we spawn do not get it either.
    """
    fd = os.dup(1)
    os.dup2(2, 1)
    return Channel(fd)


def _strict(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if hasattr(value, "item"):  # NumPy scalars
        return _strict(value.item())
    return str(value)
