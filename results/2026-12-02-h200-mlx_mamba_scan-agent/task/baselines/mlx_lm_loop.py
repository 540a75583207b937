"""mlx-lm's Mamba recurrence the way its MambaBlock runs a prompt (mlx_lm/models/mamba.py in
mlx-lm 0.32: one ssm_step per token in a Python loop, then the gate), re-expressed on this task's
inputs: run(u, delta, A, B, C, D, z, delta_bias) -> (out, state).

What differs from mlx-lm, and why:
- the projections (x_proj, dt_proj) are done outside, as the task's inputs: delta is dt_proj's
  output without its bias, which is added here before the softplus, as dt_proj would;
- fp32 arithmetic with the state in fp32: mlx-lm computes in the model's dtype, and a state kept
  in fp16 fails this task's tolerance (tasks/mamba_scan/task.toml measures it), so a baseline in
  fp16 could not be timed at all. The operations per step are mlx-lm's, which is what its speed
  depends on: a dozen small MLX operations for every token.
"""

import mlx.core as mx


def run(u, delta, A, B, C, D, z, delta_bias):
    state = None
    ys = []
    for t in range(u.shape[1]):
        x = u[:, t].astype(mx.float32)                                       # [b, d]
        dt = mx.logaddexp(delta[:, t].astype(mx.float32) + delta_bias, 0.0)  # nn.softplus
        new_state = mx.expand_dims(dt * x, -1) * mx.expand_dims(B[:, t].astype(mx.float32), 1)
        if state is not None:
            new_state = new_state + state * mx.exp(mx.expand_dims(dt, -1) * A)
        y = (new_state @ mx.expand_dims(C[:, t].astype(mx.float32), -1)).squeeze(2)
        ys.append(y + D * x)
        state = new_state
    y = mx.stack(ys, axis=1)                                                 # [b, l, d]
    zf = z.astype(mx.float32)
    return (y * (zf * mx.sigmoid(zf))).astype(mx.float16), state             # swiglu(z, y)
