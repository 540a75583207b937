//! Builds a [`RunReport`] from a run directory: the event log is replayed (it is the truth, as
//! for `ksearch show`), and the store's other tables add what events do not carry (LLM usage,
//! whole evaluation records with provenance, who wrote each candidate).
//!
//! A run may be writing while we read (the dashboard): events are read first, and the driver
//! writes every row before the event that announces it, so each event read has its rows.

use crate::diff::diff_against_seed;
use crate::error::ReportError;
use crate::model::*;
use ksearch_search::engine::{kernel_name, resource_brief, Engine, Event, KernelResources, Request};
use ksearch_store::{EvaluationRow, ExchangeRow, RunStore};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// Reads a run directory into a report model.
pub fn load(run_dir: &Path) -> Result<RunReport, ReportError> {
    let store = RunStore::open(run_dir)?;
    let rows = store.events()?;
    let exchanges = store.exchanges()?;
    let candidate_rows = store.candidates()?;
    let evaluations = store.evaluations()?;
    let path = store.path().to_path_buf();

    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let event: Event = serde_json::from_value(row.body.clone()).map_err(|e| ReportError::Event {
            path: path.clone(),
            seq: row.seq,
            kind: row.kind.clone(),
            message: e.to_string(),
        })?;
        events.push(event);
    }
    let (engine, failed_code) = replay(&events).map_err(|message| ReportError::Replay {
        path: path.clone(),
        message,
    })?;

    let origins: HashMap<i64, String> = candidate_rows.iter().map(|c| (c.id, c.origin.clone())).collect();
    let attempts = attempts(&engine, &origins, failed_code);
    let times: Vec<f64> = rows.iter().filter_map(|r| r.at.parse::<f64>().ok()).collect();
    let wall_seconds = match (times.first(), times.last()) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    };

    let (state, best_id) = match engine.pending() {
        Some(Request::Finished { best_candidate, reason }) => (
            RunState {
                finished: true,
                text: format!("finished: {reason}"),
            },
            *best_candidate,
        ),
        Some(r) => (
            RunState {
                finished: false,
                text: format!("in progress, waiting on the {}", r.role()),
            },
            engine.best().map(|b| b.id),
        ),
        None => (
            RunState {
                finished: false,
                text: "not started".into(),
            },
            None,
        ),
    };
    let best = best_id.and_then(|id| best_kernel(&engine, id, &evaluations, &origins));
    let record = best_id
        .and_then(|id| latest_record(&evaluations, id))
        .or_else(|| evaluations.last().map(|e| &e.record));
    let meta = |key: &str| store.meta(key).ok().flatten();
    let provenance = provenance(record, &meta);
    let device_kind = match record.and_then(|r| r["provenance"]["device"].as_str()) {
        Some(d) if d.starts_with("cuda") || d.starts_with("gpu") => "GPU",
        Some(d) if d.starts_with("mps") || d.starts_with("metal") => "GPU",
        _ => "CPU",
    };

    let task = engine.task();
    let name = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run_dir.display().to_string());
    Ok(RunReport {
        run_dir: run_dir.display().to_string(),
        name,
        task: task.map(|t| t.name.clone()).unwrap_or_default(),
        target: task.map(|t| target_heading(&t.target)).unwrap_or_default(),
        strategy: engine.config().strategy.as_str().to_string(),
        brain: brain(meta("brain")),
        state,
        round: engine.round(),
        rounds: engine.config().rounds,
        cycles: engine.cycle_count(),
        events: rows.len(),
        budget: budget(&exchanges, &evaluations, device_kind, wall_seconds),
        models: model_usage(&exchanges),
        attempts,
        best,
        tree: tree(&engine, best_id),
        provenance,
    })
}

/// A coder answer that produced no candidate: where it happened and why.
struct FailedCode {
    /// Index in the candidate list at that moment: the attempt goes before that candidate.
    before: usize,
    round: u32,
    node_id: String,
    status: &'static str,
    reason: String,
}

