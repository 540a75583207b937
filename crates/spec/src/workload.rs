//! FlashInfer-Bench workloads: concrete values for the var axes and how to make each input.
//!
//! An input whose safetensors blob is absent from the task folder (FlashInfer-Bench keeps blobs
//! in a separate dataset) is synthesised instead: from the structure the definition's
//! constraints imply (`structure.rs`: segment offsets, distinct indices), else at random, with
//! a warning that names the workload, the input and the missing file.

use crate::definition::{Axis, Definition};
use crate::error::{parse_json, Problem, SpecError};
use crate::task_config::Distribution;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Mutex;

#[path = "structure.rs"]
mod structure;

/// One workload: a concrete problem size and how to make each input for it. Validated against
/// the definition by [`parse_workloads`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    /// Identifies the workload in results and messages; not empty, unique within its file.
    pub uuid: String,
    /// The value of every var axis of the definition and of nothing else (const axes come
    /// from the definition: [`Workload::all_axes`]).
    pub axes: IndexMap<String, i64>,
    /// How to make inputs, keyed by input name; an input left out is [`InputSpec::Random`].
    #[serde(default)]
    pub inputs: IndexMap<String, InputSpec>,
    /// Inputs whose safetensors blob was absent and that ksearch synthesises instead (their
    /// `inputs` entry has already been replaced). Not part of the file format.
    #[serde(skip)]
    pub synthesized: Vec<Synthesized>,
}

/// How one input of a workload is made.
#[derive(Debug, Clone, PartialEq)]
pub enum InputSpec {
    /// `{"type": "random"}`: the task's distribution for the input (task.toml `[inputs]`), else
    /// the trial's.
    Random,
    /// `{"type": "random", "distribution": "offsets", "total": "n"}`: ksearch's extension of a
    /// random input with its own distribution (the fields of a task.toml `[inputs.NAME]`), used
    /// unless task.toml's `[inputs.NAME]` sets one.
    Distributed(Distribution),
    /// `{"type": "scalar", "value": V}`.
    Scalar {
        /// The value, as the JSON gives it.
        value: serde_json::Value,
    },
    /// `{"type": "safetensors", "path": ..., "tensor_key": ...}`, relative to the task folder.
    Safetensors {
        /// The `.safetensors` file, relative to the task folder.
        path: String,
        /// The tensor's key inside that file.
        tensor_key: String,
    },
}

/// An input made by ksearch because its safetensors file is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct Synthesized {
    /// The input's name.
    pub input: String,
    /// The missing file, as the workload names it.
    pub path: String,
    /// The tensor's key in the missing file.
    pub tensor_key: String,
    /// What is drawn instead, and the rule that chose it.
    pub how: String,
}

