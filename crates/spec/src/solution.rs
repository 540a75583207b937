//! Solutions: FlashInfer-Bench Solution JSON, or one bare source file.

use crate::error::{parse_json, parse_value, Problems, SpecError};
use crate::language::{CallingStyle, Language};
use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A kernel for a task: FlashInfer-Bench's Solution (its source files and how to build and call
/// them). [`Solution::load`] and [`Solution::from_source`] validate against the task; a value
/// built by hand is checked only by [`Solution::validate`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Solution {
    /// The solution's name (for a bare source file, its file name).
    pub name: String,
    /// The name of the [`Definition`](crate::Definition) it implements; must be the task's.
    pub definition: String,
    /// Who wrote it, when known.
    #[serde(default)]
    pub author: Option<String>,
    /// How to build and call it.
    pub spec: BuildSpec,
    /// Its files; at least one, paths distinct and valid under [`check_source_path`].
    pub sources: Vec<SourceFile>,
    /// What the solution does, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The `spec` of a Solution: language, entry point and calling convention.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildSpec {
    /// The language it is written in (FlashInfer-Bench's `tilelang` is refused when a Solution
    /// JSON is read; its `cpp` and bound `cuda` are [`Language::Cpp`] and
    /// [`Language::CudaBinding`]).
    pub language: Language,
    /// FlashInfer-Bench's list of hardware the solution is meant for; kept as given, not used
    /// by ksearch.
    #[serde(default)]
    pub target_hardware: Vec<String>,
    /// `file::symbol`.
    pub entry_point: String,
    /// FlashInfer-Bench's list of dependencies; kept as given, not used by ksearch.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Whether the entry writes its outputs into buffers passed after the inputs (true, the
    /// default) rather than returning them. The `c` backend requires true; for Python-module
    /// candidates false selects the task's non-dps calling convention; for `cpp` and
    /// `cuda_binding` false means the entry returns its outputs (FlashInfer-Bench's meaning).
    #[serde(default = "yes")]
    pub destination_passing_style: bool,
    /// How a `cpp` or `cuda_binding` solution is built into an extension module and called
    /// (FlashInfer-Bench's `spec.binding`; required for those languages, absent for the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<Binding>,
}

/// FlashInfer-Bench's bindings of C++ and CUDA sources: how they are built into a module that
/// Python calls with tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Binding {
    /// Apache TVM FFI (`tvm_ffi.cpp.build`, PyPI's apache-tvm-ffi): the entry is exported with
    /// `TVM_FFI_DLL_EXPORT_TYPED_FUNC` and takes `tvm::ffi::TensorView`s.
    #[serde(rename = "tvm-ffi")]
    TvmFfi,
    /// A PyTorch C++ extension (`torch.utils.cpp_extension.load`): the entry is a pybind11
    /// `m.def` taking `torch::Tensor`s.
    #[serde(rename = "torch")]
    Torch,
}

impl Binding {
    /// The binding a solution in `language` is built with when none is named: tvm-ffi
    /// (FlashInfer-Bench's default) for `cpp` and `cuda_binding`, none for the others.
    pub fn default_for(language: Language) -> Option<Binding> {
        match language {
            Language::Cpp | Language::CudaBinding => Some(Binding::TvmFfi),
            Language::C | Language::Cuda | Language::Triton | Language::Python | Language::Mlx => None,
        }
    }

    /// FlashInfer-Bench's spelling (`tvm-ffi`, `torch`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Binding::TvmFfi => "tvm-ffi",
            Binding::Torch => "torch",
        }
    }
}

fn yes() -> bool {
    true
}

/// One file of a solution (or of an expertise entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    /// Relative path, as the harness writes it into its build folder.
    pub path: String,
    /// The file's text.
    pub content: String,
}

