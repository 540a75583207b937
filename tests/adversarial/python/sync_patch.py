# Hack: patching PyTorch's device-wide synchronise, so the host clock stops waiting for work.
# Expected: rejected ("assigns to an attribute of a module (monkey-patching ...").
import torch

torch.cuda.synchronize = lambda *args, **kwargs: None


def softmax(x, y):
    y.copy_(torch.exp(x - x.amax(dim=1, keepdim=True)))
    y.div_(y.sum(dim=1, keepdim=True))
