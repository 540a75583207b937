//! What the run ran with and on: its target, its brain, the devices of its evaluations, and the
//! provenance rows of a record and the run's metadata.

use crate::model::*;
use ksearch_store::{EvaluationRow, MetaKey};
use serde_json::Value;

/// `## Target hardware: NVIDIA H200 (`h200`)` -> `NVIDIA H200 (`h200`)`.
pub(super) fn target_heading(target: &str) -> String {
    let first = target.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = first.trim_start_matches('#').trim();
    let heading = first.strip_prefix("Target hardware:").unwrap_or(first);
    heading.replace('`', "").trim().to_string()
}

pub(super) fn brain(meta: Option<Value>) -> Brain {
    let meta = meta.unwrap_or(Value::Null);
    let role = |r: &str| {
        let p = &meta[r];
        p["model"].as_str().map(|model| match p["name"].as_str() {
            Some(name) if !name.is_empty() => format!("{name}:{model}"),
            _ => model.to_string(),
        })
    };
    let limits = meta["budget"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| KeyValue {
                    key: k.clone(),
                    value: scalar(v),
                })
                .collect()
        })
        .unwrap_or_default();
    Brain {
        kind: meta["kind"].as_str().unwrap_or("unknown").to_string(),
        planner: role("planner"),
        coder: role("coder"),
        limits,
    }
}

/// The device an evaluation record says it ran on (its `evaluations` count 1): the Ray node's
/// GPU model and address (`node`) for a remote evaluation, else the GPU the harness saw, else
/// the CPU's model.
pub fn device_of(record: &Value) -> DeviceGroup {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let env = &record["provenance"]["environment"];
    let node = &record["node"];
    let model = text(&node["gpu"])
        .or_else(|| text(&env["device"]["name"]))
        .or_else(|| text(&env["cpu"]).map(|cpu| format!("CPU: {cpu}")))
        .or_else(|| text(&record["provenance"]["device"]))
        .unwrap_or_else(|| "unknown device".into());
    DeviceGroup {
        model,
        node: text(&node["ip"]).or_else(|| text(&node["node_id"])),
        driver: text(&node["driver"]).or_else(|| text(&env["device"]["driver"])),
        evaluations: 1,
        passed: usize::from(record["status"] == "passed"),
    }
}

/// Evaluations grouped by device model and node ([`device_of`]), in the order each group first
/// appears.
pub fn device_groups(evaluations: &[EvaluationRow]) -> Vec<DeviceGroup> {
    let mut out: Vec<DeviceGroup> = Vec::new();
    for e in evaluations {
        let d = DeviceGroup {
            passed: usize::from(e.status == "passed"),
            ..device_of(&e.record)
        };
        match out.iter_mut().find(|g| g.model == d.model && g.node == d.node) {
            Some(g) => {
                g.evaluations += 1;
                g.passed += d.passed;
                if g.driver.is_none() {
                    g.driver = d.driver;
                }
            }
            None => out.push(d),
        }
    }
    out
}

/// Provenance rows from an evaluation record and the run's metadata.
pub(super) fn provenance(record: Option<&Value>, meta: &dyn Fn(MetaKey) -> Option<Value>) -> Vec<KeyValue> {
    let mut out = Vec::new();
    let mut push = |key: &str, v: &Value| {
        if !v.is_null() {
            out.push(KeyValue {
                key: key.to_string(),
                value: scalar(v),
            });
        }
    };
    if let Some(r) = record {
        let p = &r["provenance"];
        push("device", &p["device"]);
        push("leased device", &r["leased_device"]);
        push("backend", &p["backend"]);
        push("evaluation seed", &p["seed"]);
        push("correctness trials", &p["trials"]);
        push("harness version", &p["harness_version"]);
        push("compile command", &r["compile"]["command"]);
        push("compiled for", &r["compile"]["arch"]);
        let mut env = Vec::new();
        flatten("", &p["environment"], &mut env);
        for (k, v) in env {
            push(&k, &v);
        }
    }
    for key in [
        MetaKey::KsearchVersion,
        MetaKey::RunSeed,
        MetaKey::Devices,
        MetaKey::Task,
    ] {
        if let Some(v) = meta(key) {
            push(&key.as_str().replace('_', " "), &v);
        }
    }
    out
}

/// Nested objects as dotted keys (`device.driver`).
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        _ if !prefix.is_empty() => out.push((prefix.to_string(), v.clone())),
        _ => {}
    }
}

/// A JSON value as one line of text: strings bare, arrays space-separated.
pub(super) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
