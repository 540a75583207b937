//! Agent mode: an external coding agent (Claude Code, Codex, Cursor, ...) answers the planner's
//! and coder's requests with its own model. `next` shows the pending request; `submit` records
//! the answer, lets the engine go on (evaluations run here) and stops at the next request for
//! the agent. A run with `--parallel` above 1 (evolve) can wait on several requests at once:
//! `next` then lists them all, and `submit` answers any one of them by id.

use crate::brains::BrainSpec;
use crate::driver::answer_format;
use crate::run_cmd::{drive, drive_quietly, load_events, Outcome};
use anyhow::{bail, Context};
use ksearch_llm::LlmConfig;
use ksearch_search::engine::{Engine, Event, Request};
use ksearch_spec::Task;
use ksearch_store::{ExchangeRow, RequestState, RunStore};
use serde_json::json;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub(crate) enum AgentCommand {
    /// Print the request waiting for the agent: its id, role, prompt and expected answer (every
    /// one of them when several wait at once).
    Next {
        run_dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Answer a pending request with the text in FILE (`-` for standard input).
    Submit {
        run_dir: PathBuf,
        request_id: String,
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// The requests an agent must answer now (oldest first, at least one), from the run's log.
pub(crate) fn pending_for_agent(run_dir: &Path) -> anyhow::Result<(RunStore, Engine, Vec<Request>)> {
    let store = RunStore::open(run_dir)?;
    let brain: BrainSpec = serde_json::from_value(store.meta("brain")?.context("the run has no recorded brain")?)?;
    if brain != BrainSpec::Agent {
        bail!(
            "{}: this run is served by {}, not by an agent",
            run_dir.display(),
            brain.describe()
        );
    }
    let engine = Engine::replay(&load_events(&store)?).context("the run's event log does not replay")?;
    let requests: Vec<Request> = engine
        .in_flight()
        .into_iter()
        .filter(|r| matches!(r, Request::Plan { .. } | Request::Code { .. }))
        .cloned()
        .collect();
    if requests.is_empty() {
        match engine.pending() {
            Some(Request::Finished { reason, .. }) => bail!("the run is finished ({reason}); nothing to answer"),
            Some(_) => bail!(
                "the run is between steps (an evaluation is pending); continue it with `ksearch resume {}`",
                run_dir.display()
            ),
            None => bail!("the run has not started"),
        }
    }
    Ok((store, engine, requests))
}

/// What `agent next --json` and MCP's next_request print: the oldest request's fields, and
/// when several wait at once, all of them under `requests` too.
pub(crate) fn requests_json(requests: &[Request]) -> serde_json::Value {
    let mut body = requests.first().map(request_json).unwrap_or_default();
    if requests.len() > 1 {
        body["requests"] = requests.iter().map(request_json).collect();
    }
    body
}

/// The pending request as JSON for an agent.
pub(crate) fn request_json(request: &Request) -> serde_json::Value {
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

/// Records `text` as the answer to `request_id` (also used by the MCP server). The run goes on
/// with [`continue_run`] or [`continue_quietly`].
pub(crate) fn submit_answer(run_dir: &Path, request_id: &str, text: String) -> anyhow::Result<()> {
    let (store, mut engine, requests) = pending_for_agent(run_dir)?;
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
    // Apply to a copy first: only an event the engine accepts enters the log.
    engine.apply(&event).context("the engine refused the answer")?;
    let messages = match &request {
        Request::Plan { messages, .. } | Request::Code { messages, .. } => messages.clone(),
        _ => vec![],
    };
    store.record_exchange(&ExchangeRow {
        request_id: Some(pending_id.clone()),
        role: request.role().to_string(),
        provider: "agent".into(),
        model: "agent".into(),
        key: String::new(),
        prompt: serde_json::to_value(&messages)?,
        answer: Some(json!({"text": text})),
        attempts: 1,
        ..Default::default()
    })?;
    store.append_event(event.kind(), &serde_json::to_value(&event)?)?;
    // The request row exists when the driver stopped on it; an agent may also answer a request
    // that was never shown (e.g. straight after a crash), so a missing row is not an error.
    let _ = store.set_request_state(&pending_id, RequestState::Answered);
    Ok(())
}

pub(crate) fn run(command: &AgentCommand) -> anyhow::Result<u8> {
    match command {
        AgentCommand::Next {
            run_dir,
            json: json_out,
        } => {
            let (_, engine, requests) = pending_for_agent(run_dir)?;
            if *json_out {
                println!("{}", requests_json(&requests));
                return Ok(0);
            }
            if requests.len() > 1 {
                println!(
                    "{} requests wait for an answer; answer them in any order\n",
                    requests.len()
                );
            }
            for request in &requests {
                let body = request_json(request);
                // With one request, its round is the engine's; with several, each has its own.
                let id = request.id().unwrap_or("-");
                let round = engine.round_of(id).unwrap_or(engine.round());
                println!("request {id} for the {} (round {round})", request.role());
                println!("answer format: {}", answer_format(request));
                for m in body["messages"].as_array().into_iter().flatten() {
                    println!(
                        "\n----- {} -----\n{}",
                        m["role"].as_str().unwrap_or(""),
                        m["content"].as_str().unwrap_or("")
                    );
                }
                println!(
                    "\nanswer with: ksearch agent submit {} {id} ANSWER_FILE",
                    run_dir.display()
                );
            }
            Ok(0)
        }
        AgentCommand::Submit {
            run_dir,
            request_id,
            file,
            json,
        } => {
            let text = if file.as_os_str() == "-" {
                let mut t = String::new();
                std::io::stdin()
                    .read_to_string(&mut t)
                    .context("cannot read the answer from standard input")?;
                t
            } else {
                std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
            };
            submit_answer(run_dir, request_id, text)?;
            continue_run(run_dir, *json)
        }
    }
}

/// Serves everything ksearch can serve itself (evaluations) up to the next agent request.
pub(crate) fn continue_run(run_dir: &Path, json_out: bool) -> anyhow::Result<u8> {
    let (store, task) = open_with_task(run_dir)?;
    drive(
        run_dir,
        store,
        &task,
        &BrainSpec::Agent,
        &LlmConfig::default(),
        json_out,
    )
}

/// Like [`continue_run`], but returns the outcome instead of printing it (for the MCP server);
/// progress goes to stderr unless `quiet`.
pub(crate) fn continue_quietly(run_dir: &Path, quiet: bool) -> anyhow::Result<Outcome> {
    let (store, task) = open_with_task(run_dir)?;
    drive_quietly(run_dir, store, &task, &BrainSpec::Agent, &LlmConfig::default(), quiet)
}

/// The run's store and the task it records.
fn open_with_task(run_dir: &Path) -> anyhow::Result<(RunStore, Task)> {
    let store = RunStore::open(run_dir)?;
    let task_arg: String = serde_json::from_value(store.meta("task")?.context("the run has no recorded task")?)?;
    let task = Task::load(&task_arg).with_context(|| format!("the run's task '{task_arg}'"))?;
    Ok((store, task))
}
