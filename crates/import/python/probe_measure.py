"""A KernelBench model run for real at import (probe.py finds the shapes without running anything
heavy): the magnitudes of its outputs, the values of its inputs, and whether its forward draws
random numbers; and a GPU MODE reference run for real on generate_input's own values
(gpumode)."""

import json
import os


def dropout_modules(torch, instance):
    """The dropout modules of `instance` that would change its output in training mode (p > 0),
    as [(qualified name, module)]. A module built in training mode (nn.Module's default, and
    KernelBench never calls .eval()) zeroes a random p of its input on every call. The stand-in
    has the same names (torch.nn.modules.dropout._DropoutNd, named_modules)."""
    base = getattr(getattr(getattr(torch.nn, "modules", None), "dropout", None), "_DropoutNd", None)
    named = getattr(instance, "named_modules", None)
    if base is None or named is None:
        return []
    return [(name or type(m).__name__, m) for name, m in named()
            if isinstance(m, base) and getattr(m, "training", True)
            and float(getattr(m, "p", 0) or 0) > 0]


def kernelbench_trial_seed(torch, seed):
    """The seed of KernelBench's first correctness trial (src/eval.py, run_and_check_correctness:
    torch.manual_seed(seed), then one torch.randint(0, 2**32 - 1, (1,)) per trial). Its inputs
    come from that seed while the model's parameters come from `seed`: drawing both from the
    same seed would correlate them (torch.rand inputs and nn.Linear's uniform weights are then
    the same numbers), which KernelBench's check never sees."""
    torch.manual_seed(seed)
    return int(torch.randint(0, 2**32 - 1, (1,)).item())


def measure(engine, module, model, init, req, outputs, dropout_off):
    """Runs Model(*init) on the problem's own inputs (get_inputs() under KernelBench's first
    trial seed) on the GPU when there is one, else on the CPU when the outputs fit in
    `measure_bytes`, with the dropout modules named by `dropout_off` in eval mode. Returns
    {"largest": the largest finite |value| of each float output (0.0 when it has none) or None,
     "nonfinite": whether each output holds NaN or infinity,
     "input_ranges": per input, {"min", "max", "rows_sum_to_one"} over its finite values or None,
     "random": whether forward advanced torch's random number generators,
     "note": why nothing was measured, or None}."""
    nothing = {"largest": [None] * len(outputs), "nonfinite": [False] * len(outputs),
               "input_ranges": [], "random": False, "note": None}
    if engine.name == "stand-in" or not req.get("measure", True):
        return nothing
    torch = engine.torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size = sum(_nbytes(torch, o) for o in outputs)
    limit = req.get("measure_bytes", 1 << 30)
    if device == "cpu" and size > limit:
        return {**nothing, "note": (
            f"the outputs ({size >> 20} MiB) were too large to run the model on the CPU at import: "
            f"check that KernelBench's tolerances discriminate (ksearch refuses a reference whose "
            f"outputs are all below atol) and that the model is not random")}
    try:
        seed = req.get("seed", 42)
        torch.manual_seed(seed)
        instance = model(*init)
        for name, m in dropout_modules(torch, instance):
            if name in dropout_off:
                m.eval()
        if hasattr(instance, "to"):
            instance = instance.to(device)
        torch.manual_seed(kernelbench_trial_seed(torch, seed))
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        ranges = [_range(torch, x) for x in inputs]
        before = _rng_states(torch, device)
        with torch.no_grad():
            result = instance(*inputs)
        random = any(not torch.equal(a, b) for a, b in zip(before, _rng_states(torch, device)))
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        largest, nonfinite = [], []
        for v in items:
            if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel():
                m, bad = _largest_finite(torch, v.detach())
                largest.append(m)
                nonfinite.append(bad)
            else:
                largest.append(None)
                nonfinite.append(False)
        return {"largest": largest, "nonfinite": nonfinite, "input_ranges": ranges,
                "random": random, "note": None}
    except Exception as e:  # noqa: BLE001 - the measurements are advice; the shapes are known
        return {**nothing, "note": (
            f"running the model on the {device} to measure its outputs failed "
            f"({type(e).__name__}: {str(e)[:200]}): KernelBench's tolerances are kept")}