impl Solution {
    /// Loads a Solution JSON (`*.json`) or a bare source file for `task`.
    pub fn load(path: &Path, task: &Task) -> Result<Solution, SpecError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Io {
            path: file.clone(),
            source,
        })?;
        if path.extension().is_some_and(|e| e == "json") {
            let value: serde_json::Value = parse_json(&file, &text)?;
            let value = crate::solution_fib::normalize(&file, value)?;
            let sol: Solution = parse_value(&file, value)?;
            sol.validate(&file, task)?;
            Ok(sol)
        } else {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            Solution::from_source(&file, &name, text, task)
        }
    }

    /// Wraps one source file as a solution, following the task's kernel convention.
    pub fn from_source(file: &str, name: &str, content: String, task: &Task) -> Result<Solution, SpecError> {
        let language = language_of_in(name, task.config.kernel.language).ok_or_else(|| {
            SpecError::one(
                file,
                "",
                "cannot tell the language from the file extension; use .c, .cu, .py (.toml for an mlx launch spec), or a Solution JSON",
            )
        })?;
        let entry = task.config.kernel.entry.clone().ok_or_else(|| {
            SpecError::one(
                task.file("task.toml"),
                "kernel.entry",
                "is not set, so a bare source file has no entry symbol; set it or pass a Solution JSON",
            )
        })?;
        let sol = Solution {
            name: name.to_string(),
            definition: task.definition.name.clone(),
            author: None,
            spec: BuildSpec {
                language,
                target_hardware: Vec::new(),
                entry_point: format!("{name}::{entry}"),
                dependencies: Vec::new(),
                destination_passing_style: match language.calling_style() {
                    CallingStyle::DestinationPassing => true,
                    CallingStyle::PythonModule => task.config.kernel.calling == crate::task_config::Calling::Dps,
                    // MLX candidates return their outputs: MLX allocates them.
                    CallingStyle::ReturnsOutputs => false,
                    CallingStyle::Binding => true,
                },
                binding: Binding::default_for(language),
            },
            sources: vec![SourceFile {
                path: name.to_string(),
                content,
            }],
            description: None,
        };
        sol.validate(file, task)?;
        Ok(sol)
    }

    /// Checks the solution against `task`; `file` names it in errors.
    pub fn validate(&self, file: &str, task: &Task) -> Result<(), SpecError> {
        let mut p = Problems::new(file);
        if self.definition != task.definition.name {
            p.push(
                "definition",
                format!(
                    "names definition '{}' but the task is '{}'",
                    self.definition, task.definition.name
                ),
            );
        }
        if self.sources.is_empty() {
            p.push("sources", "must hold at least one file");
        }
        for (i, s) in self.sources.iter().enumerate() {
            if let Err(why) = check_source_path(&s.path) {
                p.push(format!("sources[{i}].path"), format!("'{}' {why}", s.path));
            }
            if self.sources[..i].iter().any(|o| o.path == s.path) {
                p.push(format!("sources[{i}].path"), format!("'{}' appears twice", s.path));
            }
        }
        match self.spec.entry_point.split_once("::") {
            Some((f, sym)) if !f.is_empty() && crate::definition::is_c_identifier(sym) => {
                if !self.sources.iter().any(|s| s.path == f) {
                    p.push("spec.entry_point", format!("file '{f}' is not among the sources"));
                }
            }
            _ => p.push(
                "spec.entry_point",
                format!("'{}' must be 'file::symbol'", self.spec.entry_point),
            ),
        }
        match self.spec.language {
            Language::Mlx => check_mlx(self, &mut p),
            Language::C if !self.spec.destination_passing_style => p.push(
                "spec.destination_passing_style",
                "the c backend needs destination-passing style (true)",
            ),
            Language::C | Language::Cuda | Language::Triton | Language::Python => {}
            Language::Cpp | Language::CudaBinding => {
                if self.spec.binding.is_none() {
                    p.push(
                        "spec.binding",
                        format!(
                            "a {} solution is built through a binding: give tvm-ffi or torch",
                            self.spec.language
                        ),
                    );
                }
            }
        }
        let bound = matches!(self.spec.language, Language::Cpp | Language::CudaBinding);
        if let (Some(b), false) = (self.spec.binding, bound) {
            p.push(
                "spec.binding",
                format!(
                    "'{}' applies to cpp and cuda_binding solutions only, not to {}",
                    b.as_str(),
                    self.spec.language
                ),
            );
        }
        p.into_result()
    }
}

