# Hack: computing on a non-default stream, which CUDA events on the default stream do not time.
# Expected: rejected ("creates, switches or synchronises CUDA streams ..."); on the GPU the host
# clock with a device-wide synchronise also flags it (bench/adversarial_gpu.sh).
import torch

_side = torch.cuda.Stream()


def softmax(x, y):
    with torch.cuda.stream(_side):
        y.copy_(torch.exp(x - x.amax(dim=1, keepdim=True)))
        y.div_(y.sum(dim=1, keepdim=True))
