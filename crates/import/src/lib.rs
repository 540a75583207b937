//! Importers: KernelBench problem files and GPU MODE task folders become ksearch task folders
//! (definition.json, workloads.jsonl, task.toml, a seed that passes: the problem's own model or
//! reference kernel re-expressed as a candidate). docs/importers.md says what is carried over and
//! what is not.
//!
//! Entry points: [`import_kernelbench`] (one problem file) and [`import_gpumode`] (one task
//! folder), both taking [`Options`] and returning [`Imported`], or an [`ImportError`] that names
//! the file at fault. ksearch-cli's `ksearch import` calls them and prints the [`Imported`]
//! summary.
//!
//! Shapes are found by running the problem's own Python (`python/probe.py`): with PyTorch when
//! the interpreter has it, else with a shape-only stand-in for the torch calls problem files use
//! (`python/standin_*.py`), so importing works on a machine without PyTorch. Nothing else is
//! run: the importer writes the folder, then loads it back with ksearch-spec (a folder that does
//! not load is an importer defect, [`ImportError::Invalid`]), and leaves evaluating the seed to
//! `ksearch eval`. Its one ksearch dependency is ksearch-spec (ksearch-eval only for its tests),
//! and only ksearch-cli depends on it.

#![warn(missing_docs)]

mod axes;
mod checks;
mod draws;
mod emit;
mod error;
mod gpumode;
mod gpumode_calls;
mod gpumode_files;
mod gpumode_given;
mod gpumode_toml;
mod kernelbench;
mod probe;
mod tolerances;

pub use error::ImportError;
pub use gpumode::import_gpumode;
pub use kernelbench::import_kernelbench;

use ksearch_spec::{DType, Task, TensorSpec};
use std::path::PathBuf;
use std::time::Duration;

/// How to import.
#[derive(Debug, Clone)]
pub struct Options {
    /// The task folder to write.
    pub out: PathBuf,
    /// The definition's name; defaults to the file's or folder's name.
    pub name: Option<String>,
    /// The interpreter that runs the problem; defaults to `$KSEARCH_PYTHON`, else `python3`.
    pub python: Option<PathBuf>,
    /// Use the stand-in for PyTorch even when the interpreter has PyTorch.
    pub stand_in: bool,
    /// Overwrite the importer's files in a non-empty `out`.
    pub force: bool,
    /// How long running the problem to find its shapes may take.
    pub timeout: Duration,
    /// GPU MODE only: the reference function to import when reference.py has no ref_kernel
    /// (one task per function: princeton's reference_forward and reference_backward).
    pub entry: Option<String>,
}

impl Options {
    /// Options writing to `out`, everything else at its default: the name from the source, the
    /// default interpreter, PyTorch when the interpreter has it, no overwriting, and 300 s for
    /// running the problem.
    pub fn new(out: impl Into<PathBuf>) -> Options {
        Options {
            out: out.into(),
            name: None,
            python: None,
            stand_in: false,
            force: false,
            timeout: Duration::from_secs(300),
            entry: None,
        }
    }

    fn python(&self) -> PathBuf {
        self.python
            .clone()
            .or_else(|| std::env::var_os("KSEARCH_PYTHON").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("python3"))
    }
}

/// What an import produced, for the user.
#[derive(Debug)]
pub struct Imported {
    /// The task as loaded back from `dir`.
    pub task: Task,
    /// The task folder written ([`Options::out`]).
    pub dir: PathBuf,
    /// "KernelBench problem FILE" or "GPU MODE task FOLDER".
    pub source: String,
    /// What ran the problem: "stand-in" or "torch VERSION (meta)".
    pub engine: String,
    /// Each file written and what it holds.
    pub written: Vec<(String, String)>,
    /// What the user should check: choices the importer made and what it could not carry over.
    pub checks: Vec<String>,
}

