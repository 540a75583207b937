"""Shared pieces of the end-to-end tests: a tiny softmax task and a way to run the harness."""

import copy
import json
import os
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


def run(req, env=None, timeout=60):
    with tempfile.TemporaryDirectory(prefix="ksearch-test-") as tmp:
        environ = dict(os.environ)
        environ.update({"PYTHONPATH": HARNESS_DIR, "TMPDIR": tmp})
        environ.update(env or {})
        proc = subprocess.run([sys.executable, "-m", "ksearch_harness"],
                              input=json.dumps(req).encode(), cwd=tmp, env=environ,
                              capture_output=True, timeout=timeout)
    return Run(proc)
