# Hack: monkey-patching the harness itself (its timing loop) from inside the process.
# Expected: rejected ("reaches into the interpreter or the harness ...").
import sys

import torch

_timing = sys.modules.get("ksearch_harness.timing")


def softmax(x, y):
    y.copy_(torch.exp(x - x.amax(dim=1, keepdim=True)))
    y.div_(y.sum(dim=1, keepdim=True))