/// The rule for source file names, shared with the harness (which writes them into its build
/// folder and passes them to the compiler): plain relative paths, nothing a compiler could read as
/// a flag, and not the name of the harness's own build output.
pub fn check_source_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.starts_with('/') {
        return Err("must be relative");
    }
    if path.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err("must not contain empty, '.' or '..' parts");
    }
    if path.starts_with('-') {
        return Err("must not start with '-' (a compiler would read it as a flag)");
    }
    if path == "candidate.so" {
        return Err("is reserved for the harness's build output");
    }
    Ok(())
}

/// The language of a bare file for a task written in `task_language`: `.py` files are `python`
/// modules for Python tasks, MLX launchers for MLX tasks and `triton` otherwise; a `.toml` file
/// is an MLX launch spec in an MLX task.
pub fn language_of_in(name: &str, task_language: Language) -> Option<Language> {
    if task_language == Language::Mlx && (name.ends_with(".toml") || name.ends_with(".py")) {
        return Some(Language::Mlx);
    }
    match language_of(name)? {
        Language::Triton if task_language == Language::Python => Some(Language::Python),
        other => Some(other),
    }
}

/// What can be checked of an `mlx` solution without the harness (which checks the launch spec
/// fully, docs/mlx.md): its entry is a launch spec (`.toml`, `.json`) or a Python launcher
/// (`.py`), a spec parses, and the body and header files it names are among the sources.
fn check_mlx(sol: &Solution, p: &mut Problems) {
    let Some((entry, _)) = sol.spec.entry_point.split_once("::") else {
        return; // reported with the entry point
    };
    let Some(file) = sol.sources.iter().find(|s| s.path == entry) else {
        return;
    };
    let table: serde_json::Value = if entry.ends_with(".toml") {
        match toml::from_str::<toml::Value>(&file.content) {
            Ok(v) => serde_json::to_value(v).unwrap_or_default(),
            Err(e) => {
                p.push(
                    format!("sources.{entry}"),
                    format!("is not a valid TOML launch spec: {}", e.message()),
                );
                return;
            }
        }
    } else if entry.ends_with(".json") {
        match serde_json::from_str(&file.content) {
            Ok(v) => v,
            Err(e) => {
                p.push(
                    format!("sources.{entry}"),
                    format!("is not a valid JSON launch spec: {e}"),
                );
                return;
            }
        }
    } else if entry.ends_with(".py") {
        return; // a launcher: the harness checks its syntax
    } else {
        p.push(
            "spec.entry_point",
            format!(
                "'{entry}': an mlx solution's entry is its launch spec (.toml or .json) or its \
                 Python launcher (.py)"
            ),
        );
        return;
    };
    let dialects: Vec<&str> = ["cuda", "metal"]
        .into_iter()
        .filter(|d| table.get(d).is_some_and(|s| s.is_object()))
        .collect();
    if dialects.is_empty() {
        p.push(
            format!("sources.{entry}"),
            "has no kernel: a launch spec needs a [cuda] or [metal] section with the body",
        );
    }
    for d in dialects {
        let section = &table[d];
        if section.get("source").is_none() && section.get("source_file").is_none() {
            p.push(
                format!("sources.{entry}"),
                format!("[{d}] has neither source nor source_file (the kernel body)"),
            );
        }
        for key in ["source_file", "header_file"] {
            if let Some(named) = section.get(key) {
                let found = named
                    .as_str()
                    .is_some_and(|n| n != entry && sol.sources.iter().any(|s| s.path == n));
                if !found {
                    p.push(
                        format!("sources.{entry}"),
                        format!("{d}.{key} = {named} is not among the solution's other sources"),
                    );
                }
            }
        }
    }
}

/// The language a bare file is written in, from its extension: `.c` is C, `.cu` CUDA, `.py`
/// Triton ([`language_of_in`] reads `.py` by the task's language).
pub fn language_of(name: &str) -> Option<Language> {
    match Path::new(name).extension()?.to_str()? {
        "c" => Some(Language::C),
        "cu" => Some(Language::Cuda),
        "py" => Some(Language::Triton),
        _ => None,
    }
}
