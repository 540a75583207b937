//! The kernel convention (`[kernel]`): language, entry point, calling convention, seed and
//! tuner files; and the native baselines (`[[baselines]]`) a result is compared with.

use crate::error::Problems;
use crate::language::Language;
use serde::{Deserialize, Serialize};

/// task.toml's `[kernel]`: how candidates for the task are written, built and called. Every
/// field is optional in the file ([`Default`]: a C kernel in destination-passing style).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// The language candidates are written in; `c` by default.
    pub language: Language,
    /// The symbol a bare source file must define.
    pub entry: Option<String>,
    /// Compile C candidates with `-fopenmp` and let them use the machine's cores; off by
    /// default, when a candidate runs with one OpenMP thread.
    pub openmp: bool,
    /// The naive starting kernel, relative to the task folder.
    pub seed: Option<String>,
    /// A kernel template for the knob tuner (docs/templates.md), relative to the task folder.
    pub template: Option<String>,
    /// Its knob file.
    pub knobs: Option<String>,
    /// How the harness calls a Python-module candidate (backends `triton` and `python`).
    pub calling: Calling,
    /// Construction of a class entry point (KernelBench's `ModelNew`): its arguments and the
    /// torch seed set just before, so candidate and reference get the same parameters.
    pub init: Option<ModuleInit>,
    /// Inputs the kernel may write into (GPU MODE's output buffers passed among the inputs,
    /// which a submission fills and returns): their contents are not checked after a call, and
    /// every call still gets fresh ones. Every other input must come back bit for bit.
    pub writable_inputs: Vec<String>,
    /// Folders of the task folder (relative to it) on a Python candidate's module search path,
    /// after the candidate's own folder: GPU MODE's helper modules (`task.py`, `utils.py`) live
    /// there, so `from task import ...` works without code in the candidate that registers them.
    pub python_path: Vec<String>,
}

/// How a Python-module entry point is called (docs/protocol.md). The `c` and `cuda` backends
/// always use destination-passing style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Calling {
    /// `entry(*inputs, *outputs, *var_axes)`, writing the outputs in place.
    #[default]
    Dps,
    /// `entry(*inputs)` returning the output, or a tuple of outputs in definition order.
    Returns,
    /// `entry(tuple_of_inputs)` returning as `Returns` does (GPU MODE's `custom_kernel(data)`).
    Tuple,
}

impl Calling {
    /// The name task.toml and the harness protocol use (`dps`, `returns`, `tuple`).
    pub fn name(self) -> &'static str {
        match self {
            Calling::Dps => "dps",
            Calling::Returns => "returns",
            Calling::Tuple => "tuple",
        }
    }
}

/// `[kernel].init`: how the harness constructs a class entry point, `torch.manual_seed(seed)`
/// then `cls(*args)`, the same for candidate and reference so their parameters match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleInit {
    /// Positional constructor arguments, as JSON values (KernelBench's `get_init_inputs()`).
    #[serde(default)]
    pub args: Vec<serde_json::Value>,
    /// The torch seed set just before construction; 0 by default.
    #[serde(default)]
    pub seed: u64,
    /// Put the constructed object's dropout modules (torch.nn's `_DropoutNd`: `Dropout`,
    /// `Dropout1d`-`3d`, `AlphaDropout`, ...) in eval mode, where they pass their input
    /// through, as the task's reference does to its own. Off by default. A module in training
    /// mode (nn.Module's default) drops a random share of its input on every call, so no two
    /// calls agree and the output cannot be checked; `ksearch import kernelbench` sets this for
    /// a model with dropout (docs/importers.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eval_dropout: bool,
}

/// One `[[baselines]]` entry of task.toml.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// How reports and `ksearch eval --baseline NAME` refer to it.
    pub name: String,
    /// Its source, relative to the task folder.
    pub file: String,
    /// The symbol (function or class) to call.
    pub entry: String,
    /// Defaults to the language the file's extension implies.
    #[serde(default)]
    pub language: Option<Language>,
    /// Defaults to the task's `[kernel].calling`.
    #[serde(default)]
    pub calling: Option<Calling>,
    /// What the baseline computes and with which library, for people reading results.
    #[serde(default)]
    pub description: Option<String>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            language: Language::C,
            entry: None,
            openmp: false,
            seed: None,
            template: None,
            knobs: None,
            calling: Calling::Dps,
            init: None,
            writable_inputs: Vec::new(),
            python_path: Vec::new(),
        }
    }
}

impl KernelConfig {
    /// Pushes the problems of `[kernel]` to `p`.
    pub(super) fn check(&self, p: &mut Problems) {
        for (i, folder) in self.python_path.iter().enumerate() {
            let path = std::path::Path::new(folder);
            let escapes = path
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
            if folder.trim().is_empty() || escapes {
                p.push(
                    format!("kernel.python_path[{i}]"),
                    format!("'{folder}' must be a folder inside the task folder (relative, no '..')"),
                );
            }
        }
        if let Some(entry) = &self.entry {
            if !crate::definition::is_c_identifier(entry) {
                p.push("kernel.entry", format!("'{entry}' is not a valid symbol name"));
            }
        }
        if self.calling != Calling::Dps && !self.language.is_python_module() {
            p.push(
                "kernel.calling",
                format!(
                    "'{}' applies to Python-module candidates (language python or triton); \
                     the {} backend always uses destination-passing style",
                    self.calling.name(),
                    self.language
                ),
            );
        }
    }
}

/// Pushes the problems of `[kernel].writable_inputs` to `p`: each must name an array input of
/// the definition, once.
pub(super) fn check_writable_inputs(names: &[String], def: &crate::definition::Definition, p: &mut Problems) {
    for (i, name) in names.iter().enumerate() {
        let field = format!("kernel.writable_inputs[{i}]");
        match def.inputs.get(name) {
            None => p.push(field, format!("the definition has no input '{name}'")),
            Some(t) if t.shape.is_none() => {
                p.push(field, format!("'{name}' is a scalar, which a kernel cannot write into"))
            }
            Some(_) if names[..i].contains(name) => p.push(field, format!("'{name}' appears twice")),
            Some(_) => {}
        }
    }
}

/// Pushes the problems of the `[[baselines]]` entries to `p`.
pub(super) fn check_baselines(baselines: &[BaselineConfig], p: &mut Problems) {
    for (i, b) in baselines.iter().enumerate() {
        let field = |f: &str| format!("baselines[{i}].{f}");
        if !crate::definition::is_c_identifier(&b.name) {
            p.push(field("name"), format!("'{}' must be an identifier", b.name));
        }
        if baselines[..i].iter().any(|o| o.name == b.name) {
            p.push(field("name"), format!("'{}' appears twice", b.name));
        }
        if !crate::definition::is_c_identifier(&b.entry) {
            p.push(field("entry"), format!("'{}' is not a valid symbol name", b.entry));
        }
        if let Err(why) = crate::solution::check_source_path(&b.file) {
            p.push(field("file"), format!("'{}' {why}", b.file));
        }
        if b.language.is_none() && crate::solution::language_of(&b.file).is_none() {
            p.push(
                field("language"),
                format!(
                    "is not set and '{}' has no extension that names one (.c, .cu, .py)",
                    b.file
                ),
            );
        }
    }
}
