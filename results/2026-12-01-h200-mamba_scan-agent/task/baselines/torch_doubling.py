"""The selective scan in plain PyTorch as an associative scan by recursive doubling.

h_t = a_t * h_{t-1} + b_t is evaluated in ceil(log2(seqlen)) passes over the whole sequence
(Hillis-Steele): after the pass with stride s, (a_t, b_t) describes steps t-2s+1 .. t, so after
the last pass b_t is h_t. Each pass is a few element-wise kernels over [batch, dim, seqlen,
dstate] fp32 tensors instead of the reference's seqlen iterations of small kernels. fp32
throughout; no matmul, so TF32 settings cannot change the result.

Called as run(u, delta, A, B, C, D, z, delta_bias) -> out (fp16), CUDA tensors as in the
definition.
"""

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(u, delta, A, B, C, D, z, delta_bias):
    uf = u.float()                                                     # [b, d, l]
    dt = F.softplus(delta.float() + delta_bias.float()[:, None])       # [b, d, l]
    a = torch.exp(dt.unsqueeze(-1) * A.float()[None, :, None, :])      # [b, d, l, n]
    x = (dt * uf).unsqueeze(-1) * B.float().transpose(1, 2).unsqueeze(1)  # [b, d, l, n]
    seqlen = u.shape[2]
    stride = 1
    while stride < seqlen:
        # Right-hand sides read the previous pass's values before the slices are written.
        x[:, :, stride:] = torch.addcmul(x[:, :, stride:], a[:, :, stride:], x[:, :, :-stride])
        a[:, :, stride:] = a[:, :, stride:] * a[:, :, :-stride]
        stride *= 2
    y = (x * C.float().transpose(1, 2).unsqueeze(1)).sum(-1)          # [b, d, l]
    out = (y + uf * D.float()[:, None]) * F.silu(z.float())
    return out.to(torch.float16)