/// Tensor names from the problem (forward's parameters, ref_kernel's unpacking) when they fit,
/// else `x`, `x0`, `x1`, ...; always distinct identifiers.
fn input_names(given: Option<&[String]>, count: usize) -> Vec<String> {
    let mut names: Vec<String> = match given {
        Some(g) if g.len() == count => g.iter().map(|n| axes::identifier(n)).collect(),
        _ if count == 1 => vec!["x".into()],
        _ => (0..count).map(|i| format!("x{i}")).collect(),
    };
    for i in 0..names.len() {
        if names[..i].contains(&names[i]) || names[i] == "run" {
            names[i] = format!("{}_{i}", names[i]);
        }
    }
    names
}

fn output_names(count: usize, inputs: &[String]) -> Vec<String> {
    let base = if inputs.iter().any(|n| n == "output" || n.starts_with("output")) {
        "result"
    } else {
        "output"
    };
    if count == 1 {
        vec![base.to_string()]
    } else {
        (0..count).map(|i| format!("{base}{i}")).collect()
    }
}

fn tensor_spec(axes: Vec<String>, dtype: DType, description: String) -> TensorSpec {
    TensorSpec {
        shape: Some(axes),
        dtype,
        description: Some(description),
    }
}

fn scalar_spec(dtype: DType, description: String) -> TensorSpec {
    TensorSpec {
        shape: None,
        dtype,
        description: Some(description),
    }
}

/// A JSON value as a Python literal (`true` -> `True`, `null` -> `None`).
fn py_literal(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "None".into(),
        serde_json::Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => emit::py_str(s),
        serde_json::Value::Array(items) => format!("[{}]", items.iter().map(py_literal).collect::<Vec<_>>().join(", ")),
        serde_json::Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", emit::py_str(k), py_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `[inputs.NAME]` tables for task.toml from the chosen draws.
fn inputs_toml(draws: &[(String, draws::Draw)]) -> String {
    use ksearch_spec::{Bound, Distribution};
    let bound = |b: &Bound| match b {
        Bound::Value(v) => v.to_string(),
        Bound::Axis(a) => emit::toml_str(a),
    };
    let mut out = String::new();
    for (name, draw) in draws {
        let Some((dist, why)) = &draw.distribution else {
            continue;
        };
        out.push_str(&format!("\n[inputs.{name}]\n"));
        out.push_str(&emit::comment(why));
        out.push_str(&format!("distribution = \"{}\"\n", dist.name()));
        match dist {
            Distribution::Normal { mean, std } => out.push_str(&format!(
                "mean = {}\nstd = {}\n",
                emit::toml_float(*mean),
                emit::toml_float(*std)
            )),
            Distribution::Uniform { low, high } => out.push_str(&format!(
                "low = {}\nhigh = {}\n",
                emit::toml_float(*low),
                emit::toml_float(*high)
            )),
            Distribution::HeavyTailed { df, scale } => out.push_str(&format!(
                "df = {}\nscale = {}\n",
                emit::toml_float(*df),
                emit::toml_float(*scale)
            )),
            Distribution::Randint { low, high } | Distribution::Unique { low, high } => {
                out.push_str(&format!("low = {}\nhigh = {}\n", bound(low), bound(high)))
            }
            Distribution::Offsets { total } => out.push_str(&format!("total = {}\n", bound(total))),
        }
    }
    out
}

/// How a file should be named in messages: as given.
fn shown(path: &std::path::Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_identifiers() {
        assert_eq!(input_names(None, 1), ["x"]);
        assert_eq!(input_names(None, 2), ["x0", "x1"]);
        let given = vec!["A".to_string(), "A".to_string(), "run".to_string()];
        assert_eq!(input_names(Some(&given), 3), ["A", "A_1", "run_2"]);
        assert_eq!(input_names(Some(&given), 2), ["x0", "x1"]);
        assert_eq!(output_names(1, &["x".into()]), ["output"]);
        assert_eq!(output_names(2, &["output".into()]), ["result0", "result1"]);
        assert_eq!(
            py_literal(&serde_json::json!([1, 2.5, true, null, "s", [false]])),
            "[1, 2.5, True, None, \"s\", [False]]"
        );
    }
}
