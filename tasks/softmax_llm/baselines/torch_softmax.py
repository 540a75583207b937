"""PyTorch's softmax on the bf16 logits: torch.softmax(logits, dim=-1), bf16 out (PyTorch
computes in fp32 internally). Called as run(logits) -> probs, bf16 CUDA tensors.
"""

import torch


@torch.no_grad()
def run(logits):
    return torch.softmax(logits, dim=-1)
