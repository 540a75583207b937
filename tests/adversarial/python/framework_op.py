# Hack: calling the framework's op for the core computation.
# Expected: rejected by the task's own rule (task.toml [checks]: the softmax must be computed by
# the kernel), which the suite adds to a copy of the tiny softmax task.
import torch


def softmax(x, y):
    y.copy_(torch.softmax(x, dim=1))
