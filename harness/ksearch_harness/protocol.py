"""The protocol stream: JSON lines on a descriptor that candidate output cannot reach.

Rust parses every line as untrusted input, so lines are strict JSON: non-finite floats become
null instead of the NaN/Infinity literals json.dumps would otherwise write.

Authentication: when the request carries `auth.key` (ksearch always sends a fresh one), every
line after the request was read ends in a tab and the hex HMAC-SHA256, under that key, of
"SEQ:" followed by the JSON text, SEQ counting authenticated lines from 0. Anything that writes
into the stream without the key (a candidate that reopened the pipe through /proc) cannot make
a line ksearch accepts, nor replay, drop or reorder one unnoticed.
"""

import hashlib
import hmac
import json
import math
import os
import time


class Channel:
    """Writes protocol lines, and clocks the stages that `progress` lines announce."""

    def __init__(self, fd):
        self._fd = fd
        # Seconds spent per stage, reported in `done`: where an evaluation's time goes.
        self.stages = {}
        self._stage = "startup"
        self._since = time.perf_counter()
        self.last_progress = None  # (stage, workload, trial) of the last progress line
        self._key = None
        self._seq = 0

    def authenticate(self, auth):
        """Take the request's `auth` object; from now on every line carries its code."""
        if auth is None:
            return
        key = auth.get("key") if isinstance(auth, dict) else None
        try:
            raw = bytes.fromhex(key) if isinstance(key, str) else b""
        except ValueError:
            raw = b""
        if len(raw) < 16:
            raise ValueError("auth.key must be at least 16 bytes of hex")
        self._key = raw

    def close_stage(self, next_stage=None):
        now = time.perf_counter()
        self.stages[self._stage] = self.stages.get(self._stage, 0.0) + (now - self._since)
        self._stage, self._since = next_stage or "finish", now

    def emit(self, event, **fields):
        line = json.dumps(_strict({"event": event, **fields}), allow_nan=False,
                          separators=(",", ":"))
        data = line.encode("utf-8")
        if self._key is not None:
            code = hmac.new(self._key, f"{self._seq}:".encode() + data, hashlib.sha256)
            data += b"\t" + code.hexdigest().encode()
            self._seq += 1
        data += b"\n"
        # os.write straight to the descriptor: no buffer a crash could strand.
        while data:
            data = data[os.write(self._fd, data):]

    def progress(self, stage, workload=None, trial=None):
        self.close_stage(stage)
        self.last_progress = (stage, workload, trial)
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
