"""How long a CUDA-graph replay of a tiny Triton kernel takes, replay by replay, timed the way
the harness times a call (harness/ksearch_harness/backends/torch_gpu/timing.py): L2 flush, device synchronise,
CUDA events around the single call, host clock to after a device-wide synchronise.

It decides the harness's GRAPH_BELOW_NS: "auto" keeps a graph only when the deciding warm-up
replay is under it. Prints one table row per replay, plus plain (uncaptured) calls for
comparison.

Usage (on a CUDA machine): python3 bench/graph_replay.py [--replays 12]
"""
import argparse
import statistics
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replays", type=int, default=12)
    args = ap.parse_args()
    dev = torch.device("cuda:0")
    props = torch.cuda.get_device_properties(dev)
    flush = torch.empty(2 * props.L2_cache_size // 4, dtype=torch.float32, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    print(f"# {props.name}, torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}")

    def timed(call):
        flush.add_(1.0)
        torch.cuda.synchronize()
        h0 = time.perf_counter_ns()
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3, (time.perf_counter_ns() - h0) / 1e3

    for M, N in ((4, 64), (64, 1024), (4096, 4096)):
        x = torch.randn(M, N, device=dev)
        y = torch.empty_like(x)
        block = triton.next_power_of_2(N)

        def plain():
            _softmax_rows[(M,)](x, y, N, BLOCK=block)

        plain_rows = [timed(plain) for _ in range(args.replays)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            plain()  # compiled and warm before the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            plain()
        replay_rows = [timed(graph.replay) for _ in range(args.replays)]
        print(f"\n## softmax {M}x{N}\n")
        print("| call | plain event us | plain host us | replay event us | replay host us |")
        print("|---|---|---|---|---|")
        for i, ((pe, ph), (re_, rh)) in enumerate(zip(plain_rows, replay_rows)):
            print(f"| {i} | {pe:.1f} | {ph:.1f} | {re_:.1f} | {rh:.1f} |")
        med = lambda rows, j: statistics.median(r[j] for r in rows[2:])  # noqa: E731
        print(f"| median from call 2 | {med(plain_rows, 0):.1f} | {med(plain_rows, 1):.1f} | "
              f"{med(replay_rows, 0):.1f} | {med(replay_rows, 1):.1f} |")


if __name__ == "__main__":
    main()
