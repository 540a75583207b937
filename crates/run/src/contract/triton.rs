//! Backend `triton` (harness/ksearch_harness/backends/triton/): a Python module with Triton
//! kernels, imported like backend `python`'s; Triton compiles each kernel at its first call.

use super::python::{call, calling};
use super::{gpu_name, BackendContract, Setting};
use ksearch_spec::Language;

/// The file a single unnamed code block is given when the task has no seed.
pub(super) const DEFAULT_FILE: &str = "kernel.py";

pub(super) fn contract(s: &Setting<'_>) -> BackendContract {
    let task = s.task;
    let (signature, _) = call(task);
    let arch = s.device.map(|d| d.arch.as_str()).unwrap_or("the device's arch");
    BackendContract {
        language: Language::Triton,
        signature: format!("def {signature}"),
        calling: calling(
            task,
            "A Python module whose entry function launches Triton kernels (@triton.jit, `kernel[grid](...)`)",
        ),
        device: format!("{} as torch's `cuda:0`", gpu_name(s.device)),
        build: format!(
            "the compile stage only checks the module's syntax; Triton compiles each @triton.jit kernel for {arch} \
             at its first call, which is a correctness call, never a timed one."
        ),
        arithmetic: "Triton's defaults: FMA contraction on; tl.dot on float32 operands uses TF32 unless called with \
                     input_precision=\"ieee\". Outputs are compared with the task's reference within its tolerance."
            .to_string(),
        timing: super::gpu_timing(s.task),
    }
}
