//! `ksearch show RUN_DIR`: the tree, every attempt (as the report lists them: parent,
//! description, status, speedup, per-workload times), the best candidate and the budget used,
//! rebuilt from the run's event log (nothing is re-run).

use crate::run_cmd::load_events;
use anyhow::Context;
use ksearch_report::kernelbench::FastP;
use ksearch_search::engine::{
    clip, error_excerpt, resource_brief, resource_lines, times_line, verdict, AttemptRecord, Candidate, Engine, Request,
};
use ksearch_store::{MetaKey, RunStore, StopReason};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The arguments of `ksearch show`.
#[derive(clap::Args)]
pub(crate) struct ShowArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Print one JSON object (world model, candidates, budget) instead of text.
    #[arg(long)]
    json: bool,
}

/// What `show` reports, computed once for the text and the JSON forms.
struct RunView {
    engine: Engine,
    state: String,
    /// Who answers the planner and coder, and the model behind an agent where the run says.
    brain: String,
    /// Where evaluations run (`local` or `deferred`).
    executor: String,
    best: Option<i64>,
    budget: Budget,
    /// Where the evaluations ran, by device model and node (docs/ray.md).
    devices: Vec<ksearch_report::DeviceGroup>,
    /// The device of each candidate's search evaluation, by candidate.
    device_of: HashMap<i64, String>,
}

struct Budget {
    calls: usize,
    failed_calls: usize,
    tokens_in: u64,
    tokens_out: u64,
    dollars: f64,
    unpriced: usize,
    evaluations: usize,
}

fn view(run_dir: &Path) -> anyhow::Result<RunView> {
    let store = RunStore::open(run_dir)?;
    let engine = Engine::replay(&load_events(&store)?).context("the run's event log does not replay")?;
    // The tuner's and an agent's answers are recorded too, but they are not LLM calls of ours.
    let exchanges: Vec<_> = store
        .exchanges()?
        .into_iter()
        .filter(|x| x.provider != "tuner" && x.provider != "agent")
        .collect();
    let calls = exchanges.iter().filter(|x| x.answer.is_some()).count();
    let evaluations = store.evaluations()?;
    let devices = ksearch_report::device_groups(&evaluations);
    let device_of: HashMap<i64, String> = evaluations
        .iter()
        .filter(|e| e.purpose == "search")
        .map(|e| (e.candidate_id, ksearch_report::device_of(&e.record).label()))
        .collect();
    let budget = Budget {
        calls,
        failed_calls: exchanges.len() - calls,
        tokens_in: exchanges.iter().map(|x| x.input_tokens).sum(),
        tokens_out: exchanges.iter().map(|x| x.output_tokens).sum(),
        dollars: exchanges.iter().filter_map(|x| x.cost_dollars).sum(),
        unpriced: exchanges
            .iter()
            .filter(|x| x.answer.is_some() && x.cost_dollars.is_none())
            .count(),
        evaluations: evaluations.len(),
    };
    let brain = match store.meta(MetaKey::Brain)? {
        Some(v) => serde_json::from_value::<ksearch_run::BrainSpec>(v)
            .map(|b| b.describe())
            .unwrap_or_else(|_| "an unreadable brain record".into()),
        None => "not recorded".into(),
    };
    let brain = match store.meta_str(MetaKey::BrainNote)? {
        Some(note) => format!("{brain} ({note})"),
        None => brain,
    };
    let executor = store.meta_str(MetaKey::Executor)?.unwrap_or_else(|| "local".into());
    let (state, best) = match engine.pending() {
        Some(Request::Finished { best_candidate, reason }) => (format!("finished: {reason}"), *best_candidate),
        Some(Request::Evaluate { .. }) if executor == "deferred" => (
            "in progress, waiting for `ksearch evaluate` (evaluations deferred)".to_string(),
            engine.best().map(|b| b.id),
        ),
        Some(r @ (Request::Plan { .. } | Request::Code { .. })) if brain.starts_with("an external agent") => (
            format!(
                "in progress, waiting for the agent's {} answer (`ksearch agent next`)",
                r.role()
            ),
            engine.best().map(|b| b.id),
        ),
        Some(r) => (
            format!(
                "in progress, waiting on the {} (resume with `ksearch resume`)",
                r.role()
            ),
            engine.best().map(|b| b.id),
        ),
        None => ("not started".to_string(), None),
    };
    // A run that is not finished but stopped for a reason the user must act on (an endpoint or
    // a cluster that went away, Ctrl-C, an error) says so, instead of "waiting on": the
    // `stopped` record is cleared whenever driving the run resumes (ksearch-run's driver).
    let state = match (engine.pending(), store.stop_record()?) {
        (Some(Request::Finished { .. }), _) | (_, None) => state,
        (_, Some(stop)) => match stop.reason {
            StopReason::Interrupted
            | StopReason::LlmUnavailable
            | StopReason::LlmRefused
            | StopReason::ExecutorUnavailable
            | StopReason::Error
            | StopReason::Fatal
            | StopReason::Budget => {
                let detail = stop
                    .detail
                    .filter(|d| !d.is_empty())
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                format!("stopped ({}){detail}", stop.reason)
            }
            // Not stopped short: finished, waiting (the text above says for what), or a reason
            // a newer ksearch wrote, which this one cannot explain.
            StopReason::Finished
            | StopReason::AwaitingAgent
            | StopReason::AwaitingEvaluation
            | StopReason::Other(_) => state,
        },
    };
    Ok(RunView {
        engine,
        state,
        brain,
        executor,
        best,
        budget,
        devices,
        device_of,
    })
}

