//! Backend `python` (harness/ksearch_harness/backends/python/): a Python module of PyTorch
//! code, imported by the harness and called with tensors on the device.

use super::{entry, file, gpu_name, names, writes, BackendContract, Setting};
use ksearch_spec::Language;
use ksearch_spec::{Calling, Task};

/// The call the harness makes under the task's `[kernel].calling`, and what it expects back.
pub(crate) fn call(task: &Task) -> (String, String) {
    let (inputs, outputs, axes) = names(task);
    let name = entry(task);
    match task.config.kernel.calling {
        Calling::Dps => (
            format!("{name}({})", [inputs, outputs.clone(), axes].concat().join(", ")),
            format!(
                "calling `dps`: the inputs in definition order, then the output tensors {} (allocated by the harness, \
                 filled with poison) to write in place, then every varying axis as an int; the return value is ignored.",
                outputs.join(", ")
            ),
        ),
        Calling::Returns => (
            format!("{name}({})", inputs.join(", ")),
            format!(
                "calling `returns`: the inputs in definition order; it returns {} (checked for count, shape, dtype \
                 and device).",
                returned(&outputs)
            ),
        ),
        Calling::Tuple => (
            format!("{name}(({},))", inputs.join(", ")),
            format!(
                "calling `tuple`: one tuple of the inputs in definition order; it returns {} (checked for count, \
                 shape, dtype and device).",
                returned(&outputs)
            ),
        ),
    }
}

fn returned(outputs: &[String]) -> String {
    match outputs {
        [one] => format!("the tensor {one}"),
        many => format!("the tuple ({})", many.join(", ")),
    }
}

/// How a Python-module candidate is called, and what a class entry means.
pub(crate) fn calling(task: &Task, what: &str) -> String {
    let (_, how) = call(task);
    let class = match &task.config.kernel.init {
        Some(_) => format!(
            " The entry is a class: constructed once at load as `torch.manual_seed(init.seed); \
             {}(*init.args).to(device)`, then called like `returns`.",
            entry(task)
        ),
        None => String::new(),
    };
    format!(
        "{what} (entry `{}::{}`; the candidate's .py files are importable from each other). The harness imports it \
         and calls the entry, {how} Arrays are torch tensors on the device (contiguous, row-major), scalars Python \
         numbers, axes ints.{class} {} Work is queued on the current torch stream; the harness synchronises after \
         each call (on a GPU it times the call with CUDA events).",
        file(task),
        entry(task),
        writes(task)
    )
}

/// The file a single unnamed code block is given when the task has no seed.
pub(super) const DEFAULT_FILE: &str = "kernel.py";

pub(super) fn contract(s: &Setting<'_>) -> BackendContract {
    let task = s.task;
    let (signature, _) = call(task);
    BackendContract {
        language: Language::Python,
        signature: format!("def {signature}"),
        calling: calling(task, "A Python module of PyTorch code"),
        device: format!(
            "{} as torch's `cuda:0` (a CPU-only torch's `cpu` with `--device cpu`)",
            gpu_name(s.device)
        ),
        build: "none: the compile stage only checks the syntax (compile(), running no code); the module is imported \
                when it is loaded."
            .to_string(),
        arithmetic: "PyTorch's settings as a fresh process has them (float32 matmuls in full fp32 unless the \
                     candidate changes torch.set_float32_matmul_precision). Outputs are compared with the task's \
                     reference within its tolerance."
            .to_string(),
        timing: format!(
            "{} (with `--device cpu`: the host clock around each call)",
            super::gpu_timing(task)
        ),
    }
}
