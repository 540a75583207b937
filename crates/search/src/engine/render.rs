//! Builds the prompts from the engine's state (what the planner and coder get to see).

use super::candidates::{measurement_lines, verdict, Candidate};
use super::protocol::{CodeKind, PlanKind};
use super::resources::resource_lines;
use super::{prompts, Attempt, Engine};
use serde_json::json;

pub(super) fn task_json(e: &Engine) -> serde_json::Value {
    serde_json::to_value(e.task.as_ref()).unwrap_or(serde_json::Value::Null)
}

pub(super) fn planner_system(e: &Engine) -> Result<String, String> {
    prompts::render("planner_system.j2", json!({ "task": task_json(e) }))
}

pub(super) fn coder_system(e: &Engine) -> Result<String, String> {
    // The annotation is offered only where a sweep can follow (world-model cycles, budget set).
    let python = e.task.as_ref().is_some_and(|t| t.language.is_python_module());
    let syntax = if python {
        "BLOCK = 128  # ksearch: knob values=[64, 128, 256]"
    } else {
        "#define BLOCK 128  // ksearch: knob values=[64, 128, 256]"
    };
    let knob_syntax =
        (e.config.strategy == super::Strategy::WorldModel && super::knob_sweep::budget(e) > 0).then_some(syntax);
    prompts::render(
        "coder_system.j2",
        json!({ "task": task_json(e), "knob_syntax": knob_syntax }),
    )
}

fn tree(e: &Engine) -> String {
    e.wm.render_compact(e.config.wm_max_nodes, e.config.wm_max_chars)
}

/// The source files of a candidate, each under its name in a fenced block.
pub(super) fn files(c: &Candidate) -> String {
    c.sources
        .iter()
        .map(|s| format!("**{}**\n```\n{}\n```", s.path, s.content.trim_end()))
        .collect::<Vec<_>>()
        .join("\n\n")
}

pub(super) fn describe(c: &Candidate) -> String {
    match &c.result {
        Some(r) => verdict(r),
        None => "not evaluated".to_string(),
    }
}

/// What the planner and coder know of the measurements: the seed, the best so far, and the
/// latest attempts.
pub(super) fn performance(e: &Engine) -> String {
    let mut out = Vec::new();
    // The budget, so a planner can plan its bets (a long shot late is a waste, early a chance).
    let rounds = e.config.rounds;
    let used = e.round.min(rounds);
    out.push(format!(
        "Budget: {used} of {rounds} coder rounds used, {} left.",
        rounds.saturating_sub(used)
    ));
    if let Some(seed) = e.candidates.first().filter(|c| c.cycle == 0) {
        out.push(format!("Seed (candidate {}): {}", seed.id, describe(seed)));
    }
    match e.best() {
        Some(b) => {
            out.push(format!(
                "Best so far: candidate {} (node {}, round {}): {}",
                b.id,
                b.node_id,
                b.round,
                describe(b)
            ));
            if let Some(r) = &b.result {
                out.push(measurement_lines(r));
            }
        }
        None => out.push("No passing candidate yet.".to_string()),
    }
    let recent = super::evidence::recent_attempts(e);
    if !recent.is_empty() {
        out.push(recent);
    }
    out.join("\n")
}

fn attempts_table(e: &Engine, attempts: &[Attempt]) -> String {
    let lines: Vec<String> = attempts
        .iter()
        .map(|a| {
            let what = match (a.candidate.and_then(|id| e.candidate(id)), &a.failure) {
                (Some(c), _) => format!("candidate {}: {}", c.id, describe(c)),
                (None, Some(f)) => format!("no candidate ({f})"),
                (None, None) => "no candidate".to_string(),
            };
            format!("- round {} ({}): {what}", a.round, a.kind.as_str())
        })
        .collect();
    if lines.is_empty() {
        String::new()
    } else {
        format!("Attempts of that cycle:\n{}", lines.join("\n"))
    }
}

