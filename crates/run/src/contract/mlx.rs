//! Backend `mlx` (harness/ksearch_harness/backends/mlx/; docs/mlx.md): a launch spec holding a
//! kernel body for `mx.fast.cuda_kernel` or `mx.fast.metal_kernel`, or a Python launcher.

use super::{entry, file, BackendContract, Setting};
use crate::knowledge::Platform;
use ksearch_spec::Language;

/// The file a single unnamed code block is given when the task has no seed.
pub(super) const DEFAULT_FILE: &str = "kernel.toml";

pub(super) fn contract(s: &Setting<'_>) -> BackendContract {
    let task = s.task;
    let def = &task.definition;
    let entry = entry(task);
    let inputs: Vec<&str> = def.inputs.keys().map(String::as_str).collect();
    let outputs: Vec<&str> = def.outputs.keys().map(String::as_str).collect();
    let (section, api, here) = match s.platform {
        Platform::MacOs => ("[metal]", "mx.fast.metal_kernel", "Metal"),
        Platform::Linux => ("[cuda]", "mx.fast.cuda_kernel", "CUDA"),
    };
    let device = match s.device {
        Some(hw) => hw.display_name.trim().to_string(),
        None => "the GPU MLX sees".to_string(),
    };
    BackendContract {
        language: Language::Mlx,
        signature: format!(
            "A launch spec (the seed's entry: `{}::{entry}`) or a Python launcher (entry `FILE.py::{entry}`)",
            file(task)
        ),
        calling: format!(
            "An MLX kernel (docs/mlx.md): a TOML launch spec (entry `FILE.toml::{entry}`) holding the kernel body \
             for the device's dialect, [cuda] for mx.fast.cuda_kernel on NVIDIA GPUs or [metal] for \
             mx.fast.metal_kernel on Apple GPUs (source = a multi-line string, or source_file; optional header), \
             with grid and threadgroup counted in threads (integers or expressions over the axes: axis names, + - * \
             / (exact) // %, parentheses, min, max, cdiv(a, b)), [template] constants, in [cuda] optionally \
             shared_memory = BYTES (an integer or expression: dynamic shared memory for `extern __shared__`, \
             beyond the 48 KB of static arrays), and optionally [[outputs]] (extra names are scratch outputs) and init_value. MLX writes \
             the signature: the inputs {} as const T* (a scalar input is a 0-d array: name[0] in CUDA, name in \
             Metal), then the outputs {} as T*; sizes come from template constants. MLX rounds the CUDA grid up \
             to whole blocks, so bounds-check. Write every output element (unwritten ones hold NaN) and never \
             write the inputs. Or a Python launcher (entry `FILE.py::{entry}`) called with the inputs as MLX \
             arrays, returning the outputs as MLX arrays; it may build several mx.fast kernels.",
            inputs.join(", "),
            outputs.join(", ")
        ),
        device: format!("{device} through MLX; on this platform the body in {section} runs ({api}, {here})"),
        build: format!(
            "no command of ours: MLX compiles the body at its first call ({}), which is a correctness call; a body \
             that does not compile fails that workload with the compiler's message.",
            match s.platform {
                Platform::MacOs => "the Metal compiler",
                Platform::Linux => "NVRTC",
            }
        ),
        arithmetic: "MLX's compiler defaults; the harness starts MLX with MLX_ENABLE_TF32=0, so float32 matrix \
                     products are not rounded to TF32. Outputs are compared with the task's reference within its \
                     tolerance."
            .to_string(),
        timing: format!(
            "{}. The host clock spans each call through `mx.eval` and `mx.synchronize()`, after the L2 is flushed.",
            super::timed_calls(s.task)
        ),
    }
}
