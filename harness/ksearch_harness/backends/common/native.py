"""The calling convention that backends c and cuda share (docs/protocol.md): a native entry in
destination-passing style, called through ctypes with the inputs in definition order (arrays as
pointers, scalars by value as below), then the outputs as pointers, then every var axis as
int64_t."""

import ctypes

# The scalar inputs a native entry can take by value, as ctypes types.
SCALARS = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "bool": ctypes.c_bool, "int16": ctypes.c_int16,
    "int8": ctypes.c_int8, "uint8": ctypes.c_uint8,
}