def _rng_states(torch, device):
    states = [torch.get_rng_state()]
    if device == "cuda":
        states.append(torch.cuda.get_rng_state())
    return states


def _finite_bounds(torch, x):
    """(min, max, whether x holds NaN or infinity) over x's finite values ((None, None, True)
    when it has none), without copying x when it is all finite: outputs and inputs of newer
    KernelBench problems take several GiB of a shared GPU."""
    finite = torch.isfinite(x)
    if bool(finite.all()):
        return float(x.min()), float(x.max()), False
    if not bool(finite.any()):
        return None, None, True
    inf = torch.full((), float("inf"), dtype=x.dtype, device=x.device)
    return float(torch.where(finite, x, inf).min()), float(torch.where(finite, x, -inf).max()), True


def _largest_finite(torch, v):
    """(the largest finite |value| of v, 0.0 when it has none; whether v holds NaN or infinity),
    as the harness's vet of a reference reads it."""
    low, high, bad = _finite_bounds(torch, v)
    return (0.0 if low is None else max(abs(low), abs(high))), bad


def _range(torch, x):
    """{"min", "max", "rows_sum_to_one"} of a float tensor's finite values, else None."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or not x.numel():
        return None
    low, high, bad = _finite_bounds(torch, x.detach())
    if low is None:
        return None
    # Rows of a probability distribution (a softmax along the last dim), which a problem's
    # model may rely on (KL divergence) and ksearch's draws do not reproduce.
    rows = False
    if low >= 0 and not bad and x.dim() >= 1 and x.shape[-1] > 1:
        sums = x.detach().sum(-1, dtype=torch.float64)
        rows = bool(((sums - 1).abs() <= 1e-3).all())
    return {"min": low, "max": high, "rows_sum_to_one": rows}


def _nbytes(torch, described):
    count = 1
    for s in described["shape"]:
        count *= s
    return count * getattr(torch, described["dtype"]).itemsize


def gpumode(cpu_engine, generate_input, ref_kernel, req, given, records):
    """GPU MODE's ref_kernel run for real on generate_input's own value (its seed included, as
    GPU MODE's eval calls it), on the GPU when there is one, else on the CPU (under `cpu_engine`,
    which puts explicit CUDA devices on the CPU), for the first call of each distinct record
    whose tensors fit in `measure_bytes` (1 GiB on a GPU, 64 MiB on the CPU). Returns ([per
    call: None, or {"largest": the largest finite |value| of each float output (0.0 when it has
    none; None for other outputs), "redrawn": the same on the value with every float tensor
    redrawn from a standard normal, when some output was 0.0, else None}], a note or None).
    The redraw tells an output that is zero whatever the inputs (helion's chunk_fwd_h: the one
    chunk's state is the initial zeros when T = 64) from one zero on the problem's own values
    only (linalg-eigh's lapack_zero case), which ksearch's own draws do not reproduce."""
    torch = cpu_engine.torch
    out = [None] * len(records)
    if not req.get("measure", True):
        return out, None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    limit = req.get("measure_bytes", (1 << 30) if device == "cuda" else (64 << 20))
    seen, skipped, failed, saved_bytes = set(), 0, None, 0
    for i, record in enumerate(records):
        key = json.dumps(record, sort_keys=True)
        if key in seen:
            continue  # the importer keeps the first of the calls with the same sizes
        seen.add(key)
        size = sum(_nbytes(torch, d) for d in record["inputs"] + record["outputs"] if d["kind"] == "tensor")
        if size > limit:
            skipped += 1
            continue
        save = None
        if req.get("save_dir"):
            computed = [j for j, d in enumerate(record["inputs"])
                        if d["kind"] == "tensor" and d.get("origin") is None]
            if computed:
                save = (os.path.join(req["save_dir"], f"call{i}.safetensors"), computed,
                        req.get("save_bytes", 1 << 30) - saved_bytes)
        try:
            out[i] = _gpumode_call(torch, cpu_engine.context if device == "cpu" else None,
                                   generate_input, ref_kernel, given[i], save)
            saved_bytes += (out[i].get("saved") or {}).get("bytes", 0)
        except Exception as e:  # noqa: BLE001 - the measurements are advice; the shapes are known
            failed = failed or f"{type(e).__name__}: {str(e)[:200]}"
        finally:
            cpu_engine.origins.clear()
    notes = []
    if skipped:
        notes.append(f"{skipped} distinct test(s) or benchmark(s) had tensors over "
                     f"{limit >> 20} MiB and were not run for real on the {device}")
    if failed:
        notes.append(f"running ref_kernel on the {device} to measure its outputs failed ({failed})")
    if not notes:
        return out, None
    return out, ("reference values: " + "; ".join(notes) + ": for those, nothing tells whether an "
                 "output is zero everywhere (ksearch eval refuses a reference whose output has no "
                 "value above atol)")


def _gpumode_call(torch, context, generate_input, ref_kernel, given, save):
    """`save`: None, or (file, indices of the inputs to write there, bytes left to write): the
    tensors generate_input computes (no torch factory made them, so ksearch cannot draw them),
    written before ref_kernel runs (it may change them) so the task can give each workload the
    problem's own values."""
    import contextlib
    with (context() if context else contextlib.nullcontext()), torch.no_grad():
        data = generate_input(**given)
        saved = _save(torch, data, *save) if save else None
        largest = _largest_each(torch, ref_kernel(data))
        redrawn = None
        if any(m == 0.0 for m in largest):
            torch.manual_seed(20261203)
            redrawn = _largest_each(torch, ref_kernel(_redrawn(torch, data)))
    return {"largest": largest, "redrawn": redrawn, "saved": saved}


# torch dtype name -> safetensors code, for the dtypes ksearch's harness reads back.
_SAFETENSORS = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64",
                "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def _leaves(torch, value):
    """The tensors and numbers of generate_input's value in the order the probe names its
    inputs (depth first, dicts in their order), as probe_gpumode.flatten walks it."""
    if isinstance(value, torch.Tensor) or isinstance(value, (bool, int, float)):
        return [value]
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(torch, v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(torch, v)]
    return []


def _save(torch, data, path, indices, budget):
    """Writes the leaves `indices` of `data` to the safetensors file `path` (keys `input_J`);
    {"file", "inputs": the indices written, "bytes", "skipped": why some were not}, or None
    when none was written."""
    leaves = _leaves(torch, data)
    header, blobs, offset, written, skipped = {}, [], 0, [], []
    for j in indices:
        t = leaves[j] if j < len(leaves) else None
        if not isinstance(t, torch.Tensor):
            continue
        code = _SAFETENSORS.get(str(t.dtype).replace("torch.", ""))
        if code is None:
            skipped.append(f"input {j} is {t.dtype}, which ksearch's safetensors reader does not take")
            continue
        raw = t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        if offset + len(raw) > budget:
            skipped.append(f"input {j} would pass the {budget >> 20} MiB left for saved inputs")
            continue
        header[f"input_{j}"] = {"dtype": code, "shape": [int(s) for s in t.shape],
                                "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
        written.append(j)
    if not written:
        return {"file": None, "inputs": [], "bytes": 0, "skipped": skipped}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    return {"file": os.path.basename(path), "inputs": written, "bytes": offset, "skipped": skipped}


def _largest_each(torch, result):
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    return [_largest_finite(torch, v.detach())[0]
            if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() else None
            for v in items]


def _redrawn(torch, value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return torch.randn(value.shape, dtype=torch.float32, device=value.device).to(value.dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(_redrawn(torch, v) for v in value)
    if isinstance(value, dict):
        return {k: _redrawn(torch, v) for k, v in value.items()}
    return value
