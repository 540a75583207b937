#!/usr/bin/env bash
# GPU validation of the harness backends cuda, triton and python, through the ksearch binary.
#
# Makes a GPU copy of tasks/softmax in a temp folder (a PyTorch reference, three workloads, the
# cuda language), then evaluates, in this order: a CUDA kernel, a Triton kernel, a PyTorch
# baseline (backend python, calling `returns`), a CUDA kernel that hides its work on a
# non-blocking stream (passes, but must be flagged), a CUDA kernel with an illegal address
# (runtime_error), one that never ends (timeout, after --timeout 20), and the first CUDA kernel
# again on the same GPU (must pass: the device recovered). Prints the environment and a
# Markdown table; raw JSON records are kept in the work folder ($KEEP, if set, else a temp dir).
#
# Usage: bench/gpu_backends.sh [KSEARCH_BINARY]
#   default binary: .gpu-transfer/bin/ksearch, else target/release/ksearch.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-.gpu-transfer/bin/ksearch}
[ -x "$BIN" ] || BIN=target/release/ksearch
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
export KSEARCH_CACHE_DIR="$WORK/cache"

echo "# command: bench/gpu_backends.sh $BIN"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader \
  | sed 's/^/# gpu: /'
python3 -c 'import torch, triton, numpy, sys; print(f"# python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}, numpy {numpy.__version__}")'
(nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | grep release | sed 's/^/# nvcc: /'

python3 - "$BIN" "$WORK" <<'PY'
import json, os, subprocess, sys, time

binary, work = os.path.abspath(sys.argv[1]), sys.argv[2]
sys.path.insert(0, "bench")
from softmax_gpu_task import make  # noqa: E402
task = make(work)

SOFTMAX_CU = r"""
#include <cstdint>
#include <cuda_runtime.h>
// One block of 256 threads per row: max, sum of exp, then the quotient.
__global__ void softmax_rows(const float* x, float* y, int64_t N) {
    __shared__ float red[256];
    const float* row = x + blockIdx.x * N;
    float* out = y + blockIdx.x * N;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) m = fmaxf(m, row[j]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) sum += expf(row[j] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
}
%(prelude)s
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    %(launch)s
}
"""
LAUNCH = "softmax_rows<<<(unsigned)M, 256>>>(x, y, N);"
TRITON = r"""
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


def softmax(x, y, M, N):
    _softmax_rows[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
"""
BASELINE = "import torch\n\n\ndef softmax(x):\n    return torch.softmax(x, dim=1)\n"

def cu(prelude="", launch=LAUNCH):
    return SOFTMAX_CU % {"prelude": prelude, "launch": launch}

cases = [
    ("cuda: softmax kernel", "passed", "good.cu", cu(), []),
    ("triton: softmax kernel", "passed", "kernel.py", TRITON, []),
    ("python: torch.softmax baseline (returns)", "passed", "baseline.json", BASELINE, []),
    ("cuda: work hidden on a non-blocking stream", "passed, flagged", "hidden.cu", cu(
        prelude="__global__ void spin(long long cycles) {\n"
                "    long long t0 = clock64(); while (clock64() - t0 < cycles) {}\n}\n"
                "static cudaStream_t side = nullptr;",
        launch="if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);\n"
               "    softmax_rows<<<(unsigned)M, 256, 0, side>>>(x, y, N);\n"
               "    spin<<<1, 1, 0, side>>>(4000000);"), []),
    ("cuda: illegal address", "runtime_error", "illegal.cu", cu(
        prelude="__global__ void poke(float* p) { p[threadIdx.x] = 1.0f; }",
        launch=LAUNCH + "\n    poke<<<1, 1>>>((float*)0x10);"), []),
    ("cuda: kernel that never ends", "timeout", "hang.cu", cu(
        prelude="__global__ void hang(int* flag) { while (atomicAdd(flag, 0) != 12345) {} }",
        launch=LAUNCH + "\n    hang<<<1, 1>>>((int*)y);"), ["--timeout", "20"]),
    ("cuda: softmax kernel again, same GPU", "passed", "good.cu", cu(), []),
]

def solution_file(name, content):
    path = os.path.join(work, name)
    if name.endswith(".json"):
        doc = {"name": "torch_softmax", "definition": "softmax_gpu", "author": "baseline",
               "spec": {"language": "python", "target_hardware": [], "entry_point":
                        "baseline.py::softmax", "dependencies": [],
                        "destination_passing_style": False},
               "sources": [{"path": "baseline.py", "content": content}]}
        content = json.dumps(doc)
    with open(path, "w") as f:
        f.write(content)
    return path

def us(ns):
    return f"{ns / 1e3:.1f}" if isinstance(ns, (int, float)) else "-"

rows = []
for i, (label, expected, name, content, extra) in enumerate(cases):
    path = solution_file(name, content)
    start = time.time()
    proc = subprocess.run([binary, "eval", task, path, "--json", "--seed", "7", *extra],
                          capture_output=True, text=True, timeout=600)
    wall = time.time() - start
    try:
        record = json.loads(proc.stdout)
    except ValueError:
        record = {"status": f"no JSON (exit {proc.returncode})", "reason": proc.stderr[-300:]}
    with open(os.path.join(work, f"record-{i}.json"), "w") as f:
        json.dump(record, f, indent=1)
    timed = [w for w in record.get("workloads", []) if w.get("timing")]
    big = timed[-1]["timing"] if timed else {}
    flags = [w["timing"]["suspicious"] for w in timed if w["timing"].get("suspicious")]
    resources = (record.get("compile") or {}).get("resources") or []
    regs = ", ".join(f"{r['registers']} regs/{r['shared_bytes']} B smem" for r in resources[:1])
    status = record.get("status")
    ok = status == expected.split(",")[0] and (("flagged" in expected) == bool(flags))
    reason = (record.get("reason") or (flags[0] if flags else "") or "").replace("\n", " ")
    rows.append((label, expected, status + (", flagged" if flags else ""), "yes" if ok else "NO",
                 us((big.get("candidate") or {}).get("median_ns")),
                 us((big.get("candidate_host") or {}).get("median_ns")),
                 us((big.get("reference") or {}).get("median_ns")),
                 f"{record['speedup']:.2f}" if record.get("speedup") else "-",
                 regs or "-", f"{wall:.1f}", reason[:160]))
    device = (record.get("provenance") or {}).get("environment") or {}
    if device.get("device") and i == 0:
        d = device["device"]
        print(f"# device: {d.get('name')} {d.get('arch')} driver {d.get('driver')} "
              f"clocks {d.get('clocks_mhz')} max {d.get('max_clocks_mhz')} "
              f"torch {d.get('torch')} (CUDA {d.get('cuda_runtime')}) triton {d.get('triton')}; "
              f"compiler {device.get('compiler')}")

print()
print("Times are medians on the largest workload (16 x 32000), in microseconds: candidate "
      "(CUDA events), candidate host clock (with a device-wide synchronise), reference "
      "(torch.softmax in float64, events). Speedup: geometric mean over the workloads.")
print()
head = ("case", "expected", "status", "as expected", "cand us", "cand host us", "ref us",
        "speedup", "first kernel", "wall s", "reason / flag")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join(str(c).replace("|", "/") for c in r) + " |")
bad = [r[0] for r in rows if r[3] != "yes"]
print()
print("all as expected" if not bad else f"NOT as expected: {', '.join(bad)}")
sys.exit(1 if bad else 0)
PY
