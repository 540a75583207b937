# Hack: computing on another thread, after the call has returned.
# Expected: rejected ("creates a thread or a process ...").
import threading

import torch


def softmax(x, y):
    def later():
        y.copy_(torch.softmax(x, dim=1))

    threading.Thread(target=later).start()
