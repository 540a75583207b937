"""Shared pieces of the end-to-end tests: a tiny softmax task and a way to run the harness."""

import copy
import json
import os
import resource
import subprocess
import sys
import tempfile

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SOFTMAX = {
    "name": "softmax_rows",
    "op_type": "softmax",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 256}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}},
    "reference": (
        "import numpy as np\n"
        "def run(x):\n"
        "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n"
    ),
}

# Fills y with the softmax of each row of x; the %(...)s holes let a test bend it.
SOFTMAX_C = r"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
%(prelude)s
void softmax(const float* x, float* y, int64_t M) {
    const int64_t N = 256;
    %(before)s
    for (int64_t i = 0; i < %(rows)s; i++) {
        float m = -INFINITY;
        for (int64_t j = 0; j < N; j++) m = fmaxf(m, x[i * N + j]);
        float s = 0.0f;
        for (int64_t j = 0; j < N; j++) { float e = expf(x[i * N + j] - m); y[i * N + j] = e; s += e; }
        for (int64_t j = %(j0)s; j < N; j++) y[i * N + j] /= s;
    }
    %(after)s
}
"""


# A small matmul task: C[M, N] = A[M, K] @ B[K, N], every axis a var axis.
MATMUL = {
    "name": "matmul_small",
    "op_type": "matmul",
    "axes": {"M": {"type": "var"}, "K": {"type": "var"}, "N": {"type": "var"}},
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float32"},
               "B": {"shape": ["K", "N"], "dtype": "float32"}},
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float32"}},
    "reference": (
        "import numpy as np\n"
        "def run(A, B):\n"
        "    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)\n"
    ),
}
MATMUL_WORKLOADS = [{"uuid": "m0", "axes": {"M": 24, "K": 40, "N": 16}},
                    {"uuid": "m1", "axes": {"M": 7, "K": 5, "N": 33}}]
MATMUL_TOLERANCE = {"float32": {"atol": 1e-3, "rtol": 1e-4}}

# Computes C honestly in compute(); the %(...)s holes let a test bend when it is called.
MATMUL_C = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
%(prelude)s
static void compute(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
void matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    %(body)s
}
"""


def matmul_request(prelude="", body="compute(A, B, C, M, K, N);", **overrides):
    source = MATMUL_C % {"prelude": prelude, "body": body}
    correctness = {"trials": 3, "distributions": ["normal", "uniform", "heavy_tailed"],
                   "tolerance": MATMUL_TOLERANCE, "matched_ratio": 1.0}
    overrides.setdefault("workloads", MATMUL_WORKLOADS)
    overrides.setdefault("correctness", correctness)
    overrides.setdefault("definition", MATMUL)
    return request(source, symbol="matmul", **overrides)


def softmax_source(prelude="", before="", after="", rows="M", j0="0"):
    return SOFTMAX_C % {"prelude": prelude, "before": before, "after": after, "rows": rows,
                        "j0": j0}


def request(source=None, definition=None, workloads=None, symbol="softmax", **overrides):
    req = {
        "protocol": 1,
        "mode": "evaluate",
        "task_dir": HARNESS_DIR,
        "definition": copy.deepcopy(definition or SOFTMAX),
        "workloads": workloads if workloads is not None else [
            {"uuid": "w0", "axes": {"M": 16}, "inputs": {}},
            {"uuid": "w1", "axes": {"M": 3}},
            {"uuid": "w2", "axes": {"M": 40}},
        ],
        "candidate": {
            "language": "c",
            "sources": [{"path": "kernel.c", "content": source or softmax_source()}],
            "entry_point": f"kernel.c::{symbol}",
            "destination_passing_style": True,
            "build": {"openmp": False, "extra_flags": []},
        },
        "device": {"backend": "c", "name": "cpu"},
        "seed": 12345,
        "correctness": {
            "trials": 3,
            "distributions": ["normal", "uniform", "heavy_tailed"],
            "tolerance": {"float32": {"atol": 1e-4, "rtol": 1e-4}},
            "matched_ratio": 1.0,
        },
        "timing": {"warmup": 1, "iterations": 8, "min_iterations": 3, "max_seconds": 0.2},
        "limits": {"log_bytes": 65536, "compile_timeout_s": 30},
        "fail_fast": False,
    }
    req.update(overrides)
    return req


class Run:
    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stderr = proc.stderr.decode("utf-8", "replace")
        self.lines = proc.stdout.decode("utf-8").splitlines()
        # Every protocol line must be a JSON object: this is what keeps the stream uncorrupted.
        self.events = [json.loads(line) for line in self.lines]
        for e in self.events:
            assert isinstance(e, dict) and "event" in e, e

    def of(self, kind):
        return [e for e in self.events if e["event"] == kind]

    @property
    def workloads(self):
        return self.of("workload")

    @property
    def statuses(self):
        return [e["status"] for e in self.workloads]


def run(req, env=None, timeout=60, address_space=None):
    """Run the harness on `req`; `address_space` (bytes) sets RLIMIT_AS as ksearch eval does."""
    def limit():
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    with tempfile.TemporaryDirectory(prefix="ksearch-test-") as tmp:
        environ = dict(os.environ)
        environ.update({"PYTHONPATH": HARNESS_DIR, "TMPDIR": tmp})
        environ.update(env or {})
        proc = subprocess.run([sys.executable, "-m", "ksearch_harness"],
                              input=json.dumps(req).encode(), cwd=tmp, env=environ,
                              capture_output=True, timeout=timeout, preexec_fn=limit)
    return Run(proc)
