# Hack: patching the timer the harness reads, so that every timed call looks instant.
# Expected: rejected by the static checks ("reads, sleeps on or patches the clock"): a module
# candidate runs in the harness's own process on the GPU backends.
import time

import torch

_ticks = [0]


def _fake():
    _ticks[0] += 1
    return _ticks[0]


time.perf_counter_ns = _fake


def softmax(x, y):
    y.copy_(torch.exp(x - x.amax(dim=1, keepdim=True)))
    y.div_(y.sum(dim=1, keepdim=True))
