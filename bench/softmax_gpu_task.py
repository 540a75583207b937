"""A GPU copy of tasks/softmax for the bench scripts that need a small CUDA task
(bench/gpu_backends.sh, bench/adversarial_gpu.sh): a PyTorch reference on the device (in
float64), three workloads, the cuda language, no seed or template, half a second of timing."""

import json
import os
import re
import shutil

KEEP = {"softmax-64x1024", "softmax-256x4096", "softmax-16x32000"}


def make(work, source="tasks/softmax"):
    """Writes the task into WORK/softmax_gpu (replacing what is there) and returns its path."""
    task = os.path.join(work, "softmax_gpu")
    shutil.rmtree(task, ignore_errors=True)
    shutil.copytree(source, task)
    with open(os.path.join(task, "definition.json")) as f:
        definition = json.load(f)
    definition["name"] = "softmax_gpu"
    definition["tags"] = ["gpu"]
    definition["reference"] = ("import torch\n\n\ndef run(x):\n"
                               "    return torch.softmax(x.double(), dim=1).float()\n")
    with open(os.path.join(task, "definition.json"), "w") as f:
        json.dump(definition, f, indent=2)
    with open(os.path.join(source, "workloads.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(task, "workloads.jsonl"), "w") as f:
        for row in rows:
            if row["uuid"] in KEEP:
                f.write(json.dumps(row) + "\n")
    with open(os.path.join(task, "task.toml")) as f:
        toml = f.read()
    toml = toml.replace('targets = ["cpu"]', 'targets = ["h200"]')
    toml = re.sub(r"\[kernel\].*", '[kernel]\nlanguage = "cuda"\nentry = "softmax"\n', toml,
                  flags=re.S)
    toml = toml.replace("[evaluation]\n", "[evaluation]\nmax_timing_s = 0.5\n", 1)
    os.remove(os.path.join(task, "seed.c"))
    shutil.rmtree(os.path.join(task, "template"), ignore_errors=True)
    with open(os.path.join(task, "task.toml"), "w") as f:
        f.write(toml)
    return task