/// The run as JSON: `ksearch show --json`, and the MCP server's `show_run`.
pub(crate) fn show_json(run_dir: &Path) -> anyhow::Result<serde_json::Value> {
    let v = view(run_dir)?;
    let e = &v.engine;
    let candidates: Vec<_> = e
        .candidates()
        .iter()
        .map(|c| {
            // A candidate's row is its search evaluation; `decided_speedup` and
            // `remeasured_speedups` say what re-measuring the best did.
            let workloads: Vec<_> = c
                .search_result()
                .into_iter()
                .flat_map(|r| &r.workloads)
                .map(|w| {
                    json!({"uuid": w.uuid, "status": w.status, "median_ns": w.median_ns, "iqr_ns": w.iqr_ns,
                                "reference_median_ns": w.reference_median_ns})
                })
                .collect();
            json!({
                "id": c.id, "parent": c.parent, "node_id": c.node_id, "round": c.round, "cycle": c.cycle,
                "origin": origin(e, c), "description": e.description(c.id),
                "status": c.result.as_ref().map(|r| r.status.clone()), "speedup": c.search_speedup(),
                "decided_speedup": c.speedup(),
                "reason": c.result.as_ref().and_then(|r| r.reason.as_ref()).map(|r| clip(r, 300)),
                "final_speedup": c.final_result.as_ref().and_then(|r| r.speedup),
                "remeasured_speedups": c.remeasured.iter().map(|r| r.speedup).collect::<Vec<_>>(),
                "resources": c.result.as_ref().map(|r| r.resources.clone()).unwrap_or_default(),
                "workloads": workloads,
                "device": v.device_of.get(&c.id),
            })
        })
        .collect();
    // The coder answers that yielded no candidate (the candidates list has the others).
    let no_code: Vec<_> = e
        .attempts()
        .iter()
        .filter(|a| a.candidate.is_none())
        .map(|a| {
            json!({"round": a.round, "kind": a.kind.map(|k| k.as_str()), "node_id": a.node_id, "parent": a.parent,
                   "description": a.description, "failure": a.failure})
        })
        .collect();
    let b = &v.budget;
    Ok(json!({
        "run_dir": run_dir, "task": e.task().map(|t| t.name.clone()), "state": v.state, "round": e.round(),
        "brain": v.brain, "executor": v.executor,
        "rounds": e.config().rounds, "best_candidate": v.best,
        "world_model": e.world_model().to_json(), "candidates": candidates, "answers_without_code": no_code,
        "devices": v.devices.iter().map(|d| json!({"model": d.model, "node": d.node, "driver": d.driver,
                   "evaluations": d.evaluations, "passed": d.passed})).collect::<Vec<_>>(),
        "kernelbench_fast_p": fast_p(run_dir, &v),
        "budget": {"llm_calls": b.calls, "failed_llm_calls": b.failed_calls, "input_tokens": b.tokens_in,
                   "output_tokens": b.tokens_out, "dollars": b.dollars, "unpriced_calls": b.unpriced,
                   "evaluations": b.evaluations},
    }))
}

