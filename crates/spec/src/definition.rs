//! FlashInfer-Bench's Definition: the computation, its axes, inputs, outputs and reference.

use crate::dtype::DType;
use crate::error::{parse_json, Problems, SpecError};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// A task's `definition.json`: the computation to implement, as FlashInfer-Bench describes it.
/// Only [`Definition::parse`] validates; a value built by hand is not checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Definition {
    /// The definition's name: letters, digits, `_`, `-` or `.`, never empty.
    pub name: String,
    /// Newer FlashInfer-Bench files say `op_type`, older ones `type`.
    #[serde(alias = "type")]
    /// The kind of operation (`softmax`, `gemm`, ...); free text, never empty.
    pub op_type: String,
    /// What the operation computes, for people and prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// FlashInfer-Bench's free-form labels, kept as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The named dimensions tensor shapes are written in, in file order; at least one.
    pub axes: IndexMap<String, Axis>,
    /// Python expressions over axes and inputs that valid workloads satisfy
    /// (`num_kv_indices == kv_indptr[-1].item()`); kept for the planner and read by the rules
    /// that synthesise absent inputs (docs/task-format.md), never evaluated here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
    /// The kernel's inputs in call order; at least one.
    pub inputs: IndexMap<String, TensorSpec>,
    /// The kernel's outputs in return order; at least one, always arrays (a 0-d one has shape
    /// `[]`), never sharing a name with an input.
    pub outputs: IndexMap<String, TensorSpec>,
    /// Python source defining a top-level `run(...)` that takes the inputs by name and returns
    /// the outputs: the ground truth candidates are checked against.
    pub reference: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
/// One named dimension of a definition (`{"type": "const", "value": N}` or `{"type": "var"}`).
pub enum Axis {
    /// A size fixed by the definition, the same in every workload.
    Const {
        /// The size; positive.
        value: i64,
        /// What the axis stands for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// A size each workload gives (its `axes` must name every var axis).
    Var {
        /// What the axis stands for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// FlashInfer-Bench's `parent` field, kept as given; validation only checks that it names
        /// a declared axis.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
    },
}

/// The type and shape of one input or output of a [`Definition`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TensorSpec {
    /// Axis names, outermost first; `None` or empty for a scalar.
    pub shape: Option<Vec<String>>,
    /// The element type.
    pub dtype: DType,
    /// What the tensor holds, for people and prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl TensorSpec {
    /// Whether this is a scalar: `shape` is `null` or `[]`. Note that an output with `shape: []`
    /// counts as scalar here although the definition treats it as a 0-d array.
    pub fn is_scalar(&self) -> bool {
        self.shape.as_ref().is_none_or(|s| s.is_empty())
    }

    /// The axis names of the shape, outermost first; empty for a scalar.
    pub fn dims(&self) -> &[String] {
        self.shape.as_deref().unwrap_or(&[])
    }
}

impl Definition {
    /// Parses and validates a definition; `file` names it in error messages.
    pub fn parse(file: &str, text: &str) -> Result<Definition, SpecError> {
        let def: Definition = parse_json(file, text)?;
        def.validate(file)?;
        Ok(def)
    }

    /// The names of the var axes, in declaration order.
    pub fn var_axes(&self) -> impl Iterator<Item = &str> {
        self.axes
            .iter()
            .filter(|(_, a)| matches!(a, Axis::Var { .. }))
            .map(|(n, _)| n.as_str())
    }

    /// The value of axis `name` if it is a const axis; `None` for a var or undeclared axis.
    pub fn const_axis(&self, name: &str) -> Option<i64> {
        match self.axes.get(name) {
            Some(Axis::Const { value, .. }) => Some(*value),
            _ => None,
        }
    }

    /// Every dtype an input or output uses.
    pub fn dtypes(&self) -> Vec<DType> {
        let mut out: Vec<DType> = Vec::new();
        for spec in self.inputs.values().chain(self.outputs.values()) {
            if !out.contains(&spec.dtype) {
                out.push(spec.dtype);
            }
        }
        out
    }

