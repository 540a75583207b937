"""MLX's own fused attention: mx.fast.scaled_dot_product_attention, called as
run(q, k, v, causal) -> out with q, k, v fp16 MLX arrays [B, H, L, D].

On Apple GPUs MLX runs its own Metal attention kernels; through MLX's CUDA backend it uses
cuDNN's fused attention for fp16 with head dim <= 128 (MLX's CUDA backend source, mlx/backend/cuda). The scale is the
task's, 1/sqrt(D); mask="causal" is MLX's lower-triangular mask (query i sees keys 0..i when the
query and key lengths are equal, as here).
"""

import math

import mlx.core as mx


def run(q, k, v, causal):
    return mx.fast.scaled_dot_product_attention(
        q, k, v, scale=1.0 / math.sqrt(q.shape[-1]), mask="causal" if causal else None)
