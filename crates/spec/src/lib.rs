//! Task, workload and solution formats of ksearch: what a task is, read from disk or from the
//! binary, fully validated, so that every other crate can take a [`Task`] as given.
//!
//! The native format is FlashInfer-Bench's: a Definition JSON (axes, typed inputs and outputs, a
//! Python reference defining `run`), workloads as JSONL, and Solution JSON. What ksearch adds
//! (tolerances, trials, input distributions, static checks, roofline formulas, the kernel
//! convention, baselines, expertise) lives beside it in `task.toml`, so FlashInfer-Bench files
//! stay untouched. docs/task-format.md describes the files.
//!
//! Entry points:
//! - [`Task::load`] (a folder, its definition.json, or a built-in task's name; [`builtin_names`])
//!   gives a [`Task`]: its [`Definition`], [`Workload`]s, [`TaskConfig`], seed kernel, kernel
//!   template, baselines and [`Expertise`].
//! - [`Solution::load`] and [`Solution::from_source`] read a candidate kernel for a task.
//! - [`KnobSpace`], [`KernelTemplate`] and [`TemplateRenderer`]: kernel templates and the knob
//!   assignments the tuner searches over (docs/templates.md); [`annotations`]: knobs declared
//!   inside a kernel's own source.
//! - [`Language`]: the kernel languages (`c`, `cuda`, `triton`, `python`, `mlx`) and what each
//!   implies: its harness backend, the devices it runs on ([`RunsOn`]), its [`CallingStyle`].
//! - [`KernelResources`]: what the compiler reported for one kernel, shared vocabulary of the
//!   evaluation record, the search and the report.
//!
//! This crate sits at the bottom of the workspace: ksearch-eval, ksearch-kb, ksearch-search,
//! ksearch-run, ksearch-import and ksearch-cli read tasks through it; it depends on none of
//! them and runs nothing (no compiler, no Python, no network).
//!
//! Every loader validates fully and reports each problem as `file: field: what is wrong`
//! ([`Problem`], collected in [`SpecError::Invalid`] so a user sees every mistake at once);
//! nothing here performs I/O beyond reading the files it is pointed at (and printing, once per
//! file, the warning for absent safetensors blobs that are synthesised instead).

#![warn(missing_docs)]

pub mod annotations;
mod dataset;
mod definition;
mod dtype;
mod error;
mod expertise;
mod knobs;
mod language;
mod resources;
mod solution;
mod solution_fib;
pub use solution_fib::to_flashinfer_bench;
mod task;
mod task_config;
mod workload;

pub use dataset::{dataset_root, folder_files as dataset_folder_files, workload_candidates, DatasetFiles};
pub use definition::{Axis, Definition, TensorSpec};
pub use dtype::{DType, Tolerance};
pub use error::{Problem, SpecError};
pub use expertise::{Expertise, ExpertiseConfig, MAX_EXPERTISE_CHARS};
pub use knobs::{
    describe_assignment, Assignment, Constraint, ConstraintError, KernelTemplate, Knob, KnobSpace, KnobValue,
    RenderError, TemplateRenderer,
};
pub use language::{CallingStyle, Language, RunsOn, UnknownLanguage};
pub use resources::KernelResources;
pub use solution::{check_source_path, language_of, language_of_in, Binding, BuildSpec, Solution, SourceFile};
pub use task::{builtin_names, builtin_task_files, Task, TaskOrigin};
pub use task_config::{
    eval_formula, BaselineConfig, Bound, Calling, ChecksConfig, Distribution, EvaluationConfig, ForbiddenPattern,
    KernelConfig, ModuleInit, RooflineConfig, TaskConfig, DISTRIBUTIONS, MAX_TIMEOUT_S,
};
pub use workload::{parse_workloads, InputSpec, Workload};
