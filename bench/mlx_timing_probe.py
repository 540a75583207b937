"""Where does the time of an MLX kernel call go on MLX's CUDA backend? Session-8 evaluations of
mlx_attention read 3-13 ms (IQR up to 40%) for flash-attention candidates whose kernels should
take ~0.2-2 ms, and the seed read 64.5 ms at L=4096 where bench/mlx_attention.py reads 49.6.
The harness times each call between a synchronise and mx.eval + synchronise, after an L2 flush
that makes a new 256 MiB array (`flush = flush + 1`). This probe times the same calls with no
flush, with that flush, and with a flush that reads the buffer into a scalar (no new 256 MiB
allocation), for mx.fast.scaled_dot_product_attention and the kernels given. A second table
times calls on fresh inputs made from NumPy before each call, as the harness made them until
session 8, and on the same inputs copied once more by a kernel (the harness's device_copy):
the hypothesis is that host-written unified memory is pulled to the GPU inside the timed call.
Three more columns tell apart what is left (session 11: fresh inputs still cost ~0.16-0.28 ms
more than device-made ones): device-made inputs copied on the device each call (new buffers, no
host), four device-made sets cycled (no allocation, no host work), and the host work of the copy
column done before each call while the call itself runs on the device-made inputs.
Session 11 found MLX donating the host array's buffer to the copy when nothing else holds the
host array, so the copy columns are split: host arrays dropped before the copies run (what the
harness did until then) and held until the copies are evaluated (what it does now). The fifth
column also reads each result back to NumPy after its timed interval, as the harness does. The
whole second table is then printed again after bench/mlx_cache_off.py's setting (MLX's buffer
cache off, CUDA's pool keeping its memory).

Usage: python3 bench/mlx_timing_probe.py [--iters N] [SPEC.toml ...]
(mlx_attention candidate specs, e.g. tasks/mlx_attention/seed.toml; without any, sdpa alone, which
also runs on MLX's CPU build as a check of the script)
"""
import argparse
import os
import statistics
import sys
import time
import tomllib

import mlx.core as mx

FLUSH = 256 << 20


def median_iqr(xs):
    q = statistics.quantiles(xs, n=4)
    return statistics.median(xs), q[2] - q[0]


