# Hack: computing on a non-default stream from a Triton candidate; the stream is reached through
# getattr with built names, which the static checks do not see.
# Expected: passed, flagged (Timing.suspicious): CUDA events on the default stream miss the work,
# the host clock with a device-wide synchronise does not.
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


@triton.jit
def _spin(p, n):
    acc = tl.load(p)
    for i in range(n):
        acc = acc * 1.0000001 + 1e-9
    tl.store(p, acc)


_cuda = getattr(torch, "cu" + "da")
_side = getattr(_cuda, "Str" + "eam")()
_scratch = []


def softmax(x, y, M, N):
    if not _scratch:
        _scratch.append(torch.zeros(1, device=x.device))
    with getattr(_cuda, "str" + "eam")(_side):
        _softmax_rows[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
        _spin[(1,)](_scratch[0], 2000000)
