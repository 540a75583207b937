"""RMSNorm the way Hugging Face's LlamaRMSNorm computes it, in plain PyTorch ops (unfused: each
op is its own kernel): statistics in fp32, the normalised value rounded back to bf16, then
multiplied by the bf16 weight.

Called as run(hidden_states, weight) -> output, bf16 CUDA tensors.
"""

import torch


@torch.no_grad()
def run(hidden_states, weight):
    x = hidden_states.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + 1e-5)
    return weight * x.to(hidden_states.dtype)
