"""Why do MLX candidates' times spread so widely on the H200 (relative IQR 15-40% for ~1 ms
attention kernels, up to 98% for a ~10 us Mamba decode step), when the same calls timed back to
back spread 5-15% (bench/mlx_timing_probe.py)? Between two timed calls the harness works on the
host for milliseconds (it reads the outputs back, compares them with the reference's in NumPy,
checks the inputs): the GPU idles meanwhile. This probe times the harness's interval (L2 flush,
synchronise; call, mx.eval, synchronise) for a small kernel and for sdpa in several ways:

  back to back      no host work between calls;
  after a gap       GAP_MS of host work (a busy NumPy loop) before each call, as in the harness;
  gap + GPU warm    the same gap, then ~WARM_MS of GPU work right before the flush;
  gap, x R          the gap, then R calls in one interval (fresh outputs each), time / R;
  gap, eval end     the gap; the interval ends when mx.eval has the results, without the
                    device-wide mx.synchronize() after it.

Each cell: median us (IQR as % of the median). Usage: python3 bench/mlx_timing_gaps.py
[--iters N] [--gap-ms G] [--warm-ms W] [--repeat R]. Runs on MLX's CPU build too (a check of the
script; the numbers mean nothing there).
"""
import argparse
import statistics
import time

import mlx.core as mx
import numpy as np

FLUSH = 256 << 20

SMALL = """
const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
if (i >= N) { return; }
out[i] = x[i] * 1.0001f + 0.5f;
"""


def summary(xs):
    q = statistics.quantiles(xs, n=4)
    m = statistics.median(xs)
    return f"{m:.1f} ({100 * (q[2] - q[0]) / m:.0f}%)"


def host_work(ms):
    """A busy host loop of about `ms` milliseconds (NumPy, like the harness's comparison)."""
    end = time.perf_counter() + ms / 1e3
    a = np.random.default_rng(0).standard_normal(1 << 16)
    while time.perf_counter() < end:
        np.abs(a - a[::-1]).max()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    ap.add_argument("--warm-ms", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=8)
    a = ap.parse_args()
    gpu = mx.default_device() == mx.gpu
    print("mlx", mx.__version__, mx.default_device(), f"gap {a.gap_ms} ms, warm {a.warm_ms} ms, "
          f"repeat {a.repeat}, {a.iters} timed calls per cell")
    state = {"buf": mx.zeros((FLUSH,), dtype=mx.uint8)}
    mx.eval(state["buf"])

    def flush():
        state["buf"] = state["buf"] + 1
        mx.eval(state["buf"])

    warm_n = 1 << 22
    warm_x = mx.random.normal((warm_n,))
    mx.eval(warm_x)
    # How many chained elementwise passes over 16 MiB make about WARM_MS of GPU work.
    t0 = time.perf_counter()
    y = warm_x
    for _ in range(20):
        y = y * 1.0001 + 0.5
    mx.eval(y)
    mx.synchronize()
    per_pass = (time.perf_counter() - t0) / 20
    warm_passes = max(1, int(a.warm_ms / 1e3 / max(per_pass, 1e-6)))

    def warm():
        y = warm_x
        for _ in range(warm_passes):
            y = y * 1.0001 + 0.5
        mx.eval(y)

    calls = []
    n_small = 16 * 2048 * 16
    xs = mx.random.normal((n_small,))
    if gpu:
        kern = mx.fast.cuda_kernel(name="gaps_small", input_names=["x"], output_names=["out"],
                                   source=SMALL)

        def small():
            return kern(inputs=[xs], template=[("N", n_small)], grid=(n_small, 1, 1),
                        threadgroup=(256, 1, 1), output_shapes=[(n_small,)],
                        output_dtypes=[mx.float32])[0]
    else:
        def small():
            return xs * 1.0001 + 0.5
    calls.append(("small kernel (2 MiB)", small))
    for L in (1024, 4096):
        q, k, v = (mx.random.normal((1, 32, L, 128)).astype(mx.float16) for _ in range(3))
        mx.eval(q, k, v)
        calls.append((f"sdpa L={L}", lambda q=q, k=k, v=v: mx.fast.scaled_dot_product_attention(
            q, k, v, scale=128 ** -0.5)))
    mx.eval(xs)

    def interval(call, gap, warm_first=False, repeat=1, poll=False):
        out = []
        for i in range(a.iters + 3):
            if gap:
                host_work(a.gap_ms)
            if warm_first:
                warm()
            flush()
            mx.synchronize()
            t0 = time.perf_counter_ns()
            results = [call() for _ in range(repeat)]
            if poll:
                mx.eval(results)  # waits for the results; no device-wide synchronise
            else:
                mx.eval(results)
                mx.synchronize()
            t1 = time.perf_counter_ns()
            del results
            if i >= 3:
                out.append((t1 - t0) / 1e3 / repeat)
        return summary(out)

    columns = [
        ("back to back", dict(gap=False)),
        ("after a gap", dict(gap=True)),
        ("gap + GPU warm", dict(gap=True, warm_first=True)),
        (f"gap, x{a.repeat}", dict(gap=True, repeat=a.repeat)),
        ("gap, eval end", dict(gap=True, poll=True)),
    ]
    print("| call | " + " | ".join(c for c, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, call in calls:
        cells = [interval(call, **kw) for _, kw in columns]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
