//! An evaluation as FlashInfer-Bench traces (flashinfer_bench/data/trace.py): one `Trace` line a
//! workload, `{definition, workload, solution, evaluation}`, for `ksearch eval --fib-traces FILE`
//! (docs/task-format.md, "FlashInfer-Bench datasets and solutions").

use ksearch_eval::{Evaluation, Status};
use ksearch_spec::{InputSpec, Task};
use serde_json::{json, Value};

/// FlashInfer-Bench's status for a ksearch status, `None` where it has none (a harness error, a
/// workload never run for a reason that is not the solution's).
fn status_of(s: Status) -> Option<&'static str> {
    Some(match s {
        Status::Passed => "PASSED",
        Status::IncorrectShape => "INCORRECT_SHAPE",
        Status::IncorrectDtype => "INCORRECT_DTYPE",
        Status::IncorrectNumerical => "INCORRECT_NUMERICAL",
        Status::RuntimeError => "RUNTIME_ERROR",
        // Refused by ksearch's static checks before compiling: it was never built.
        Status::CompileError | Status::Rejected => "COMPILE_ERROR",
        Status::Timeout => "TIMEOUT",
        Status::HarnessError | Status::NotRun => return None,
    })
}

/// The traces of `evaluation` (of `solution` on `task`), and how many workloads had no
/// FlashInfer-Bench status and were left out. `now` is UNIX seconds, for `timestamp`.
pub(crate) fn traces(task: &Task, solution: &str, evaluation: &Evaluation, now: i64) -> (Vec<Value>, usize) {
    let env = &evaluation.provenance.environment;
    let hardware = if evaluation.provenance.device == "cpu" || evaluation.provenance.device.ends_with(":cpu") {
        "cpu".to_string()
    } else {
        env["device"]["name"]
            .as_str()
            .filter(|n| !n.trim().is_empty())
            .map(|n| n.trim().replace(' ', "_"))
            .unwrap_or_else(|| evaluation.provenance.device.clone())
    };
    let mut libs = serde_json::Map::new();
    for key in ["python", "numpy", "torch", "triton", "compiler"] {
        let value = env.get(key).or_else(|| env["device"].get(key));
        if let Some(v) = value.and_then(Value::as_str).filter(|v| !v.is_empty()) {
            libs.insert(key.into(), json!(v));
        }
    }
    libs.insert("ksearch".into(), json!(env!("CARGO_PKG_VERSION")));
    let timestamp = chrono::DateTime::from_timestamp(now, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into());
    let mut out = Vec::new();
    let mut left_out = 0;
    for w in &evaluation.workloads {
        // A workload not run because the whole evaluation failed takes the evaluation's status
        // (FlashInfer-Bench writes a compile error on every workload).
        let status = match w.status {
            Status::NotRun => status_of(evaluation.status).filter(|s| *s != "PASSED"),
            s => status_of(s),
        };
        let (Some(status), Some(workload)) = (status, task.workloads.iter().find(|t| t.uuid == w.uuid)) else {
            left_out += 1;
            continue;
        };
        let mut evaluation_json = json!({
            "status": status,
            "environment": {"hardware": hardware, "libs": libs},
            "timestamp": timestamp,
            "log": w.reason.clone().or_else(|| evaluation.reason.clone()).unwrap_or_default(),
        });
        if status == "PASSED" || status == "INCORRECT_NUMERICAL" {
            let c = w.correctness.as_ref();
            evaluation_json["correctness"] = json!({
                "max_relative_error": c.and_then(|c| c.max_rel_error).unwrap_or(0.0),
                "max_absolute_error": c.and_then(|c| c.max_abs_error).unwrap_or(0.0),
            });
        }
        if status == "PASSED" {
            let Some(t) = &w.timing else {
                left_out += 1; // FlashInfer-Bench requires the performance of a pass
                continue;
            };
            evaluation_json["performance"] = json!({
                "latency_ms": t.candidate.median_ns / 1e6,
                "reference_latency_ms": t.reference.median_ns / 1e6,
                "speedup_factor": t.speedup,
            });
        }
        out.push(json!({
            "definition": task.definition.name,
            "workload": workload_as_written(workload),
            "solution": solution,
            "evaluation": evaluation_json,
        }));
    }
    (out, left_out)
}

/// The workload as its file gives it: an input ksearch synthesised for an absent blob is
/// written back as the blob it stands for.
fn workload_as_written(w: &ksearch_spec::Workload) -> Value {
    let mut inputs = serde_json::Map::new();
    for (name, spec) in &w.inputs {
        let spec = match w.synthesized.iter().find(|s| &s.input == name) {
            Some(s) => InputSpec::Safetensors {
                path: s.path.clone(),
                tensor_key: s.tensor_key.clone(),
            },
            None => spec.clone(),
        };
        inputs.insert(name.clone(), serde_json::to_value(&spec).unwrap_or(Value::Null));
    }
    json!({"uuid": w.uuid, "axes": w.axes, "inputs": inputs})
}
