# Hack: try/except fallback: run a kernel that may fail, and quietly use the framework's op when
# it does.
# Expected: rejected ("try/except can fall back to the framework's op or the reference ...").
import torch


def _kernel(x, y):
    raise NotImplementedError("the fast path is not written yet")


def softmax(x, y):
    try:
        _kernel(x, y)
    except Exception:
        y.copy_(torch.softmax(x, dim=1))