def timed(call, flush, iters, read_back=False):
    """Median and IQR of `call` in us; read_back copies each result to NumPy after its timed
    interval, as the harness does for its comparison."""
    import numpy as np
    out = []
    for _ in range(3):
        mx.eval(call())
    mx.synchronize()
    for _ in range(iters):
        flush()
        mx.synchronize()
        t0 = time.perf_counter_ns()
        result = call()
        mx.eval(result)
        mx.synchronize()
        out.append((time.perf_counter_ns() - t0) / 1e3)
        if read_back:
            np.array(result[0] if isinstance(result, list) else result)
        del result
    return median_iqr(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--lengths", default="1024,4096", help="sequence lengths, comma-separated")
    ap.add_argument("specs", nargs="*", default=[])
    a = ap.parse_args()
    print("mlx", mx.__version__, mx.default_device())
    state = {"buf": mx.zeros((FLUSH,), dtype=mx.uint8)}
    mx.eval(state["buf"])

    def no_flush():
        pass

    def flush_new():  # what the harness does
        state["buf"] = state["buf"] + 1
        mx.eval(state["buf"])

    def flush_read():  # reads 256 MiB, writes one scalar
        mx.eval(mx.max(state["buf"]))

    kernels = []
    for i, path in enumerate(a.specs):
        spec = tomllib.load(open(path, "rb"))
        cu = spec["cuda"]
        k = mx.fast.cuda_kernel(name=f"probe{i}", input_names=["q", "k", "v", "causal"],
                                output_names=["out"], source=cu["source"],
                                header=cu.get("header", ""), shared_memory=0)
        kernels.append((path.rsplit("/", 1)[-1], spec, k))
    env = {"cdiv": lambda x, y: -(-x // y), "min": min, "max": max}
    B, H, D = 1, 32, 128
    shapes = {}
    for L in (int(x) for x in a.lengths.split(",")):
        axes = {"batch_size": B, "num_heads": H, "seq_len": L, "head_dim": D}
        calls = [("sdpa", lambda q, k, v, c: mx.fast.scaled_dot_product_attention(
            q, k, v, scale=D ** -0.5))]
        for label, spec, kern in kernels:
            grid = tuple(eval(str(g), env, dict(axes)) for g in spec["grid"])
            tg = tuple(eval(str(g), env, dict(axes)) for g in spec["threadgroup"])
            tmpl = [(n, eval(v, env, dict(axes)) if isinstance(v, str) and v in axes else v)
                    for n, v in spec.get("template", {}).items()]

            def call(q, k, v, c, kern=kern, grid=grid, tg=tg, tmpl=tmpl, L=L):
                return kern(inputs=[q, k, v, c], template=tmpl, grid=grid, threadgroup=tg,
                            output_shapes=[(B, H, L, D)], output_dtypes=[mx.float16])
            calls.append((label, call))
        shapes[L] = calls

    print("| L | what | no flush us (IQR) | harness flush us (IQR) | read flush us (IQR) |")
    print("|---|---|---|---|---|")
    for L, calls in shapes.items():
        ins = [mx.random.normal((B, H, L, D)).astype(mx.float16) for _ in range(3)]
        ins.append(mx.array(0, dtype=mx.int32))
        mx.eval(ins)
        for name, call in calls:
            iters = 5 if name == "seed.toml" and L > 1024 else a.iters
            cells = []
            for fl in (no_flush, flush_new, flush_read):
                m, iqr = timed(lambda: call(*ins), fl, iters)
                cells.append(f"{m:.0f} ({iqr:.0f})")
            print(f"| {L} | {name} | " + " | ".join(cells) + " |", flush=True)

    # Fresh inputs before each timed call, as the harness makes them (from NumPy), with and
    # without the harness's device_copy, against inputs made on the device once.
    sys.path.insert(0, "harness")
    fresh_inputs_table(shapes, "MLX's allocator as it is", flush_new, a.iters)
    # The same after bench/mlx_cache_off.py's setting: MLX's buffer cache off, CUDA's default
    # pool keeping its memory. Global state, so it comes last.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import mlx_cache_off as allocator
    dialect = "cuda" if getattr(getattr(mx, "cuda", None), "is_available", lambda: False)() \
        else None
    note = allocator.configure(mx, dialect, dialect is not None)
    print()
    print(f"allocator: {note or 'not a CUDA GPU: left alone'}")
    fresh_inputs_table(shapes, "after allocator.configure", flush_new, a.iters)


def fresh_inputs_table(shapes, calls_label, flush_new, iters):
    import numpy as np
    from ksearch_harness.backends.mlx.memory import device_copy
    B, H, D = 1, 32, 128
    print()
    print(f"{calls_label}:")
    print("| L | what | inputs made on the device us (IQR) | fresh host inputs us (IQR) "
          "| + device_copy, host arrays dropped first (MLX donates them) us (IQR) "
          "| + device_copy, host arrays held until it ran us (IQR) "
          "| the same, outputs read back us (IQR) "
          "| device-made inputs copied on the device each call us (IQR) "
          "| 4 device-made sets, cycled us (IQR) "
          "| host arrays and copies made each call, the call on device-made inputs us (IQR) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for L, calls in shapes.items():
        made = [mx.random.normal((B, H, L, D)).astype(mx.float16) for _ in range(3)]
        made.append(mx.array(0, dtype=mx.int32))
        mx.eval(made)
        # Reading `made` on the host moves its buffers into managed memory on MLX's CUDA backend,
        # so the device-made inputs of every column are managed memory, resident on the GPU once
        # a kernel has read them.
        hosts = [np.array(x) for x in made]
        for name, call in calls:
            if name == "seed.toml":
                continue
            cells = []
            pool = []
            for _ in range(4):
                copies = [device_copy(mx, x) for x in made]
                mx.eval(copies)
                pool.append(copies)
            for mode in ("device", "host", "donated", "copy", "read", "d2d", "pool", "work"):
                current = list(made)
                turn = [0]

                def fresh(mode=mode, current=current, turn=turn):
                    flush_new()
                    if mode == "device":
                        return
                    if mode == "d2d":  # new buffers each call, no host involved
                        arrs = [device_copy(mx, x) for x in made]
                        mx.eval(arrs)
                        current[:] = arrs
                        return
                    if mode == "pool":  # no allocation and no host work between calls
                        turn[0] += 1
                        current[:] = pool[turn[0] % len(pool)]
                        return
                    if mode == "work":  # the host work of "copy", the call on `made`
                        arrs = [mx.array(h) for h in hosts]
                        copies = [device_copy(mx, x) for x in arrs]
                        mx.eval(copies)
                        del arrs, copies
                        mx.synchronize()
                        return
                    arrs = [mx.array(h) for h in hosts]
                    if mode == "donated":  # the host arrays dropped before the copies run
                        arrs = [device_copy(mx, x) for x in arrs]
                    elif mode in ("copy", "read"):  # held until the copies are evaluated
                        copies = [device_copy(mx, x) for x in arrs]
                        mx.eval(copies)
                        arrs = copies
                    mx.eval(arrs)
                    current[:] = arrs
                m, iqr = timed(lambda call=call, current=current: call(*current), fresh, iters,
                               read_back=mode == "read")
                cells.append(f"{m:.0f} ({iqr:.0f})")
            print(f"| {L} | {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
