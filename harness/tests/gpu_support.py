"""Requests for the GPU backends' tests: small tasks with torch references, and the checks of
whether torch (and a CUDA device) can be used by this interpreter."""

import copy
import importlib.util
import os
import sys

from tests.support import request

_TORCH = None


def torch_or_skip(test, cuda=False):
    """The torch module, or skip the test (printing why) when it or a CUDA device is missing."""
    global _TORCH
    if _TORCH is None:
        if importlib.util.find_spec("torch") is None:
            _TORCH = False
        else:
            import torch
            _TORCH = torch
    if _TORCH is False:
        reason = f"{sys.executable} has no torch"
    elif cuda and not _TORCH.cuda.is_available():
        reason = "no CUDA device"
    else:
        return _TORCH
    if os.environ.get("KSEARCH_REQUIRE_GPU") == "1" and (cuda or _TORCH is False):
        test.fail(f"KSEARCH_REQUIRE_GPU=1 but {reason}")
    print(f"skipping {test.id()}: {reason}", file=sys.stderr)
    test.skipTest(reason)


# Row softmax over a var-length last axis, with a torch reference (float64 inside).
SOFTMAX = {
    "name": "softmax_gpu",
    "op_type": "softmax",
    "axes": {"M": {"type": "var"}, "N": {"type": "var"}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}},
    "reference": ("import torch\n"
                  "def run(x):\n"
                  "    return torch.softmax(x.double(), dim=-1).float()\n"),
}
SOFTMAX_WORKLOADS = [{"uuid": "s0", "axes": {"M": 64, "N": 1000}},
                     {"uuid": "s1", "axes": {"M": 7, "N": 4096}}]
SOFTMAX_TOLERANCE = {"float32": {"atol": 1e-7, "rtol": 1e-4}}

# One block per row; %(body)s may bend it.
SOFTMAX_CU = r"""
#include <cstdint>
#include <cuda_runtime.h>
__global__ void softmax_rows(const float* x, float* y, int64_t N) {
    __shared__ float red[256];
    const float* row = x + blockIdx.x * N;
    float* out = y + blockIdx.x * N;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) m = fmaxf(m, row[j]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) sum += expf(row[j] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    for (int64_t j = threadIdx.x; j < N %(cut)s; j += blockDim.x) out[j] = expf(row[j] - m) / sum;
    %(extra)s
}
%(prelude)s
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    %(launch)s
}
"""
LAUNCH = "softmax_rows<<<(unsigned)M, 256>>>(x, y, N);"

SOFTMAX_TRITON = r"""
import torch
import triton
import triton.language as tl

@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)

def softmax(x, y, M, N):
    _softmax_rows[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
"""


def cuda_softmax(cut="", extra="", prelude="", launch=LAUNCH):
    return SOFTMAX_CU % {"cut": cut, "extra": extra, "prelude": prelude, "launch": launch}


def gpu_request(backend, source, entry="softmax", path=None, definition=None, workloads=None,
                calling=None, init=None, device="cuda:0", **overrides):
    path = path or ("kernel.cu" if backend == "cuda" else "kernel.py")
    req = request(source="", definition=copy.deepcopy(definition or SOFTMAX),
                  workloads=workloads if workloads is not None else SOFTMAX_WORKLOADS)
    req["candidate"] = {"language": backend, "sources": [{"path": path, "content": source}],
                        "entry_point": f"{path}::{entry}", "destination_passing_style": True,
                        "build": {"extra_flags": []}}
    if calling:
        req["candidate"]["calling"] = calling
    if init is not None:
        req["candidate"]["init"] = init
    req["device"] = {"backend": backend, "name": device}
    req["correctness"]["tolerance"] = dict(SOFTMAX_TOLERANCE)
    req["timing"] = {"warmup": 2, "iterations": 10, "min_iterations": 3, "max_seconds": 0.5}
    req.update(overrides)
    return req
