"""A minimal reader of the safetensors format, so tasks need no safetensors package.

Layout: 8-byte little-endian header length N, N bytes of JSON header mapping tensor names to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of the header),
then the raw little-endian data.
"""

import json
import os

import numpy as np

_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}
_MAX_HEADER = 100 << 20


class SafetensorsError(ValueError):
    pass


def read_header(f, size):
    raw = f.read(8)
    if len(raw) != 8:
        raise SafetensorsError("the file is shorter than the 8-byte header length")
    n = int.from_bytes(raw, "little")
    if n > min(_MAX_HEADER, size - 8):
        raise SafetensorsError(f"the header length {n} exceeds the file")
    try:
        header = json.loads(f.read(n))
    except ValueError as e:
        raise SafetensorsError(f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError("the header is not a JSON object")
    return header, 8 + n


def load(path, key):
    """Return tensor `key` of the file at `path` as a fresh, writeable NumPy array."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        header, base = read_header(f, size)
        if key not in header or key == "__metadata__":
            names = sorted(k for k in header if k != "__metadata__")
            raise SafetensorsError(f"no tensor {key!r} (the file has {', '.join(names) or 'none'})")
        meta = header[key]
        code = meta.get("dtype")
        if code not in _DTYPES:
            raise SafetensorsError(f"tensor {key!r} has dtype {code!r}, which NumPy cannot hold")
        dtype = np.dtype(_DTYPES[code])
        shape = tuple(int(d) for d in meta.get("shape", []))
        begin, end = (int(o) for o in meta.get("data_offsets", (0, -1)))
        count = 1
        for d in shape:
            count *= d
        if begin < 0 or end < begin or base + end > size or end - begin != count * dtype.itemsize:
            raise SafetensorsError(f"tensor {key!r} has data_offsets {[begin, end]} that do not "
                                   f"match its shape {list(shape)} and dtype {code} in the file")
        f.seek(base + begin)
        data = bytearray(f.read(end - begin))
    return np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