/// Why a cycle produced nothing: its last failure, in one line.
pub(super) fn last_failure(e: &Engine, attempts: &[Attempt]) -> String {
    match attempts.last() {
        Some(a) => match (a.candidate.and_then(|id| e.candidate(id)), &a.failure) {
            (Some(c), _) => describe(c),
            (None, Some(f)) => f.clone(),
            (None, None) => "no passing candidate".to_string(),
        },
        None => "no attempt was made".to_string(),
    }
}

/// What a propose prompt says of a refine or too-hard step given up after its answers were
/// rejected: which step, the last errors, and that step's evidence (the node, its outcome, the
/// cycle's attempts), so the planner can still act on it.
pub(super) fn gave_up(e: &Engine, plan: &PlanKind, feedback: &str) -> String {
    let (what, node_id) = match plan {
        PlanKind::Refine { node_id } => ("refine", node_id),
        PlanKind::TooHard { node_id } => ("too-hard", node_id),
        _ => return String::new(),
    };
    let node = e.wm.node(node_id);
    let cycle = e.last_cycle.as_ref();
    let attempts = cycle.map(|c| c.attempts.as_slice()).unwrap_or(&[]);
    let outcome = match cycle.and_then(|c| c.best).and_then(|id| e.candidate(id)) {
        Some(b) => format!(
            "its best candidate: candidate {}: {}\n{}",
            b.id,
            describe(b),
            b.result.as_ref().map(measurement_lines).unwrap_or_default()
        ),
        None => format!("no passing candidate; the last failure: {}", last_failure(e, attempts)),
    };
    // The error lines of the last re-ask, without its instructions.
    let listed: Vec<&str> = feedback.lines().filter(|l| l.starts_with("- ")).collect();
    let errors = if listed.is_empty() {
        super::evidence::clip_lines(feedback, 20)
    } else {
        super::evidence::clip_lines(&listed.join("\n"), 20)
    };
    format!(
        "Your {} answers for node {node_id} ({}: {}) were rejected {} times, so none was applied. The last errors:\n{errors}\n\nThat step's evidence, still to be used: node {node_id} was implemented; {outcome}\n{}",
        what,
        node.map(|n| n.decision.as_str()).unwrap_or(""),
        node.map(|n| n.choice.as_str()).unwrap_or(""),
        e.config.planner_tries,
        attempts_table(e, attempts)
    )
}

pub(super) fn plan_prompt(e: &Engine, plan: &PlanKind, feedback: Option<&str>) -> Result<String, String> {
    let mut ctx = json!({
        "task": task_json(e),
        "difficulty_cap": e.config.difficulty_cap,
        "kernel_summary": e.wm.kernel_summary,
        "open_questions": e.wm.open_questions,
        "tree": tree(e),
        "performance": performance(e),
        "feedback": feedback,
    });
    let template = match plan {
        PlanKind::Init => {
            if let Some(seed) = e.candidates.first() {
                ctx["seed"] = json!({
                    "verdict": describe(seed),
                    "workloads": seed.result.as_ref().map(measurement_lines).unwrap_or_default(),
                });
            }
            "plan_init.j2"
        }
        PlanKind::Propose => {
            ctx["why"] = json!(e.propose_reason);
            ctx["previous"] = json!(e.gave_up);
            "plan_propose.j2"
        }
        PlanKind::Refine { node_id } | PlanKind::TooHard { node_id } => {
            let node = e.wm.node(node_id);
            let cycle = e.last_cycle.as_ref();
            let attempts = cycle.map(|c| c.attempts.as_slice()).unwrap_or(&[]);
            ctx["node"] = json!({
                "node_id": node_id,
                "decision": node.map(|n| n.decision.clone()).unwrap_or_default(),
                "choice": node.map(|n| n.choice.clone()).unwrap_or_default(),
                "action_title": node.and_then(|n| n.action.as_ref()).map(|a| a.title.clone()).unwrap_or_default(),
            });
            ctx["attempts"] = json!(attempts_table(e, attempts));
            ctx["attempt_count"] = json!(attempts.len());
            if matches!(plan, PlanKind::Refine { .. }) {
                let best = cycle.and_then(|c| c.best).and_then(|id| e.candidate(id));
                ctx["outcome"] = json!(best
                    .map(|b| format!(
                        "candidate {}: {}\n{}",
                        b.id,
                        describe(b),
                        b.result.as_ref().map(measurement_lines).unwrap_or_default()
                    ))
                    .unwrap_or_default());
                "plan_refine.j2"
            } else {
                ctx["outcome"] = json!(last_failure(e, attempts));
                "plan_too_hard.j2"
            }
        }
    };
    prompts::render(template, ctx)
}

