//! The `refine` strategy: the paper's non-world-model generator, on the same round budget.
//!
//! No planner and no tree (the world model stays a root-only tree; every candidate hangs at
//! the root). Each round is one coder answer and one evaluation:
//! - `improve` the best passing candidate so far, when there is one (the previous attempt's
//!   verdict is shown when it did not beat it);
//! - `debug` the latest attempt when nothing passed yet and that attempt failed (its status,
//!   reason and log);
//! - `action` (write a kernel) from the seed, or from the specification, when nothing was tried.
//!
//! The whole run counts as one cycle, so candidates carry `cycle` 1 and the seed `cycle` 0.
//! The helpers here (round outcome, code request, the baseline prompt) serve `evolve` too.

use super::budget::ResumeAt;
use super::render::{describe, files, performance, task_json};
use super::{prompts, render, CodeKind, Engine, EngineError, Request};
use crate::engine::candidates::measurement_lines;
use crate::engine::resources::resource_lines;
use ksearch_messages::Message;
use serde_json::json;

/// The outcome of one round of a baseline strategy.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tried {
    /// The candidate the answer yielded (measured by now), if code could be extracted.
    pub candidate: Option<i64>,
    /// Why the answer yielded no candidate.
    pub failure: Option<String>,
    /// The candidate the round built on.
    pub base: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Refine {
    /// The latest round's outcome.
    last: Option<Tried>,
}

pub(super) fn start(e: &mut Engine) -> Result<(), EngineError> {
    e.cycle_count = 1;
    next_round(e)
}

pub(super) fn attempt_done(e: &mut Engine, tried: Tried) -> Result<(), EngineError> {
    e.refine.last = Some(tried);
    next_round(e)
}

/// A raised round budget: the round the old budget did not allow (budget.rs).
pub(super) fn resume(e: &mut Engine) -> Result<(), EngineError> {
    next_round(e)
}

fn next_round(e: &mut Engine) -> Result<(), EngineError> {
    if e.round >= e.config.rounds {
        e.resume_at = Some(ResumeAt::Refine);
        return e.finalize();
    }
    e.round += 1;
    let (kind, base) = match (e.best().map(|c| c.id), &e.refine.last) {
        (Some(best), _) => (CodeKind::Improve, Some(best)),
        // Nothing passed, so the latest attempt failed: fix it (or what it started from).
        (None, Some(last)) => (CodeKind::Debug, last.candidate.or(last.base)),
        (None, None) => (CodeKind::Action, seed(e)),
    };
    let user = prompt(e, kind, base, e.refine.last.as_ref())?;
    request_code(e, kind, base, user)
}

/// The seed candidate, if the task has one.
pub(super) fn seed(e: &Engine) -> Option<i64> {
    e.candidates.first().filter(|c| c.round == 0).map(|c| c.id)
}

/// What became of a round, in one line.
pub(super) fn tried_verdict(e: &Engine, tried: &Tried) -> String {
    match (tried.candidate.and_then(|id| e.candidate(id)), &tried.failure) {
        (Some(c), _) => format!("candidate {}: {}", c.id, describe(c)),
        (None, Some(f)) => format!("no candidate ({f})"),
        (None, None) => "no candidate".to_string(),
    }
}

/// Asks the coder for a kernel at the root of the (unused) tree, for round `e.round`.
pub(super) fn request_code(e: &mut Engine, kind: CodeKind, base: Option<i64>, user: String) -> Result<(), EngineError> {
    let system = render::coder_system(e).map_err(EngineError::Internal)?;
    let id = e.next_id();
    let request = Request::Code {
        id,
        code: kind,
        node_id: e.wm.tree().root_id().to_string(),
        base_candidate: base,
        messages: vec![Message::system(system), Message::user(user)],
    };
    e.issue(request, e.round);
    Ok(())
}

/// The `code_refine.j2` prompt: improve `base`, fix the failure `last`, or write a kernel.
pub(super) fn prompt(
    e: &Engine,
    kind: CodeKind,
    base: Option<i64>,
    last: Option<&Tried>,
) -> Result<String, EngineError> {
    let base = base.and_then(|id| e.candidate(id));
    let mut ctx = json!({
        "task": task_json(e),
        "performance": performance(e),
        "kind": kind.as_str(),
    });
    if let Some(b) = base {
        ctx["base"] = json!({
            "id": b.id,
            "verdict": describe(b),
            "workloads": b.result.as_ref().map(measurement_lines).unwrap_or_default(),
            "files": files(b),
        });
    }
    match kind {
        CodeKind::Debug => {
            let failed = last.and_then(|t| t.candidate).and_then(|id| e.candidate(id));
            ctx["failure"] = json!({
                "verdict": last.map(|t| tried_verdict(e, t)).unwrap_or_default(),
                "log": failed.and_then(|c| c.result.as_ref()).map(|r| r.log_tail.clone()).unwrap_or_default(),
                "resources": failed.and_then(|c| c.result.as_ref()).map(|r| resource_lines(&r.resources)).unwrap_or_default(),
                "has_code": failed.is_some(),
            });
        }
        CodeKind::Improve => {
            // The previous attempt, when it is not the kernel being improved.
            if let Some(t) = last.filter(|t| t.candidate != base.map(|b| b.id)) {
                ctx["last"] = json!(tried_verdict(e, t));
            }
        }
        CodeKind::Action => {}
    }
    prompts::render("code_refine.j2", ctx).map_err(EngineError::Internal)
}
