//! Agent mode: an external coding agent (Claude Code, Codex, Cursor, ...) answers the planner's
//! and coder's requests with its own model. [`pending_for_agent`] lists the requests waiting for
//! it; [`submit_answer`] records an answer, after which the run is driven on to the next request
//! (the caller does that, holding the run's lock). A run with `--parallel` above 1 can wait on
//! several requests at once, answered in any order by id.

use crate::brains::BrainSpec;
use crate::driver::answer_format;
use anyhow::{bail, Context};
use ksearch_search::engine::{Engine, Event, Request};
use ksearch_store::{ExchangeRow, MetaKey, RequestState, RunStore};
use serde_json::json;

/// The requests an agent must answer now (oldest first, at least one), from the run's log.
pub fn pending_for_agent(store: &RunStore, run_dir: &std::path::Path) -> anyhow::Result<(Engine, Vec<Request>)> {
    let brain: BrainSpec =
        serde_json::from_value(store.meta(MetaKey::Brain)?.context("the run has no recorded brain")?)?;
    if brain != BrainSpec::Agent {
        bail!(
            "{}: this run is served by {}, not by an agent",
            run_dir.display(),
            brain.describe()
        );
    }
    let engine = Engine::replay(&crate::drive::load_events(store)?).context("the run's event log does not replay")?;
    let requests: Vec<Request> = engine
        .in_flight()
        .into_iter()
        .filter(|r| matches!(r, Request::Plan { .. } | Request::Code { .. }))
        .cloned()
        .collect();
    if requests.is_empty() {
        let evaluations = engine
            .in_flight()
            .into_iter()
            .filter(|r| matches!(r, Request::Evaluate { .. }))
            .count();
        match engine.pending() {
            Some(Request::Finished { reason, .. }) => bail!("the run is finished ({reason}); nothing to answer"),
            Some(_) if evaluations > 0 => bail!(
                "nothing to answer: {evaluations} candidate(s) wait to be evaluated; evaluate them with `ksearch evaluate {}` \
                 (a deferred run: on a machine with the task's device) or `ksearch resume {}`",
                run_dir.display(),
                run_dir.display()
            ),
            Some(_) => bail!(
                "the run is between steps; continue it with `ksearch resume {}`",
                run_dir.display()
            ),
            None => bail!("the run has not started"),
        }
    }
    Ok((engine, requests))
}

/// What `agent next --json` and MCP's next_request print: the oldest request's fields, and
/// when several wait at once, all of them under `requests` too.
pub fn requests_json(requests: &[Request]) -> serde_json::Value {
    let mut body = requests.first().map(request_json).unwrap_or_default();
    if requests.len() > 1 {
        body["requests"] = requests.iter().map(request_json).collect();
    }
    body
}

/// The pending request as JSON for an agent.
pub fn request_json(request: &Request) -> serde_json::Value {
    let (kind, messages) = match request {
        Request::Plan { plan, messages, .. } => (serde_json::to_value(plan).unwrap_or_default(), messages.clone()),
        Request::Code {
            code,
            node_id,
            messages,
            ..
        } => (json!({"kind": code.as_str(), "node_id": node_id}), messages.clone()),
        _ => (serde_json::Value::Null, vec![]),
    };
    json!({
        "id": request.id(),
        "role": request.role(),
        "kind": kind,
        "answer_format": answer_format(request),
        "messages": messages,
    })
}

/// Records `text` as the answer to `request_id`; the exchange row, the event and the request's
/// state land in one transaction. The caller holds the run's lock and drives the run on.
/// Returns every error the engine finds in the answer, all at once (empty: accepted). A
/// rejected answer is still recorded, as an LLM's would be: the engine asks again with the same
/// list, and the try counts (docs/engine.md, "Rejected answers").
pub fn submit_answer(
    store: &RunStore,
    run_dir: &std::path::Path,
    request_id: &str,
    text: String,
) -> anyhow::Result<Vec<String>> {
    let (mut engine, requests) = pending_for_agent(store, run_dir)?;
    let Some(request) = requests.iter().find(|r| r.id() == Some(request_id)).cloned() else {
        let list: Vec<String> = requests
            .iter()
            .map(|r| format!("{} ({})", r.id().unwrap_or("-"), r.role()))
            .collect();
        match list.as_slice() {
            [one] => bail!("request {request_id} is not pending; the pending request is {one}"),
            many => bail!(
                "request {request_id} is not pending; the pending requests are {}",
                many.join(", ")
            ),
        }
    };
    let pending_id = request_id.to_string();
    if text.trim().is_empty() {
        bail!("the answer is empty");
    }
    let event = match &request {
        Request::Plan { .. } => Event::PlannerAnswered {
            request_id: pending_id.clone(),
            text: text.clone(),
        },
        _ => Event::CoderAnswered {
            request_id: pending_id.clone(),
            text: text.clone(),
        },
    };
    let errors = engine.check_answer(&pending_id, &text).err().unwrap_or_default();
    // Apply to a copy first: only an event the engine accepts enters the log.
    engine.apply(&event).context("the engine refused the answer")?;
    let messages = match &request {
        Request::Plan { messages, .. } | Request::Code { messages, .. } => messages.clone(),
        _ => vec![],
    };
    let model = store.meta_str(MetaKey::BrainNote)?.unwrap_or_else(|| "agent".into());
    store.transaction(|store| -> anyhow::Result<()> {
        store.record_exchange(&ExchangeRow {
            request_id: Some(pending_id.clone()),
            role: request.role().to_string(),
            provider: "agent".into(),
            model: model.clone(),
            key: String::new(),
            prompt: serde_json::to_value(&messages)?,
            answer: Some(json!({"text": text})),
            attempts: 1,
            ..Default::default()
        })?;
        store.append_event(event.kind(), &serde_json::to_value(&event)?)?;
        // The request row exists when the driver stopped on it; an agent may also answer a
        // request that was never shown (e.g. straight after a crash), so a missing row is no error.
        let _ = store.set_request_state(&pending_id, RequestState::Answered);
        Ok(())
    })?;
    Ok(errors)
}