/// Prints the run as text, or as JSON with `--json`; returns the exit status.
pub(crate) fn run(args: &ShowArgs) -> anyhow::Result<u8> {
    if args.json {
        println!("{}", show_json(&args.run_dir)?);
        return Ok(0);
    }
    let v = view(&args.run_dir)?;
    let e = &v.engine;
    let task = e.task().map(|t| t.name.clone()).unwrap_or_default();
    println!("run {}  task {task}  {}", args.run_dir.display(), v.state);
    println!("brain: {}; evaluations: {}", v.brain, v.executor);
    println!(
        "rounds {}/{}, cycles {}, candidates {}",
        e.round(),
        e.config().rounds,
        e.cycle_count(),
        e.candidates().len()
    );
    // Numbers from different device models are not comparable as they stand: where the
    // evaluations ran on several, say where, and name each candidate's.
    let mixed = v.devices.len() > 1;
    if mixed {
        println!("devices ({}):", v.devices.len());
        for line in device_lines(&v.devices) {
            println!("  {line}");
        }
    }
    println!();
    println!("{}", e.world_model().render_compact(500, 100_000).trim_end());
    println!();
    let no_devices = HashMap::new();
    for line in attempt_lines(e, if mixed { &v.device_of } else { &no_devices }) {
        println!("{line}");
    }
    println!();
    match v.best.and_then(|id| e.candidate(id)) {
        Some(b) => {
            let summary = b.final_result.as_ref().or(b.result.as_ref());
            let result = summary.map(verdict).unwrap_or_default();
            let files: Vec<&str> = b.sources.iter().map(|s| s.path.as_str()).collect();
            println!(
                "best: candidate {} (node {}, round {}): {result}",
                b.id, b.node_id, b.round
            );
            println!(
                "      files {} (in {}/best/ once the run finishes)",
                files.join(", "),
                args.run_dir.display()
            );
            for line in summary
                .map(|s| resource_lines(&s.resources))
                .unwrap_or_default()
                .lines()
            {
                println!("      {line}");
            }
        }
        None => println!("best: none passed yet"),
    }
    if let Some(f) = fast_p(&args.run_dir, &v) {
        println!("{}", f.line());
    }
    let b = &v.budget;
    let priced = if b.unpriced > 0 {
        format!(" (+{} calls of unknown price)", b.unpriced)
    } else {
        String::new()
    };
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let llm = if b.calls == 0 && b.failed_calls == 0 {
        "no LLM calls".to_string()
    } else {
        // `+ 0.0` turns a sum of no prices (-0.0) into 0.
        format!(
            "{} ({} failed), {} tokens in, {} out, ${:.4}{priced}",
            plural(b.calls as u64, "LLM call", "LLM calls"),
            b.failed_calls,
            b.tokens_in,
            b.tokens_out,
            b.dollars + 0.0
        )
    };
    println!(
        "budget used: {llm}; {}",
        plural(b.evaluations as u64, "evaluation", "evaluations")
    );
    Ok(0)
}

/// KernelBench's fast_p of the run's best candidate, for a task imported from KernelBench
/// (ksearch_report::kernelbench); `None` for other tasks.
fn fast_p(run_dir: &Path, v: &RunView) -> Option<FastP> {
    if !ksearch_report::kernelbench::is_kernelbench_task(&run_dir.join("task")) {
        return None;
    }
    let best = v.best.and_then(|id| v.engine.candidate(id));
    // As the `best:` line judges it: the final re-measurement where there is one.
    let summary = best.and_then(|b| b.final_result.as_ref().or(b.result.as_ref()));
    Some(match summary {
        Some(s) => FastP::new(s.passed(), s.speedup),
        None => FastP::new(false, None),
    })
}

/// `seed`, `coder`, `knob_sweep`, as the report names a candidate's origin.
fn origin(e: &Engine, c: &Candidate) -> &'static str {
    match e.attempts().iter().find(|a| a.candidate == Some(c.id)) {
        Some(a) => a.origin(),
        None if c.round == 0 => "seed",
        None => "coder",
    }
}

/// `MODEL (node N): K evaluations (P passed), driver D`, one a device group.
fn device_lines(devices: &[ksearch_report::DeviceGroup]) -> Vec<String> {
    devices
        .iter()
        .map(|d| {
            let plural = if d.evaluations == 1 { "" } else { "s" };
            let driver = d.driver.as_ref().map(|v| format!(", driver {v}")).unwrap_or_default();
            format!(
                "{}: {} evaluation{plural} ({} passed){driver}",
                d.label(),
                d.evaluations,
                d.passed
            )
        })
        .collect()
}