/// What a coder answering one of `samples` parallel attempts of a step is told: the others
/// exist, the step keeps the fastest, so attempts after the first should not all write the
/// obvious kernel.
pub(super) fn sample_note(i: u32, samples: u32) -> String {
    let approach = if i == 1 {
        "write the kernel you judge most likely to be fastest".to_string()
    } else {
        format!(
            "the others will likely take the most obvious route, so choose a clearly different design or \
             parameter choice for this step (attempt {i}), still correct and still implementing the assignment"
        )
    };
    format!(
        "\n\n## Parallel attempt {i} of {samples}\n{samples} coders answer this same step at once, each \
         compiled, checked and timed; the step keeps the fastest. As attempt {i}: {approach}.\n"
    )
}

pub(super) fn code_prompt(e: &Engine, kind: CodeKind, node_id: &str) -> Result<String, String> {
    let node = e.wm.node(node_id);
    let action = node.and_then(|n| n.action.as_ref());
    let cycle = e.cycle.as_ref();
    let mut ctx = json!({
        "task": task_json(e),
        "tree": tree(e),
        "performance": performance(e),
        "action": {
            "title": action.map(|a| a.title.clone()).unwrap_or_default(),
            "description": action.map(|a| a.description.clone()).unwrap_or_default(),
            "rationale": action.map(|a| a.rationale.clone()).unwrap_or_default(),
        },
    });
    let template = match kind {
        CodeKind::Action => {
            if let Some(base) = cycle.and_then(|c| c.base).and_then(|id| e.candidate(id)) {
                ctx["base"] = json!({ "id": base.id, "verdict": describe(base), "files": files(base) });
            }
            "code_action.j2"
        }
        CodeKind::Debug => {
            let last = cycle.and_then(|c| c.attempts.last());
            let failed = last.and_then(|a| a.candidate).and_then(|id| e.candidate(id));
            let base = cycle.and_then(|c| c.base).and_then(|id| e.candidate(id));
            ctx["failure"] = json!({
                "verdict": last.map(|a| match (failed, &a.failure) {
                    (Some(c), _) => describe(c),
                    (None, Some(f)) => f.clone(),
                    _ => String::new(),
                }).unwrap_or_default(),
                "log": failed.and_then(|c| c.result.as_ref()).map(|r| r.log_tail.clone()).unwrap_or_default(),
                "resources": failed.and_then(|c| c.result.as_ref()).map(|r| resource_lines(&r.resources)).unwrap_or_default(),
                "files": failed.or(base).map(files).unwrap_or_else(|| "(no code was extracted from the last answer)".to_string()),
            });
            "code_debug.j2"
        }
        CodeKind::Improve => {
            let best = cycle.and_then(|c| c.best).and_then(|id| e.candidate(id));
            ctx["best"] = json!({
                "verdict": best.map(describe).unwrap_or_default(),
                "workloads": best.and_then(|b| b.result.as_ref()).map(measurement_lines).unwrap_or_default(),
                "files": best.map(files).unwrap_or_default(),
                // e.g. knob annotations that could not be read: the coder fixes them or not.
                "note": best.and_then(|b| b.note.clone()).unwrap_or_default(),
            });
            "code_improve.j2"
        }
    };
    prompts::render(template, ctx)
}
