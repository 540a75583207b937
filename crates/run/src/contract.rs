//! What a candidate must be, per backend: its entry point and calling convention, the device it
//! runs on, how it is built, and the build's arithmetic choices (FMA contraction, fast math).
//! One module per backend states its contract ([`c`], [`cuda`], [`triton`], [`python`],
//! [`mlx`], [`binding`] for `cpp` and `cuda_binding`), following what the harness's backend does (docs/protocol.md); the planner's and
//! coder's prompts get it as the task brief's `convention`. [`contract`] and [`default_file`]
//! dispatch on the task's [`Language`] with exhaustive matches, so a new language does not
//! compile until it has a contract here.
//!
//! The modules pair by name with ksearch-eval's `backend/` (the request each backend gets) and
//! the harness's `ksearch_harness/backends/` (what it does with it). They stay in this crate,
//! not beside eval's: a contract is prompt text, stated for the knowledge base's device entry,
//! the platform and this machine's probed CPU ([`Setting`]), which are the run's knowledge, and
//! ksearch-eval evaluates without prompts.

pub mod binding;
pub mod c;
pub mod cuda;
pub mod mlx;
pub mod python;
pub mod triton;

use crate::knowledge::host::HostCpu;
use crate::knowledge::Platform;
use ksearch_kb::HardwareSpec;
use ksearch_spec::{Language, Task};

/// One backend's contract, in words for the prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendContract {
    /// The task's `[kernel].language`.
    pub language: Language,
    /// The entry point's signature (C, CUDA) or call (Python).
    pub signature: String,
    /// How the harness calls it and what it must and must not do.
    pub calling: String,
    /// Where the candidate runs.
    pub device: String,
    /// How the candidate is built, with the exact commands where there are any.
    pub build: String,
    /// Choices of the build that change the arithmetic.
    pub arithmetic: String,
    /// How a call is timed, so a brain knows what a reported time holds (launch path or not,
    /// caches warm or flushed) before it optimises against it.
    pub timing: String,
}

impl BackendContract {
    /// The contract as the prompts' "Calling convention" section shows it.
    pub fn render(&self) -> String {
        format!(
            "{}\n{}\nDevice: {}\nBuild: {}\nArithmetic: {}\nTiming: {}",
            self.signature.trim_end(),
            self.calling.trim_end(),
            self.device.trim_end(),
            self.build.trim_end(),
            self.arithmetic.trim_end(),
            self.timing.trim_end()
        )
    }
}

/// What a contract is stated for: the task, the device its candidates run on (the knowledge
/// base's entry for its target, when known), the platform, and this machine's CPU.
#[derive(Debug, Clone, Copy)]
pub struct Setting<'a> {
    /// The task whose candidates the contract is for.
    pub task: &'a Task,
    /// The knowledge base's hardware entry for the task's target device; `None` when it has
    /// none, and the contract then names no device figures.
    pub device: Option<&'a HardwareSpec>,
    /// The platform ksearch runs on (it picks an MLX task's kernel dialect).
    pub platform: Platform,
    /// This machine's CPU and C compiler as probed, for the C backend's device and build lines;
    /// `None` when not probed.
    pub host: Option<&'a HostCpu>,
}

/// The contract of the backend that evaluates `setting.task`'s candidates.
pub fn contract(setting: &Setting<'_>) -> BackendContract {
    match setting.task.config.kernel.language {
        Language::C => c::contract(setting),
        Language::Cuda => cuda::contract(setting),
        Language::Triton => triton::contract(setting),
        Language::Python => python::contract(setting),
        Language::Mlx => mlx::contract(setting),
        Language::Cpp | Language::CudaBinding => binding::contract(setting, setting.task.config.kernel.language),
    }
}

/// How many calls a workload's time rests on, as the task sets it: shared by every backend's
/// timing text.
pub(crate) fn timed_calls(task: &Task) -> String {
    let e = &task.config.evaluation;
    format!(
        "each workload's time is the median (+/- IQR) of up to {} timed calls (at least {} once the task's {} s \
         timing budget is spent), after {} warm-up calls; candidate and reference are called in pairs on the same \
         fresh input contents (no call sees contents an earlier one saw), and every call's outputs are checked",
        e.iterations, e.min_iterations, e.max_timing_s, e.warmup
    )
}

/// The timing text of the GPU backends (cuda, triton, python on a GPU).
pub(crate) fn gpu_timing(task: &Task) -> String {
    format!(
        "{}. Before each call the L2 cache is flushed; the call is enqueued behind a gate (a kernel holding the \
         stream until the host has enqueued the whole call) and bracketed by CUDA events, so a time is the device \
         time of all the work the call enqueues, back to back, without the host's launch path; more launches still \
         cost their device-side gaps. A call that makes the host wait for the device (a device-to-host read, \
         `.item()`, a synchronising copy or allocation) cannot stay behind the gate, and then it and the \
         reference are timed with the host's gaps inside the events.",
        timed_calls(task)
    )
}

/// The entry symbol of a task's candidates (`[kernel].entry`, else `kernel`).
pub(crate) fn entry(task: &Task) -> &str {
    task.config.kernel.entry.as_deref().unwrap_or("kernel")
}

/// The file a single unnamed code block of `language` is given when the task has no seed.
pub fn default_file(language: Language) -> &'static str {
    match language {
        Language::C => c::DEFAULT_FILE,
        Language::Cuda => cuda::DEFAULT_FILE,
        Language::Triton => triton::DEFAULT_FILE,
        Language::Python => python::DEFAULT_FILE,
        Language::Mlx => mlx::DEFAULT_FILE,
        Language::Cpp => binding::DEFAULT_FILE_CPP,
        Language::CudaBinding => binding::DEFAULT_FILE_CUDA,
    }
}

/// The file a task's seed lives in, else its language's default file.
pub(crate) fn file(task: &Task) -> String {
    task.seed
        .as_ref()
        .map(|s| s.path.clone())
        .unwrap_or_else(|| default_file(task.config.kernel.language).to_string())
}

/// `x, y` of the definition's inputs, outputs and varying axes, as a Python call lists them.
pub(crate) fn names(task: &Task) -> (Vec<String>, Vec<String>, Vec<String>) {
    let def = &task.definition;
    (
        def.inputs.keys().cloned().collect(),
        def.outputs.keys().cloned().collect(),
        def.var_axes().map(str::to_string).collect(),
    )
}

/// The device's name and compiler target, `NVIDIA H200 (sm_90a)`, or what it defaults to.
pub(crate) fn gpu_name(device: Option<&HardwareSpec>) -> String {
    match device {
        Some(hw) => format!("{} ({})", hw.display_name.trim(), hw.arch),
        None => "the CUDA GPU the evaluation is given".to_string(),
    }
}

/// What the task says about writing the inputs.
pub(crate) fn writes(task: &Task) -> String {
    let writable = &task.config.kernel.writable_inputs;
    if writable.is_empty() {
        "Write every output element; do not modify the inputs (they are checked bit for bit after each call).".into()
    } else {
        format!(
            "Write every output element; only {} may be written among the inputs (every other input is checked bit \
             for bit after each call).",
            writable.join(", ")
        )
    }
}