/// Every attempt of the run, oldest first: the seed, each coder answer (with or without code)
/// and each knob sweep variant, with its parent, description, verdict, final re-measurement,
/// per-workload times and the first lines of its error. `devices` names the device of each
/// candidate's evaluation (empty: not named, all ran on one).
fn attempt_lines(e: &Engine, devices: &HashMap<i64, String>) -> Vec<String> {
    let mut out = Vec::new();
    let recorded: Vec<&AttemptRecord> = e.attempts().iter().collect();
    let seeds = e
        .candidates()
        .iter()
        .filter(|c| c.round == 0 && !recorded.iter().any(|a| a.candidate == Some(c.id)));
    let count = recorded.len() + seeds.clone().count();
    out.push(format!("attempts ({count}):"));
    for c in seeds {
        out.extend(candidate_lines(e, c, "seed", None, devices.get(&c.id)));
    }
    for a in recorded {
        match a.candidate.and_then(|id| e.candidate(id)) {
            Some(c) => {
                let how = match (a.kind, a.parent) {
                    (Some(k), Some(p)) => format!("{} of candidate {p}", k.as_str()),
                    (Some(k), None) => k.as_str().to_string(),
                    (None, Some(p)) => format!("knob sweep of candidate {p}"),
                    (None, None) => "knob sweep".to_string(),
                };
                out.extend(candidate_lines(e, c, &how, a.parent, devices.get(&c.id)));
            }
            None => {
                let kind = a.kind.map(|k| k.as_str()).unwrap_or("coder");
                out.push(format!(
                    "  round {} (node {}, {kind}): no candidate ({})",
                    a.round,
                    a.node_id,
                    clip(a.failure.as_deref().unwrap_or("no code"), 200)
                ));
                if let Some(d) = &a.description {
                    out.push(format!("      change: {d}"));
                }
            }
        }
    }
    out
}

