"""The `mlx` candidate format, parsed and checked without MLX (docs/mlx.md).

A candidate of language `mlx` is one of:

- a kernel: a launch spec (`*.toml`, or `*.json` with the same keys) that the entry point names,
  holding the kernel body (inline, or in another source file), an optional header, and how to
  launch it: grid and threadgroup (threads, as MLX counts them), template arguments, the
  definition inputs it takes, its outputs' shapes and dtypes, init_value, and per dialect the
  dynamic shared memory (CUDA) or atomic outputs (Metal). The harness makes one
  mx.fast.cuda_kernel (Linux) or mx.fast.metal_kernel (macOS) from it.
- a launcher: a Python module (`*.py`) whose entry function takes the inputs as MLX arrays
  (scalars as Python numbers) and returns the outputs; it may build several mx.fast kernels.

Launch spec (TOML; sizes are integers or integer expressions over the definition's axes, with
+ - * // % and parentheses, `/` only where it divides exactly, and min(), max(), cdiv()):

    name = "attention"            # optional; default: the entry point's symbol
    inputs = ["q", "k", "v"]      # optional; default: every definition input, in order
    grid = ["batch_size * num_heads * seq_len * 128", 1, 1]   # threads, 1 to 3 entries
    threadgroup = [128, 1, 1]
    ensure_row_contiguous = true  # optional (default true)
    init_value = 0.0              # optional: outputs start at this value (part of the kernel's
                                  # algorithm); absent: the harness poisons them (correctness)
    [template]                    # optional: name = int | bool | "expression" | {dtype = "..."}
    SEQ_LEN = "seq_len"
    [[outputs]]                   # optional; default: the definition's outputs. Names that are
    name = "out"                  # not definition outputs are scratch outputs, dropped after
    shape = ["batch_size", 32, "seq_len", 128]   # the call
    dtype = "float16"
    [cuda]                        # one section per dialect the candidate is written for
    source = '''...'''            # the body (or source_file = "kernel.cu"); header / header_file
    shared_memory = 0             # dynamic shared memory in bytes (expression allowed)
    [metal]
    source_file = "kernel.metal"
    atomic_outputs = false

A dialect section may also set grid, threadgroup and template, which then replace the top-level
ones for that dialect. Every problem is a ValueError whose text names the file and the field.
"""

import sys

from ...definition import Spec
# The pieces, re-exported: callers and tests use them as mlx_spec.<name>.
from .launch_spec import (  # noqa: F401
    Expr, KernelSpec, Launch, NeedsGpu, Output, Problem, kernel_spec, load_table)
from .limits import (  # noqa: F401
    DIALECTS, DTYPES, LIMITS, MAX_THREADS, Limits, static_arrays)

SPEC_SUFFIXES = (".toml", ".json")
LAUNCHER_SUFFIX = ".py"


def platform_dialect(platform=None):
    """The kernel dialect MLX runs on this platform: Metal on macOS, CUDA elsewhere."""
    return "metal" if (platform or sys.platform) == "darwin" else "cuda"


class LauncherSpec:
    """A Python launcher: the module file and the function to call."""

    def __init__(self, file, symbol):
        self.file, self.symbol = file, symbol


def parse(candidate, definition, dialect):
    """The candidate of a request (after sources.check) as a KernelSpec or LauncherSpec.

    `candidate` is a sources.Candidate; `definition` a definition.Spec; `dialect` the kernel
    dialect of this machine (cuda or metal), or None where no GPU runs kernels (mlx:cpu).
    """
    files = dict(candidate.sources)
    entry = candidate.entry_file or next(
        (p for p, _ in candidate.sources if p.endswith(SPEC_SUFFIXES + (LAUNCHER_SUFFIX,))), None)
    if entry is None or not entry.endswith(SPEC_SUFFIXES + (LAUNCHER_SUFFIX,)):
        raise ValueError(f"entry_point {candidate.entry!r}: an mlx candidate's entry is its launch "
                         f"spec (.toml or .json) or its Python launcher (.py), not {entry!r}")
    if entry.endswith(LAUNCHER_SUFFIX):
        return LauncherSpec(entry, candidate.symbol)
    table = load_table(entry, files[entry])
    return kernel_spec(entry, table, files, definition, dialect, candidate.symbol)


def check(candidate, definition, dialect, workloads):
    """(spec, launches): the candidate parsed and, a kernel, resolved for every workload (no
    launches for a launcher). Nothing here needs MLX or a GPU, so it comes first: with `dialect`
    None (MLX's CPU device) a launch spec is checked in full, workloads included, for every
    dialect it has a section for, and only then refused as needing a GPU (NeedsGpu)."""
    try:
        spec = parse(candidate, definition, dialect)
    except NeedsGpu as e:
        for d in e.dialects:
            check_workloads(parse(candidate, definition, d), definition, workloads)
        raise
    if isinstance(spec, LauncherSpec):
        return spec, []
    return spec, check_workloads(spec, definition, workloads)


def check_workloads(spec, definition, workloads):
    """Resolve the kernel's sizes for every workload, so a bad expression is found before
    anything runs; returns the launches in workload order."""
    launches = []
    for i, w in enumerate(workloads):
        axes = definition.axes_for(w, i)
        launches.append(spec.launch(axes, f" for workload {i} ({w.get('uuid')!r})"))
    return launches


def axes_from_shapes(definition, shapes):
    """The var axes' values read off the shapes of the inputs (definition order; None for a
    scalar); for callers that hold arrays but no workload (bench scripts)."""
    axes = dict(definition.const)
    for t, shape in zip(definition.inputs, shapes):
        if shape is None or t.is_scalar:
            continue
        if len(shape) != len(t.shape_spec):
            raise ValueError(f"input '{t.name}' has {len(shape)} dimensions, the definition "
                             f"gives {len(t.shape_spec)}")
        for d, n in zip(t.shape_spec, shape):
            if isinstance(d, int) or d in definition.const:
                expected = d if isinstance(d, int) else definition.const[d]
                if n != expected:
                    raise ValueError(f"input '{t.name}' has {n} along {d!r}, expected {expected}")
            elif axes.setdefault(d, int(n)) != n:
                raise ValueError(f"axis {d!r} is {axes[d]} in one input and {n} in '{t.name}'")
    missing = [a for a in definition.var if a not in axes]
    if missing:
        raise ValueError(f"axis {missing[0]!r} appears in no input's shape")
    return axes


def definition_spec(definition):
    """definition.Spec of a definition object (the harness's own parsed form)."""
    return definition if isinstance(definition, Spec) else Spec(definition)