impl Serialize for InputSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut map = serde_json::Map::new();
        match self {
            InputSpec::Random => {
                map.insert("type".into(), "random".into());
            }
            InputSpec::Distributed(d) => {
                map.insert("type".into(), "random".into());
                match serde_json::to_value(d).map_err(S::Error::custom)? {
                    serde_json::Value::Object(fields) => map.extend(fields),
                    other => return Err(S::Error::custom(format!("distribution serialised as {other}"))),
                }
            }
            InputSpec::Scalar { value } => {
                map.insert("type".into(), "scalar".into());
                map.insert("value".into(), value.clone());
            }
            InputSpec::Safetensors { path, tensor_key } => {
                map.insert("type".into(), "safetensors".into());
                map.insert("path".into(), path.clone().into());
                map.insert("tensor_key".into(), tensor_key.clone().into());
            }
        }
        map.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for InputSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        struct Scalar {
            value: serde_json::Value,
        }
        #[derive(Deserialize)]
        struct File {
            path: String,
            tensor_key: String,
        }
        let mut map = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let kind = match map.remove("type") {
            Some(serde_json::Value::String(s)) => s,
            Some(other) => return Err(D::Error::custom(format!("`type` must be a string, got {other}"))),
            None => return Err(D::Error::missing_field("type")),
        };
        let rest = serde_json::Value::Object(map);
        match kind.as_str() {
            // Fields other than `distribution` on a plain random input are ignored, as before.
            "random" if rest.get("distribution").is_none() => Ok(InputSpec::Random),
            "random" => serde_json::from_value(rest)
                .map(InputSpec::Distributed)
                .map_err(D::Error::custom),
            "scalar" => serde_json::from_value::<Scalar>(rest)
                .map(|s| InputSpec::Scalar { value: s.value })
                .map_err(D::Error::custom),
            "safetensors" => serde_json::from_value::<File>(rest)
                .map(|f| InputSpec::Safetensors {
                    path: f.path,
                    tensor_key: f.tensor_key,
                })
                .map_err(D::Error::custom),
            other => Err(D::Error::unknown_variant(other, &["random", "scalar", "safetensors"])),
        }
    }
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

    /// The warning about synthesised inputs of `workloads` read from `file`: one line per
    /// workload and input (the first `SHOWN`), naming the missing file and what is drawn
    /// instead. `None` when every blob was there.
    pub fn synthesis_report(file: &str, workloads: &[Workload]) -> Option<String> {
        const SHOWN: usize = 8;
        let all: Vec<(&Workload, &Synthesized)> = workloads
            .iter()
            .flat_map(|w| w.synthesized.iter().map(move |s| (w, s)))
            .collect();
        if all.is_empty() {
            return None;
        }
        let affected = workloads.iter().filter(|w| !w.synthesized.is_empty()).count();
        let mut text = format!(
            "warning: {file}: {} safetensors input(s) of {affected} workload(s) are absent from the task folder; \
             ksearch synthesises them instead (docs/task-format.md, \"Absent safetensors blobs\"):",
            all.len()
        );
        for (w, s) in all.iter().take(SHOWN) {
            text.push_str(&format!(
                "\n  workload {}: input '{}' ({}:{}): {}",
                w.uuid, s.input, s.path, s.tensor_key, s.how
            ));
        }
        if all.len() > SHOWN {
            text.push_str(&format!("\n  ... and {} more", all.len() - SHOWN));
        }
        Some(text)
    }
}

