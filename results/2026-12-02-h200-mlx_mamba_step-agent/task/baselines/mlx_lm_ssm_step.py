"""mlx-lm's MambaBlock.ssm_step for one decode token (mlx_lm/models/mamba.py in mlx-lm 0.32),
with the gate its MambaBlock applies after it, re-expressed on this task's inputs:
run(u, delta, A, B, C, D, z, delta_bias, state) -> (out, new_state).

As in mlx-lm: softplus of the time step, the new state from the input term plus the decayed old
state, the output as a matrix product with C plus the skip term, then silu(z) times it. What
differs: the projections (x_proj, dt_proj) are the task's inputs (delta_bias is dt_proj's bias),
and the arithmetic and the state are fp32 (mlx-lm uses the model's dtype; a state kept in fp16
fails the tolerance).
"""

import mlx.core as mx


def run(u, delta, A, B, C, D, z, delta_bias, state):
    x = u.astype(mx.float32)
    dt = mx.logaddexp(delta.astype(mx.float32) + delta_bias, 0.0)            # nn.softplus
    new_state = mx.expand_dims(dt * x, -1) * mx.expand_dims(B.astype(mx.float32), 1)
    new_state = new_state + state * mx.exp(mx.expand_dims(dt, -1) * A)
    y = (new_state @ mx.expand_dims(C.astype(mx.float32), -1)).squeeze(2)
    y = y + D * x
    zf = z.astype(mx.float32)
    return (y * (zf * mx.sigmoid(zf))).astype(mx.float16), new_state
