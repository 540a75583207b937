"""The magnitudes of a KernelBench model's outputs, measured by running it for real at import
(probe.py finds the shapes without running anything heavy)."""


def largest_outputs(engine, module, model, init, req, outputs):
    """The largest |value| of each float output of Model run for real on the problem's own
    inputs (on the GPU when there is one, else the CPU when the tensors fit in `measure_bytes`),
    so the importer can tell whether KernelBench's atol discriminates; ([None...], a note) when
    it was not run. The meta probe found the shapes; this only reads magnitudes."""
    nothing = [None] * len(outputs)
    if engine.name == "stand-in" or not req.get("measure", True):
        return nothing, None
    torch = engine.torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size = sum(_nbytes(torch, o) for o in outputs)
    limit = req.get("measure_bytes", 1 << 30)
    if device == "cpu" and size > limit:
        return nothing, (f"the outputs ({size >> 20} MiB) were too large to run the model on the CPU "
                         f"at import: check that KernelBench's tolerances discriminate (ksearch refuses "
                         f"a reference whose outputs are all below atol)")
    try:
        torch.manual_seed(req.get("seed", 42))
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        torch.manual_seed(req.get("seed", 42))
        instance = model(*init)
        if hasattr(instance, "to"):
            instance = instance.to(device)
        with torch.no_grad():
            result = instance(*inputs)
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        return [float(v.detach().abs().max()) if v.is_floating_point() and v.numel() else None
                for v in items], None
    except Exception as e:  # noqa: BLE001 - the magnitudes are advice; the shapes are known
        return nothing, (f"running the model on the {device} to measure its outputs failed "
                         f"({type(e).__name__}: {str(e)[:200]}): KernelBench's tolerances are kept")


def _nbytes(torch, described):
    count = 1
    for s in described["shape"]:
        count *= s
    return count * getattr(torch, described["dtype"]).itemsize
