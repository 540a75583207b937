"""A KernelBench model run for real at import (probe.py finds the shapes without running anything
heavy): the magnitudes of its outputs, the values of its inputs, and whether its forward draws
random numbers."""


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