    fn validate(&self, file: &str) -> Result<(), SpecError> {
        let mut p = Problems::new(file);
        if self.name.trim().is_empty() {
            p.push("name", "must not be empty");
        } else if !is_identifier_like(&self.name) {
            p.push(
                "name",
                format!("'{}' must be letters, digits, '_', '-' or '.'", self.name),
            );
        }
        if self.op_type.trim().is_empty() {
            p.push("op_type", "must not be empty");
        }
        if self.axes.is_empty() {
            p.push("axes", "must declare at least one axis");
        }
        for (name, axis) in &self.axes {
            if !is_c_identifier(name) {
                p.push(
                    format!("axes.{name}"),
                    "axis names must be identifiers (letters, digits, '_')",
                );
            }
            if let Axis::Const { value, .. } = axis {
                if *value <= 0 {
                    p.push(format!("axes.{name}.value"), format!("must be positive, got {value}"));
                }
            }
            if let Axis::Var {
                parent: Some(parent), ..
            } = axis
            {
                if !self.axes.contains_key(parent) {
                    p.push(
                        format!("axes.{name}.parent"),
                        format!("names undeclared axis '{parent}'"),
                    );
                }
            }
        }
        if self.inputs.is_empty() {
            p.push("inputs", "must declare at least one input");
        }
        if self.outputs.is_empty() {
            p.push("outputs", "must declare at least one output");
        }
        for (kind, tensors) in [("inputs", &self.inputs), ("outputs", &self.outputs)] {
            for (name, spec) in tensors {
                if !is_c_identifier(name) {
                    p.push(
                        format!("{kind}.{name}"),
                        "tensor names must be identifiers (letters, digits, '_')",
                    );
                }
                for axis in spec.dims() {
                    if !self.axes.contains_key(axis) {
                        p.push(format!("{kind}.{name}.shape"), format!("uses undeclared axis '{axis}'"));
                    }
                }
            }
        }
        for name in self.outputs.keys() {
            if self.inputs.contains_key(name) {
                p.push(
                    format!("outputs.{name}"),
                    "an output may not share its name with an input",
                );
            }
            // `shape: []` is a 0-d array (a loss, a sum): a kernel writes or returns one
            // element. `shape: null` is a scalar, which only inputs can be.
            if self.outputs[name].shape.is_none() {
                p.push(
                    format!("outputs.{name}.shape"),
                    "outputs must be arrays, not scalars (`\"shape\": []` declares a 0-d array)",
                );
            }
        }
        if !has_top_level_run(&self.reference) {
            p.push("reference", "must define a top-level function `def run(...)`");
        }
        for (i, c) in self.constraints.iter().enumerate() {
            if c.trim().is_empty() {
                p.push(format!("constraints[{i}]"), "must not be empty");
            }
        }
        p.into_result()
    }
}

fn has_top_level_run(source: &str) -> bool {
    source.lines().any(|l| {
        let l = l.strip_prefix("def ").unwrap_or("");
        l.trim_start().starts_with("run") && l.trim_start()[3..].trim_start().starts_with('(')
    })
}

pub(crate) fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_identifier_like(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
        "name": "t", "op_type": "softmax",
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
        "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}, "s": {"shape": null, "dtype": "float32"}},
        "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}},
        "reference": "import numpy as np\ndef run(x, s):\n    return x\n"
    }"#;

    #[test]
    fn parses_and_keeps_order() {
        let d = Definition::parse("d.json", GOOD).unwrap();
        assert_eq!(d.inputs.keys().collect::<Vec<_>>(), ["x", "s"]);
        assert!(d.inputs["s"].is_scalar());
        assert_eq!(d.var_axes().collect::<Vec<_>>(), ["M"]);
        assert_eq!(d.const_axis("N"), Some(8));
    }

    #[test]
    fn old_type_field_is_accepted() {
        let text = GOOD.replace("\"op_type\"", "\"type\"");
        assert_eq!(Definition::parse("d.json", &text).unwrap().op_type, "softmax");
    }

    #[test]
    fn bad_dtype_names_the_field() {
        let text = GOOD.replace("\"dtype\": \"float32\"}, \"s\"", "\"dtype\": \"float33\"}, \"s\"");
        let e = Definition::parse("d.json", &text).unwrap_err().to_string();
        assert!(
            e.starts_with("d.json: inputs.x.dtype: unknown variant `float33`"),
            "{e}"
        );
    }

    #[test]
    fn undeclared_axis_and_missing_run_are_both_reported() {
        let text = GOOD
            .replace(
                "[\"M\", \"N\"], \"dtype\": \"float32\"}, \"s\"",
                "[\"M\", \"Q\"], \"dtype\": \"float32\"}, \"s\"",
            )
            .replace("def run(", "def go(");
        let e = Definition::parse("d.json", &text).unwrap_err();
        let msgs: Vec<String> = e.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "d.json: inputs.x.shape: uses undeclared axis 'Q'",
                "d.json: reference: must define a top-level function `def run(...)`"
            ]
        );
    }

    #[test]
    fn syntax_error_reports_position() {
        let e = Definition::parse("d.json", "{\"name\": ").unwrap_err().to_string();
        assert!(e.starts_with("d.json: invalid JSON at line 1, column 9"), "{e}");
    }
}
