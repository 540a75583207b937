"""Runs an imported task's reference and seed the way ksearch's Python backends call them, with
the importer's stand-in for PyTorch (shapes only), and checks the output shapes against the
definition: the glue the importer writes (run(), the helper-module prelude and python_path, ModelNew's
construction, the calling convention) is exercised without PyTorch.

Usage: python3 run_generated.py TASK_DIR STANDIN_DIR. Prints "ok" or raises. With `torch` for
STANDIN_DIR it uses the real PyTorch and also compares the seed's values with the reference's.
"""

import importlib.util
import json
import os
import sys
import tomllib


def _from_torch(value):
    """harness/ksearch_harness/reference.py's test of a reference's namespace for torch."""
    name = value.__name__ if isinstance(value, type(os)) else getattr(value, "__module__", None) or ""
    return name == "torch" or name.startswith("torch.")


def main(task_dir, standin_dir):
    if standin_dir == "torch":
        import torch
    else:
        sys.path.insert(0, standin_dir)
        import standin_torch
        torch = standin_torch.install()
    with open(os.path.join(task_dir, "definition.json")) as f:
        definition = json.load(f)
    with open(os.path.join(task_dir, "task.toml"), "rb") as f:
        kernel = tomllib.load(f)["kernel"]
    with open(os.path.join(task_dir, "workloads.jsonl")) as f:
        workloads = [json.loads(line) for line in f if line.strip()]
    for workload in workloads:
        axes = {n: a["value"] for n, a in definition["axes"].items() if a["type"] == "const"}
        axes.update(workload["axes"])
        values = {}
        for name, spec in definition["inputs"].items():
            given = workload["inputs"].get(name)
            if spec["shape"]:
                values[name] = torch.randn(*[axes[a] for a in spec["shape"]],
                                           dtype=getattr(torch, spec["dtype"]))
            else:
                values[name] = given["value"] if given else 1
        expected = [tuple(axes[a] for a in spec["shape"]) for spec in definition["outputs"].values()]

        namespace = {}
        exec(compile(definition["reference"], "<definition.reference>", "exec"), namespace)
        # The harness hands a reference torch tensors only when its module holds torch
        # (harness/ksearch_harness/reference.py: a torch module, function or class at the top
        # level); without it a torch reference would get NumPy arrays.
        if not any(_from_torch(v) for v in namespace.values()):
            raise AssertionError("the reference's module holds nothing of torch: the harness would "
                                 "call it with NumPy arrays")
        reference = namespace["run"](**values)
        check("reference", reference, expected)

        # The seed finds the helper modules on [kernel].python_path, as the harness gives it,
        # not through what the reference registered.
        for name in [n for n, m in sys.modules.items() if hasattr(m, "__ksearch_gpumode__")]:
            del sys.modules[name]
        for folder in kernel.get("python_path", []):
            sys.path.insert(0, os.path.join(task_dir, folder))
        spec = importlib.util.spec_from_file_location("seed", os.path.join(task_dir, kernel["seed"]))
        seed = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(seed)
        entry = getattr(seed, kernel["entry"])
        if "init" in kernel:
            torch.manual_seed(kernel["init"]["seed"])
            entry = entry(*kernel["init"]["args"])
        args = list(values.values())
        result = entry(tuple(args)) if kernel["calling"] == "tuple" else entry(*args)
        check("seed", result, expected)
        if standin_dir == "torch":
            pairs = zip(result if isinstance(result, (tuple, list)) else [result],
                        reference if isinstance(reference, (tuple, list)) else [reference])
            for got, want in pairs:
                if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
                    raise AssertionError(f"the seed's output differs from the reference's in "
                                         f"workload {workload['uuid']}")
    print("ok")


def check(what, result, expected):
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    shapes = [tuple(r.shape) for r in results]
    if shapes != expected:
        raise AssertionError(f"{what} returned shapes {shapes}, the definition says {expected}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