/// Replays the log, noting the coder answers that produced no candidate (no usable code, or
/// the call failed): they cost a round, so they are attempts too.
fn replay(events: &[Event]) -> Result<(Engine, Vec<FailedCode>), String> {
    let mut engine = Engine::new();
    let mut failed = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let code = match event {
            Event::CoderAnswered { request_id, .. } | Event::RequestFailed { request_id, .. } => {
                match engine.outstanding(request_id) {
                    Some(Request::Code { node_id, .. }) => {
                        Some((node_id.clone(), engine.round_of(request_id).unwrap_or(0)))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let before = engine.candidates().len();
        engine
            .apply(event)
            .map_err(|e| format!("event {} ({}): {e}", i + 1, event.kind()))?;
        if let Some((node_id, round)) = code {
            if engine.candidates().len() == before {
                let (status, reason) = match event {
                    Event::RequestFailed { error, .. } => ("llm_error", error.clone()),
                    _ => ("format_error", "the answer had no usable code".to_string()),
                };
                failed.push(FailedCode {
                    before,
                    round,
                    node_id,
                    status,
                    reason,
                });
            }
        }
    }
    Ok((engine, failed))
}

fn attempts(engine: &Engine, origins: &HashMap<i64, String>, failed: Vec<FailedCode>) -> Vec<Attempt> {
    let mut failed = failed.into_iter().peekable();
    let mut out = Vec::new();
    let mut push_failed_before = |index: usize, out: &mut Vec<Attempt>| {
        while let Some(f) = failed.next_if(|f| f.before <= index) {
            out.push(Attempt {
                candidate: None,
                parent: None,
                node_id: Some(f.node_id),
                round: f.round,
                cycle: 0,
                origin: "none".into(),
                status: Some(f.status.to_string()),
                reason: Some(f.reason),
                speedup: None,
                relative_noise: None,
                final_speedup: None,
                final_status: None,
                note: None,
                resources: String::new(),
            });
        }
    };
    for (i, c) in engine.candidates().iter().enumerate() {
        push_failed_before(i, &mut out);
        let result = c.result.as_ref();
        out.push(Attempt {
            candidate: Some(c.id),
            parent: c.parent,
            node_id: Some(c.node_id.clone()),
            round: c.round,
            cycle: c.cycle,
            origin: origins.get(&c.id).cloned().unwrap_or_else(|| "coder".into()),
            status: result.map(|r| r.status.clone()),
            reason: result.and_then(|r| r.reason.clone()),
            speedup: c.speedup(),
            relative_noise: result.and_then(|r| r.relative_noise),
            final_speedup: c.final_result.as_ref().filter(|r| r.passed()).and_then(|r| r.speedup),
            final_status: c.final_result.as_ref().map(|r| r.status.clone()),
            note: c.note.clone(),
            resources: result.map(|r| resource_brief(&r.resources)).unwrap_or_default(),
        });
    }
    push_failed_before(usize::MAX, &mut out);
    out
}

/// `## Target hardware: NVIDIA H200 (`h200`)` -> `NVIDIA H200 (`h200`)`.
fn target_heading(target: &str) -> String {
    let first = target.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = first.trim_start_matches('#').trim();
    let heading = first.strip_prefix("Target hardware:").unwrap_or(first);
    heading.replace('`', "").trim().to_string()
}

fn brain(meta: Option<Value>) -> Brain {
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

/// The tuner's and an agent's answers are recorded like exchanges but are not LLM calls.
fn is_llm(x: &ExchangeRow) -> bool {
    x.provider != "tuner" && x.provider != "agent"
}

fn budget(exchanges: &[ExchangeRow], evaluations: &[EvaluationRow], device_kind: &str, wall_seconds: f64) -> Budget {
    let llm: Vec<&ExchangeRow> = exchanges.iter().filter(|x| is_llm(x)).collect();
    let calls = llm.iter().filter(|x| x.answer.is_some()).count();
    Budget {
        llm_calls: calls,
        failed_llm_calls: llm.len() - calls,
        input_tokens: llm.iter().map(|x| x.input_tokens).sum(),
        output_tokens: llm.iter().map(|x| x.output_tokens).sum(),
        // + 0.0: an empty sum of floats is -0.0.
        dollars: llm.iter().filter_map(|x| x.cost_dollars).sum::<f64>() + 0.0,
        unpriced_calls: llm
            .iter()
            .filter(|x| x.answer.is_some() && x.cost_dollars.is_none())
            .count(),
        evaluations: evaluations.len(),
        device_seconds: evaluations
            .iter()
            .filter_map(|e| e.record["wall_seconds"].as_f64())
            .sum(),
        device_kind: device_kind.to_string(),
        wall_seconds,
    }
}

fn model_usage(exchanges: &[ExchangeRow]) -> Vec<ModelUsage> {
    let mut out: Vec<ModelUsage> = Vec::new();
    for x in exchanges.iter().filter(|x| is_llm(x)) {
        let i = match out
            .iter()
            .position(|u| u.role == x.role && u.provider == x.provider && u.model == x.model)
        {
            Some(i) => i,
            None => {
                out.push(ModelUsage {
                    role: x.role.clone(),
                    provider: x.provider.clone(),
                    model: x.model.clone(),
                    calls: 0,
                    failed: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    dollars: 0.0,
                    latency_s: 0.0,
                });
                out.len() - 1
            }
        };
        let u = &mut out[i];
        if x.answer.is_some() {
            u.calls += 1;
        } else {
            u.failed += 1;
        }
        u.input_tokens += x.input_tokens;
        u.output_tokens += x.output_tokens;
        u.dollars += x.cost_dollars.unwrap_or(0.0);
        u.latency_s += x.latency_s;
    }
    out
}

/// The candidate's latest evaluation record: the final re-measurement if there is one.
fn latest_record(evaluations: &[EvaluationRow], candidate: i64) -> Option<&Value> {
    let of = |purpose: &str| {
        evaluations
            .iter()
            .rev()
            .find(|e| e.candidate_id == candidate && e.purpose == purpose)
            .map(|e| &e.record)
    };
    of("final").or_else(|| of("search"))
}

fn best_kernel(
    engine: &Engine,
    id: i64,
    evaluations: &[EvaluationRow],
    origins: &HashMap<i64, String>,
) -> Option<BestKernel> {
    let c = engine.candidate(id)?;
    let summary = c.final_result.as_ref().or(c.result.as_ref());
    let measured = if c.final_result.is_some() { "final" } else { "search" };
    let speedup = summary.filter(|s| s.passed()).and_then(|s| s.speedup);
    let seed_sources = engine.task().and_then(|t| t.seed.clone()).unwrap_or_default();
    // The seed's speedup, measured the same way as the best's where possible.
    let seed = engine
        .candidates()
        .iter()
        .find(|s| origins.get(&s.id).map(String::as_str) == Some("seed") || (s.round == 0 && s.cycle == 0));
    let seed_speedup = seed.and_then(|s| {
        let r = if measured == "final" {
            s.final_result.as_ref().or(s.result.as_ref())
        } else {
            s.result.as_ref()
        };
        r.filter(|r| r.passed()).and_then(|r| r.speedup)
    });
    let files = c
        .sources
        .iter()
        .map(|s| {
            let (diff, versus_seed) = diff_against_seed(&s.path, &s.content, &seed_sources);
            SourceFile {
                path: s.path.clone(),
                content: s.content.clone(),
                diff,
                versus_seed,
            }
        })
        .collect();
    let record = latest_record(evaluations, id);
    let workloads = record
        .and_then(|r| r["workloads"].as_array())
        .map(|ws| ws.iter().map(workload_row).collect())
        .unwrap_or_default();
    // The record's report, else the summary's (the same figures, also in the event log).
    let resources = record
        .and_then(|r| serde_json::from_value::<Vec<KernelResources>>(r["compile"]["resources"].clone()).ok())
        .filter(|k| !k.is_empty())
        .or_else(|| summary.map(|s| s.resources.clone()))
        .unwrap_or_default();
    Some(BestKernel {
        candidate: id,
        node_id: c.node_id.clone(),
        round: c.round,
        speedup,
        over_seed: match (speedup, seed_speedup) {
            (Some(b), Some(s)) if s > 0.0 => Some(b / s),
            _ => None,
        },
        measured: measured.into(),
        files,
        has_seed: !seed_sources.is_empty(),
        workloads,
        kernels: resources.iter().map(kernel_row).collect(),
    })
}

fn kernel_row(k: &KernelResources) -> KernelRow {
    KernelRow {
        short_name: kernel_name(&k.name),
        resources: k.clone(),
    }
}

fn workload_row(w: &Value) -> WorkloadRow {
    let t = &w["timing"];
    let axes = w["axes"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}={}", scalar(v)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let median = t["candidate"]["median_ns"].as_f64();
    let iqr = t["candidate"]["iqr_ns"].as_f64();
    WorkloadRow {
        uuid: scalar(&w["uuid"]),
        axes,
        status: w["status"].as_str().unwrap_or("unknown").to_string(),
        reason: w["reason"].as_str().map(str::to_string),
        speedup: t["speedup"].as_f64(),
        median_ns: median,
        iqr_ns: iqr,
        reference_median_ns: t["reference"]["median_ns"].as_f64(),
        reference_iqr_ns: t["reference"]["iqr_ns"].as_f64(),
        relative_noise: match (median, iqr) {
            (Some(m), Some(q)) if m > 0.0 => Some(q / m),
            _ => None,
        },
        samples: t["candidate"]["n"].as_u64(),
        max_abs_error: w["correctness"]["max_abs_error"].as_f64(),
        gb_per_s: t["achieved_gb_per_s"].as_f64(),
        gflop_per_s: t["achieved_gflop_per_s"].as_f64(),
        suspicious: t["suspicious"].as_str().map(str::to_string),
    }
}

/// Provenance rows from an evaluation record and the run's metadata.
fn provenance(record: Option<&Value>, meta: &dyn Fn(&str) -> Option<Value>) -> Vec<KeyValue> {
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
    for key in ["ksearch_version", "run_seed", "devices", "task"] {
        if let Some(v) = meta(key) {
            push(&key.replace('_', " "), &v);
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
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn tree(engine: &Engine, best: Option<i64>) -> Tree {
    let wm = engine.world_model();
    let t = wm.tree();
    let best_node = best.and_then(|id| engine.candidate(id)).map(|c| c.node_id.clone());
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for c in engine.candidates() {
        *per_node.entry(c.node_id.as_str()).or_default() += 1;
    }
    let mut nodes = Vec::new();
    // Depth-first from the root, children in node order: the order of the compact rendering.
    let mut stack: Vec<(&ksearch_search::world_model::Node, usize)> = t.root().map(|r| (r, 0)).into_iter().collect();
    while let Some((n, depth)) = stack.pop() {
        let action = n.action.as_ref();
        nodes.push(TreeNode {
            id: n.node_id.to_string(),
            parent: n.parent_id.as_ref().map(|p| p.to_string()),
            depth,
            decision: n.decision.clone(),
            choice: n.choice.clone(),
            rating: n.overall_rating,
            confidence: n.confidence,
            status: n.status.as_str().to_string(),
            status_reason: n.status_reason.clone(),
            action: action.map(|a| a.title.clone()),
            difficulty: action.map(|a| a.difficulty),
            score: action.map(|a| a.score),
            expected_speedup: action.and_then(|a| a.expected_speedup),
            result: n.solution_ref.as_ref().map(|s| NodeResult {
                candidate: s.candidate_id,
                speedup: s.speedup,
                round: s.round,
            }),
            notes: n.notes.clone(),
            attempts: per_node.get(n.node_id.as_str()).copied().unwrap_or(0),
            last_updated_round: n.last_updated_round,
            active: n.node_id.as_str() == t.active_leaf_id(),
            best: best_node.as_deref() == Some(n.node_id.as_str()),
        });
        for child in t.children(&n.node_id).into_iter().rev() {
            stack.push((child, depth + 1));
        }
    }
    Tree {
        kernel_summary: wm.kernel_summary.clone(),
        open_questions: wm.open_questions.clone(),
        active_leaf: t.active_leaf_id().to_string(),
        nodes,
    }
}
