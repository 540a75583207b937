//! FlashInfer-Bench workloads: concrete values for the var axes and how to make each input.

use crate::definition::{Axis, Definition};
use crate::error::{parse_json, Problem, SpecError};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    pub uuid: String,
    pub axes: IndexMap<String, i64>,
    #[serde(default)]
    pub inputs: IndexMap<String, InputSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum InputSpec {
    Random,
    Scalar { value: serde_json::Value },
    Safetensors { path: String, tensor_key: String },
}

/// A line of a FlashInfer-Bench trace file: the workload sits under `workload`.
#[derive(Deserialize)]
struct TraceLine {
    definition: String,
    workload: Workload,
}

impl Workload {
    /// The value of every axis (const and var) for this workload, in the definition's order.
    pub fn all_axes(&self, def: &Definition) -> IndexMap<String, i64> {
        def.axes
            .iter()
            .filter_map(|(name, axis)| match axis {
                Axis::Const { value, .. } => Some((name.clone(), *value)),
                Axis::Var { .. } => self.axes.get(name).map(|v| (name.clone(), *v)),
            })
            .collect()
    }
}

/// Parses a workloads JSONL file and checks each line against the definition.
/// `file_exists` answers whether a safetensors path (relative to the task folder) exists.
pub fn parse_workloads(
    file: &str,
    text: &str,
    def: &Definition,
    file_exists: &dyn Fn(&str) -> bool,
) -> Result<Vec<Workload>, SpecError> {
    let mut problems = Vec::new();
    let mut workloads: Vec<Workload> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = |field: &str| {
            if field.is_empty() {
                format!("line {line_no}")
            } else {
                format!("line {line_no}: {field}")
            }
        };
        let is_trace = serde_json::from_str::<serde_json::Value>(line)
            .map(|v| v.get("workload").is_some())
            .unwrap_or(false);
        let parsed = if is_trace {
            parse_json::<TraceLine>(file, line).map(|t| {
                if t.definition != def.name {
                    problems.push(Problem::new(
                        file,
                        at("definition"),
                        format!("names definition '{}' but the task is '{}'", t.definition, def.name),
                    ));
                }
                t.workload
            })
        } else {
            parse_json::<Workload>(file, line)
        };
        let w = match parsed {
            Ok(w) => w,
            Err(e) => {
                for p in e.problems() {
                    let prefix = if is_trace && !p.field.is_empty() {
                        "workload."
                    } else {
                        ""
                    };
                    problems.push(Problem::new(
                        file,
                        at(&format!("{prefix}{}", p.field)),
                        // Each line is parsed on its own, so serde's "line 1" is this file's line.
                        p.message
                            .replacen("invalid JSON at line 1, column", "invalid JSON at column", 1),
                    ));
                }
                continue;
            }
        };
        let mut push = |field: String, message: String| problems.push(Problem::new(file, at(&field), message));
        if w.uuid.trim().is_empty() {
            push("uuid".into(), "must not be empty".into());
        } else if workloads.iter().any(|o| o.uuid == w.uuid) {
            push("uuid".into(), format!("'{}' is used by an earlier line", w.uuid));
        }
        for axis in def.var_axes() {
            match w.axes.get(axis) {
                None => push(format!("axes.{axis}"), format!("missing value for var axis '{axis}'")),
                Some(v) if *v <= 0 => push(format!("axes.{axis}"), format!("must be positive, got {v}")),
                Some(_) => {}
            }
        }
        for (axis, v) in &w.axes {
            match def.axes.get(axis) {
                None => push(format!("axes.{axis}"), format!("the definition has no axis '{axis}'")),
                Some(Axis::Const { value, .. }) if value != v => push(
                    format!("axes.{axis}"),
                    format!("is a const axis of value {value}, the workload says {v}"),
                ),
                _ => {}
            }
        }
        for (name, spec) in &w.inputs {
            let Some(tensor) = def.inputs.get(name) else {
                push(
                    format!("inputs.{name}"),
                    format!("the definition has no input '{name}'"),
                );
                continue;
            };
            match spec {
                InputSpec::Scalar { value } => {
                    if !tensor.is_scalar() {
                        push(
                            format!("inputs.{name}"),
                            "a scalar value was given for an array input".into(),
                        );
                    } else if !(value.is_number() || value.is_boolean()) {
                        push(
                            format!("inputs.{name}.value"),
                            format!("must be a number or a boolean, got {value}"),
                        );
                    }
                }
                InputSpec::Safetensors { path, .. } => {
                    if path.starts_with('/') || path.split('/').any(|c| c == "..") {
                        push(
                            format!("inputs.{name}.path"),
                            format!("'{path}' must be relative to the task folder"),
                        );
                    } else if !file_exists(path) {
                        push(
                            format!("inputs.{name}.path"),
                            format!("'{path}' does not exist in the task folder"),
                        );
                    }
                }
                InputSpec::Random => {}
            }
        }
        workloads.push(w);
    }
    if workloads.is_empty() && problems.is_empty() {
        problems.push(Problem::new(file, "", "holds no workload"));
    }
    if problems.is_empty() {
        Ok(workloads)
    } else {
        Err(SpecError::Invalid(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> Definition {
        Definition::parse(
            "d.json",
            r#"{"name": "t", "op_type": "x",
                "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
                "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}, "eps": {"shape": null, "dtype": "float32"}},
                "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}},
                "reference": "def run(x, eps):\n    return x\n"}"#,
        )
        .unwrap()
    }

    #[test]
    fn bare_and_trace_lines() {
        let text = "{\"uuid\": \"a\", \"axes\": {\"M\": 4}}\n\n{\"definition\": \"t\", \"workload\": {\"uuid\": \"b\", \"axes\": {\"M\": 2}, \"inputs\": {\"eps\": {\"type\": \"scalar\", \"value\": 1e-6}}}}\n";
        let w = parse_workloads("w.jsonl", text, &def(), &|_| false).unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[1].all_axes(&def()).into_iter().collect::<Vec<_>>(),
            [("M".to_string(), 2), ("N".to_string(), 8)]
        );
    }

    #[test]
    fn missing_axis_names_line_and_field() {
        let e = parse_workloads("w.jsonl", "{\"uuid\": \"a\", \"axes\": {}}", &def(), &|_| false).unwrap_err();
        assert_eq!(e.to_string(), "w.jsonl: line 1: axes.M: missing value for var axis 'M'");
    }

    #[test]
    fn wrong_definition_unknown_input_duplicate_uuid() {
        let text = "{\"definition\": \"other\", \"workload\": {\"uuid\": \"a\", \"axes\": {\"M\": 1}}}\n{\"uuid\": \"a\", \"axes\": {\"M\": 1}, \"inputs\": {\"z\": {\"type\": \"random\"}}}";
        let e = parse_workloads("w.jsonl", text, &def(), &|_| false).unwrap_err();
        let msgs: Vec<String> = e.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "w.jsonl: line 1: definition: names definition 'other' but the task is 't'",
                "w.jsonl: line 2: uuid: 'a' is used by an earlier line",
                "w.jsonl: line 2: inputs.z: the definition has no input 'z'",
            ]
        );
    }

    #[test]
    fn malformed_line_is_located() {
        let e = parse_workloads(
            "w.jsonl",
            "{\"uuid\": \"a\", \"axes\": {\"M\": \"four\"}}",
            &def(),
            &|_| false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("w.jsonl: line 1: axes.M: invalid type: string \"four\""),
            "{e}"
        );
    }
}
