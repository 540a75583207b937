"""Paged GQA decode as a PyTorch user writes it: gather, pad, scaled_dot_product_attention.

Called as run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale) -> (output, lse) with the
definition's CUDA tensors and a Python float. The pages of every sequence are gathered into a
[batch, max_len, kv_heads, head_dim] batch (padding masked out); SDPA with enable_gqa computes
the output; SDPA does not return the log-sum-exp, so lse comes from the logits computed again in
fp32 (TF32 off, as in the reference: it would round them to 10 mantissa bits).
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch, num_qo_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_qo_heads // num_kv_heads
    lengths = (kv_indptr[1:] - kv_indptr[:-1]).long()                  # [batch]
    max_len = int(lengths.max().item()) if batch > 0 else 0
    if max_len == 0:
        output = torch.zeros_like(q)
        lse = torch.full((batch, num_qo_heads), -math.inf, dtype=torch.float32, device=q.device)
        return output, lse

    pos = torch.arange(max_len, device=q.device)
    valid = pos[None, :] < lengths[:, None]                              # [batch, max_len]
    slot = torch.where(valid, kv_indptr[:-1, None].long() + pos[None, :], 0)
    pages = kv_indices.long()[slot]                                      # [batch, max_len]
    k = k_cache[pages, 0]                                                # [batch, max_len, kv_heads, dim]
    v = v_cache[pages, 0]

    out = F.scaled_dot_product_attention(
        q.unsqueeze(2),                                                  # [batch, qo_heads, 1, dim]
        k.transpose(1, 2), v.transpose(1, 2),                            # [batch, kv_heads, max_len, dim]
        attn_mask=valid[:, None, None, :], scale=sm_scale, enable_gqa=True,
    ).squeeze(2)
    # A sequence without tokens has every key masked: SDPA gives NaN there, the task wants 0.
    output = torch.where((lengths > 0)[:, None, None], out, torch.zeros_like(out))

    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        qg = q.float().reshape(batch, num_kv_heads, group, head_dim)
        logits = torch.einsum("bhgd,bnhd->bhgn", qg, k.float()) * sm_scale
    finally:
        torch.set_float32_matmul_precision(precision)
    logits = logits.masked_fill(~valid[:, None, None, :], -math.inf)
    lse = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).reshape(batch, num_qo_heads)
    return output, lse
