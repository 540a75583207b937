//! Task, workload and solution formats of ksearch.
//!
//! The native format is FlashInfer-Bench's: a Definition JSON (axes, typed inputs and outputs, a
//! Python reference defining `run`), workloads as JSONL, and Solution JSON. What ksearch adds
//! (tolerances, trials, input distributions, static checks, roofline formulas, the kernel
//! convention) lives beside it in `task.toml`, so FlashInfer-Bench files stay untouched.
//!
//! Every loader validates fully and reports each problem as `file: field: what is wrong`
//! ([`Problem`]); nothing here performs I/O beyond reading the files it is pointed at.

pub mod annotations;
mod definition;
mod dtype;
mod error;
mod expertise;
mod knobs;
mod resources;
mod solution;
mod task;
mod task_config;
mod workload;

pub use definition::{Axis, Definition, TensorSpec};
pub use dtype::{DType, Tolerance};
pub use error::{Problem, SpecError};
pub use expertise::{Expertise, ExpertiseConfig, MAX_EXPERTISE_CHARS};
pub use knobs::{
    describe_assignment, Assignment, Constraint, ConstraintError, KernelTemplate, Knob, KnobSpace, KnobValue,
    RenderError, TemplateRenderer,
};
pub use resources::KernelResources;
pub use solution::{check_source_path, language_of, language_of_in, BuildSpec, Solution, SourceFile};
pub use task::{builtin_names, builtin_task_files, Task, TaskOrigin};
pub use task_config::{
    eval_formula, BaselineConfig, Bound, Calling, ChecksConfig, Distribution, EvaluationConfig, ForbiddenPattern,
    KernelConfig, ModuleInit, RooflineConfig, TaskConfig, DISTRIBUTIONS, LANGUAGES, MAX_TIMEOUT_S,
};
pub use workload::{parse_workloads, InputSpec, Workload};