/// Prints the synthesis warning for `file` once per process (a task is often loaded twice).
fn warn_once(file: &str, workloads: &[Workload]) {
    static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let Some(text) = Workload::synthesis_report(file, workloads) else {
        return;
    };
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.get_or_insert_with(HashSet::new).insert(file.to_string()) {
        eprintln!("{text}");
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
        let mut w = w;
        let axes = w.all_axes(def);
        let mut synthesized = Vec::new();
        for (name, spec) in w.inputs.iter_mut() {
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
                InputSpec::Safetensors { path, tensor_key } => {
                    if path.starts_with('/') || path.split('/').any(|c| c == "..") {
                        push(
                            format!("inputs.{name}.path"),
                            format!("'{path}' must be relative to the task folder"),
                        );
                    } else if !file_exists(path) {
                        let (replacement, how) = structure::synthesise(def, name, &axes);
                        synthesized.push(Synthesized {
                            input: name.clone(),
                            path: path.clone(),
                            tensor_key: tensor_key.clone(),
                            how,
                        });
                        *spec = replacement;
                    }
                }
                InputSpec::Distributed(d) => d.check(name, def, &format!("inputs.{name}"), &mut push),
                InputSpec::Random => {}
            }
        }
        w.synthesized = synthesized;
        workloads.push(w);
    }
    if workloads.is_empty() && problems.is_empty() {
        problems.push(Problem::new(file, "", "holds no workload"));
    }
    if problems.is_empty() {
        warn_once(file, &workloads);
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

    fn paged_task() -> Definition {
        Definition::parse(
            "d.json",
            r#"{"name": "gqa", "op_type": "gqa_paged",
                "axes": {"batch_size": {"type": "var"}, "num_pages": {"type": "var"}, "len_indptr": {"type": "var"},
                         "num_kv_indices": {"type": "var"}, "head_dim": {"type": "const", "value": 8}},
                "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
                "inputs": {"q": {"shape": ["batch_size", "head_dim"], "dtype": "float32"},
                           "k_cache": {"shape": ["num_pages", "head_dim"], "dtype": "float32"},
                           "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
                           "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"}},
                "outputs": {"o": {"shape": ["batch_size", "head_dim"], "dtype": "float32"}},
                "reference": "def run(q, k_cache, kv_indptr, kv_indices):\n    return q\n"}"#,
        )
        .unwrap()
    }

    #[test]
    fn absent_blobs_are_synthesised_and_reported() {
        let blob =
            |key: &str| format!(r#"{{"type": "safetensors", "path": "./blob/w1.safetensors", "tensor_key": "{key}"}}"#);
        let text = format!(
            r#"{{"uuid": "w1", "axes": {{"batch_size": 2, "num_pages": 10, "len_indptr": 3, "num_kv_indices": 7}}, "inputs": {{"kv_indptr": {}, "kv_indices": {}, "q": {}}}}}"#,
            blob("kv_indptr"),
            blob("kv_indices"),
            blob("q")
        );
        let w = parse_workloads("w.jsonl", &text, &paged_task(), &|_| false).unwrap();
        use crate::task_config::Bound;
        assert_eq!(
            w[0].inputs["kv_indptr"],
            InputSpec::Distributed(Distribution::Offsets {
                total: Bound::Axis("num_kv_indices".into())
            })
        );
        assert_eq!(
            w[0].inputs["kv_indices"],
            InputSpec::Distributed(Distribution::Unique {
                low: Bound::Value(0),
                high: Bound::Axis("num_pages".into())
            })
        );
        assert_eq!(w[0].inputs["q"], InputSpec::Random);
        let names: Vec<&str> = w[0].synthesized.iter().map(|s| s.input.as_str()).collect();
        assert_eq!(names, ["kv_indptr", "kv_indices", "q"]);
        let report = Workload::synthesis_report("w.jsonl", &w).unwrap();
        assert!(
            report.starts_with("warning: w.jsonl: 3 safetensors input(s) of 1 workload(s) are absent"),
            "{report}"
        );
        assert!(
            report.contains(
                "workload w1: input 'kv_indptr' (./blob/w1.safetensors:kv_indptr): offsets from 0 to num_kv_indices"
            ),
            "{report}"
        );
        // What the harness receives: a random input with its own distribution.
        assert_eq!(
            serde_json::to_value(&w[0].inputs["kv_indices"]).unwrap(),
            serde_json::json!({"type": "random", "distribution": "unique", "low": 0, "high": "num_pages"})
        );
        // Present blobs are left alone and nothing is reported.
        let w = parse_workloads("w.jsonl", &text, &paged_task(), &|_| true).unwrap();
        assert!(matches!(w[0].inputs["kv_indptr"], InputSpec::Safetensors { .. }));
        assert_eq!(Workload::synthesis_report("w.jsonl", &w), None);
    }

    #[test]
    fn random_inputs_with_a_distribution_round_trip_and_are_checked() {
        let text = r#"{"uuid": "a", "axes": {"batch_size": 1, "num_pages": 4, "len_indptr": 2, "num_kv_indices": 3}, "inputs": {"kv_indptr": {"type": "random", "distribution": "offsets", "total": "num_kv_indices"}, "q": {"type": "random", "note": "ignored"}}}"#;
        let w = parse_workloads("w.jsonl", text, &paged_task(), &|_| false).unwrap();
        let back: IndexMap<String, InputSpec> =
            serde_json::from_value(serde_json::to_value(&w[0].inputs).unwrap()).unwrap();
        assert_eq!(back, w[0].inputs);
        assert_eq!(w[0].inputs["q"], InputSpec::Random);
        let bad = r#"{"uuid": "a", "axes": {"batch_size": 1, "num_pages": 4, "len_indptr": 2, "num_kv_indices": 3}, "inputs": {"q": {"type": "random", "distribution": "offsets", "total": "nope"}}}"#;
        let msgs: Vec<String> = parse_workloads("w.jsonl", bad, &paged_task(), &|_| false)
            .unwrap_err()
            .problems()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(
            msgs,
            [
                "w.jsonl: line 1: inputs.q: offsets needs an integer input, 'q' is float32",
                "w.jsonl: line 1: inputs.q: offsets needs a 1-D input, 'q' has 2 dimensions",
                "w.jsonl: line 1: inputs.q: bound names undeclared axis 'nope'",
            ]
        );
        let unknown = r#"{"uuid": "a", "axes": {"batch_size": 1, "num_pages": 4, "len_indptr": 2, "num_kv_indices": 3}, "inputs": {"q": {"type": "random", "distribution": "zipf"}}}"#;
        let e = parse_workloads("w.jsonl", unknown, &paged_task(), &|_| false)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("w.jsonl: line 1: inputs.q: unknown variant `zipf`"),
            "{e}"
        );
    }
}
