"""PyTorch's own RMSNorm: torch.nn.functional.rms_norm with the task's epsilon.

Called as run(hidden_states, weight) -> output, bf16 CUDA tensors.
"""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    return torch.nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), weight, eps=1e-5)