fn candidate_lines(e: &Engine, c: &Candidate, how: &str, parent: Option<i64>, device: Option<&String>) -> Vec<String> {
    let mut result = c.result.as_ref().map(verdict).unwrap_or_else(|| "not evaluated".into());
    if let Some(f) = c.final_result.as_ref() {
        result.push_str(&format!("; final: {}", verdict(f)));
    }
    if let Some(text) = parent.and_then(|p| e.describe_against(c.id, p)) {
        result.push_str(&format!("; {text}"));
    }
    let on = device.map(|d| format!(" on {d}")).unwrap_or_default();
    let mut out = vec![format!(
        "  candidate {} (round {}, node {}, {how}){on}: {result}",
        c.id, c.round, c.node_id
    )];
    if let Some(d) = e.description(c.id) {
        out.push(format!("      change: {d}"));
    }
    if let Some(r) = c.result.as_ref() {
        let times = times_line(r);
        if !times.is_empty() {
            out.push(format!("      times: {times}"));
        }
        for (i, line) in error_excerpt(r).lines().take(3).enumerate() {
            out.push(format!("      {}{line}", if i == 0 { "error: " } else { "       " }));
        }
        let resources = resource_brief(&r.resources);
        if !resources.is_empty() {
            out.push(format!("      resources: {resources}"));
        }
    }
    // Re-measured as the run's best (docs/engine.md, "Re-measuring a noisy best"): each one, and
    // whether the engine decides with it (then the verdict and times above are its).
    for (i, r) in c.remeasured.iter().enumerate() {
        let used = if c.result.as_ref() == Some(r) {
            " (the measurement used)"
        } else {
            ""
        };
        let harness = r
            .harness
            .as_deref()
            .map(|h| format!(", harness {h}"))
            .unwrap_or_default();
        out.push(format!("      re-measured {}{harness}{used}: {}", i + 1, verdict(r)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_search::engine::{EngineConfig, EvalSummary, Event, Source, TaskBrief, WorkloadSummary};
    use serde_json::json;

    fn measured(us: f64) -> EvalSummary {
        EvalSummary {
            status: "passed".into(),
            reason: None,
            speedup: Some(100.0 / us),
            relative_noise: Some(0.01),
            workloads: vec![WorkloadSummary {
                uuid: "w0".into(),
                status: "passed".into(),
                speedup: Some(100.0 / us),
                median_ns: Some(us * 1e3),
                iqr_ns: Some(us * 10.0),
                reference_median_ns: Some(100e3),
            }],
            log_tail: String::new(),
            suspicious: None,
            resources: vec![],
            profile: None,
            harness: None,
        }
    }

    /// Serves the engine's requests with `answers` (planner and coder texts in order) and
    /// `evaluations` (summaries in order).
    fn run(answers: Vec<String>, evaluations: Vec<EvalSummary>) -> Engine {
        let mut e = Engine::new();
        let task = TaskBrief {
            name: "toy".into(),
            text: "y = x".into(),
            language: ksearch_spec::Language::C,
            convention: String::new(),
            default_file: "kernel.c".into(),
            target: String::new(),
            expertise: String::new(),
            seed: Some(vec![Source {
                path: "kernel.c".into(),
                content: "seed".into(),
            }]),
        };
        let config = EngineConfig {
            rounds: 3,
            knob_share: 0.0,
            ..EngineConfig::default()
        };
        e.apply(&Event::Started { task, config }).unwrap();
        let (mut answers, mut evaluations) = (answers.into_iter(), evaluations.into_iter());
        while let Some(r) = e.pending().cloned() {
            let event = match r {
                Request::Plan { id, .. } => Event::PlannerAnswered {
                    request_id: id,
                    text: answers.next().unwrap(),
                },
                Request::Code { id, .. } => Event::CoderAnswered {
                    request_id: id,
                    text: answers.next().unwrap(),
                },
                Request::Evaluate { id, candidate_id, .. } => Event::Evaluated {
                    request_id: id,
                    candidate_id,
                    summary: evaluations.next().unwrap_or_else(|| measured(50.0)),
                },
                Request::Finished { .. } => break,
            };
            e.apply(&event).unwrap();
        }
        e
    }

    #[test]
    fn show_lists_every_attempt_with_parent_description_status_and_times() {
        let insert = |id: &str| {
            json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": "d", "choice": id,
                "overall_rating": 5, "confidence": 0.5,
                "action": {"title": "t", "difficulty": 1, "score": 0.5}}})
        };
        let plan = json!({"ops": [insert("a"), insert("b"), insert("c")]}).to_string();
        let compile_error = EvalSummary::failure(
            "compile_error",
            "compilation failed:\nkernel.c:2:1: error: expected ';'\n1 error generated.".into(),
        );
        let e = run(
            vec![
                plan,
                "DESCRIPTION: tiled by 64\n```c kernel.c\ntiled\n```".into(),
                "I would vectorise it.".into(),
                "DESCRIPTION: vectorised\n```c kernel.c\nvector\n```".into(),
            ],
            vec![measured(100.0), measured(50.0), compile_error],
        );
        let lines = attempt_lines(&e, &HashMap::new()).join("\n");
        assert!(lines.starts_with("attempts (4):"), "{lines}");
        assert!(
            lines.contains("candidate 1 (round 0, node root, seed): passed, 1.00x the reference"),
            "{lines}"
        );
        assert!(
            lines.contains("candidate 2 (round 1, node a, action of candidate 1): passed, 2.00x the reference"),
            "{lines}"
        );
        assert!(lines.contains("2.00x faster than candidate 1"), "{lines}");
        assert!(lines.contains("change: tiled by 64"), "{lines}");
        assert!(lines.contains("times: w0 50.0+/-0.500 us"), "{lines}");
        assert!(
            lines.contains("round 2 (node a, improve): no candidate (format_error"),
            "{lines}"
        );
        assert!(lines.contains("change: vectorised"), "{lines}");
        assert!(lines.contains("error: compilation failed:"), "{lines}");
        assert!(lines.contains("kernel.c:2:1: error: expected ';'"), "{lines}");
    }

    #[test]
    fn show_lists_the_bests_re_measurements_and_which_one_is_used() {
        let insert = |id: &str| {
            json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": "d", "choice": id,
                "overall_rating": 5, "confidence": 0.5,
                "action": {"title": "t", "difficulty": 1, "score": 0.5}}})
        };
        let plan = json!({"ops": [insert("a"), insert("b"), insert("c")]}).to_string();
        // The seed measured by harness 0.2.0, the next candidate by 0.3.0 at the same speed: the
        // seed is measured again by 0.3.0 before the two are compared.
        let by = |us: f64, v: &str| EvalSummary {
            harness: Some(v.into()),
            ..measured(us)
        };
        let same = || "DESCRIPTION: same\n```c kernel.c\nsame\n```".to_string();
        let mut evaluations = vec![by(100.0, "0.2.0"), by(80.0, "0.3.0"), by(79.0, "0.3.0")];
        evaluations.extend((0..8).map(|_| by(80.0, "0.3.0")));
        let e = run(vec![plan, same(), same(), same()], evaluations);
        let lines = attempt_lines(&e, &HashMap::new()).join("\n");
        assert!(
            lines.contains("re-measured 1, harness 0.3.0 (the measurement used): passed, 1.27x the reference"),
            "{lines}"
        );
        assert_eq!(e.best().map(|b| b.id), Some(1), "{lines}");
    }
}
