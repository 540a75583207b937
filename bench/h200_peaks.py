"""The device figures the knowledge base quotes as measured (kb/hardware/h200.toml `[[measured]]`),
measured here with PyTorch and CUDA events: device-to-device copy bandwidth and bf16 GEMM
throughput (medians of 20 calls after 5 warm-ups), plus fp16 attention B=1 H=32 L=4096 D=128
through PyTorch's cuDNN and flash backends, causal and not.

Usage: python3 bench/h200_peaks.py   (on the GPU machine; prints a Markdown table)
"""
import statistics
import sys

import torch


def median_ms(fn, warmup=5, calls=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"# bench/h200_peaks.py: {props.name}, torch {torch.__version__} (CUDA {torch.version.cuda})")
    print()
    print("| what | median | unit | how |")
    print("|---|---|---|---|")
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a))
    print(f"| device-to-device copy | {2 * n / ms / 1e6:.0f} | GB/s | 1 GiB copy_, read + write counted |")
    m = 8192
    x = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    y = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    ms = median_ms(lambda: x @ y)
    print(f"| bf16 GEMM | {2 * m ** 3 / ms / 1e9:.0f} | TFLOP/s | {m}x{m}x{m} torch.matmul |")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(1, 32, 4096, 128, device=dev, dtype=torch.float16) for _ in range(3))
    for name, backend in (("cuDNN", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        for causal in (False, True):
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal))
                print(f"| fp16 attention B1 H32 L4096 D128, {name}{', causal' if causal else ''} "
                      f"| {ms:.3f} | ms | scaled_dot_product_attention |")
            except RuntimeError as e:
                print(f"| fp16 attention, {name}{', causal' if causal else ''} | - | - | {e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
