//! Row types: what callers put in and get out. JSON bodies stay `serde_json::Value`.

use serde::{Deserialize, Serialize};

/// One entry of the event log, the run's truth that the engine replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    /// Position in the log, from 1, assigned by [`crate::RunStore::append_event`]; replay goes in this order.
    pub seq: i64,
    /// When it was appended: seconds since the Unix epoch, three decimals, as text.
    pub at: String,
    /// The event's kind as the caller names it (the engine's event tag, e.g. `started`).
    pub kind: String,
    /// The event itself, JSON as the caller serialized it.
    pub body: serde_json::Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
/// Where a recorded request stands.
#[serde(rename_all = "snake_case")]
pub enum RequestState {
    /// Emitted by the engine and not answered yet (what an external agent is asked to answer).
    Pending,
    /// Its answer is in the event log.
    Answered,
    /// Marked failed by the caller: it will not be answered.
    Failed,
    /// Withdrawn by the caller before an answer came.
    Cancelled,
}

impl RequestState {
    /// The spelling stored in the `state` column: `pending`, `answered`, `failed`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::Pending => "pending",
            RequestState::Answered => "answered",
            RequestState::Failed => "failed",
            RequestState::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<RequestState> {
        [
            RequestState::Pending,
            RequestState::Answered,
            RequestState::Failed,
            RequestState::Cancelled,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// A request the engine emitted, as [`crate::RunStore::put_request`] recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    /// The request's id, chosen by the caller; unique in the run.
    pub id: String,
    /// Who answers it: `planner`, `coder`, `evaluator` (the engine's `Request::role`).
    pub role: String,
    /// The request itself, JSON as the caller serialized it.
    pub body: serde_json::Value,
    /// Pending, answered, failed or cancelled.
    pub state: RequestState,
    /// When it was recorded: seconds since the Unix epoch, three decimals, as text.
    pub created_at: String,
}

/// One LLM call: the prompt, the answer (or the error), usage, cost and latency.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExchangeRow {
    /// The row's id, assigned by the store; `None` in a row not yet recorded.
    pub id: Option<i64>,
    /// The engine request it answered; `None` for a call outside one.
    pub request_id: Option<String>,
    /// The brain's role in the call (`planner`, `coder`).
    pub role: String,
    /// The provider that served it, as configured (`tuner` for the knob tuner's answers).
    pub provider: String,
    /// The model that answered (`tuner` for the knob tuner).
    pub model: String,
    /// Content key of the request (see ksearch-llm's `request_key`).
    pub key: String,
    /// The request as sent (messages and settings), JSON.
    pub prompt: serde_json::Value,
    /// The response, JSON; `None` when the call failed (see `error`).
    pub answer: Option<serde_json::Value>,
    /// Why the model stopped (`stop`, `length`); `None` when there is no answer.
    pub finish_reason: Option<String>,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Completion tokens, reasoning ones included.
    pub output_tokens: u64,
    /// Prompt tokens served from the vendor's cache.
    pub cached_input_tokens: u64,
    /// Output tokens spent on hidden reasoning.
    pub reasoning_tokens: u64,
    /// What the call cost in US dollars; `None` when the model's price is unknown.
    pub cost_dollars: Option<f64>,
    /// Wall time of the call in seconds, retries and waits included.
    pub latency_s: f64,
    /// HTTP attempts made, 1 when the first succeeded.
    pub attempts: u32,
    /// The answer came from the cache or a replay, not from the vendor.
    pub from_cache: bool,
    /// Why the call failed, if it did.
    pub error: Option<String>,
}

type ExchangeParts = (ExchangeRow, String, Option<String>);

pub(crate) fn exchange_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExchangeParts> {
    Ok((
        ExchangeRow {
            id: Some(r.get(0)?),
            request_id: r.get(1)?,
            role: r.get(2)?,
            provider: r.get(3)?,
            model: r.get(4)?,
            key: r.get(5)?,
            prompt: serde_json::Value::Null,
            answer: None,
            finish_reason: r.get(8)?,
            input_tokens: r.get::<_, i64>(9)?.max(0) as u64,
            output_tokens: r.get::<_, i64>(10)?.max(0) as u64,
            cached_input_tokens: r.get::<_, i64>(11)?.max(0) as u64,
            reasoning_tokens: r.get::<_, i64>(12)?.max(0) as u64,
            cost_dollars: r.get(13)?,
            latency_s: r.get(14)?,
            attempts: r.get::<_, i64>(15)?.max(0) as u32,
            from_cache: r.get(16)?,
            error: r.get(17)?,
        },
        r.get(6)?,
        r.get(7)?,
    ))
}

/// A candidate solution the engine produced, with its lineage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRow {
    /// The engine's id of the candidate.
    pub id: i64,
    /// The candidate this one was derived from.
    pub parent_id: Option<i64>,
    /// The world-model node it implements.
    pub node_id: Option<String>,
    /// The engine's round it was written in.
    pub round: u32,
    /// The engine's cycle it was written in (a cycle works on one world-model node).
    pub cycle: u32,
    /// Who wrote it: `seed`, `coder`, `tuner`, `user`.
    pub origin: String,
    /// The kernel language of its sources, as the task names it (`cuda`, `triton`).
    pub language: String,
    /// The solution's source files, as JSON.
    pub sources: serde_json::Value,
}

type CandidateParts = (CandidateRow, String);

pub(crate) fn candidate_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CandidateParts> {
    Ok((
        CandidateRow {
            id: r.get(0)?,
            parent_id: r.get(1)?,
            node_id: r.get(2)?,
            round: r.get(3)?,
            cycle: r.get(4)?,
            origin: r.get(5)?,
            language: r.get(6)?,
            sources: serde_json::Value::Null,
        },
        r.get(7)?,
    ))
}

/// One evaluation of a candidate by the referee.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationRow {
    /// The row's id, assigned by the store; `None` in a row not yet added.
    pub id: Option<i64>,
    /// The [`CandidateRow::id`] it evaluated.
    pub candidate_id: i64,
    /// `search` (during the run) or `final` (the re-measurement of the top candidates).
    pub purpose: String,
    /// The record's overall status as text (e.g. `passed`), kept in a column for queries.
    pub status: String,
    /// Speedup over the reference, from the record; `None` when the candidate did not pass.
    pub speedup: Option<f64>,
    /// The whole evaluation record: per-workload results, raw samples, provenance.
    pub record: serde_json::Value,
}

/// One version of the world model; versions are only added, never overwritten.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorldModelRow {
    /// Its version, from 1, assigned by [`crate::RunStore::add_world_model`].
    pub version: i64,
    /// The engine's round it was made in.
    pub round: u32,
    /// What produced it, as the caller names it (`init`, `refine`).
    pub cause: String,
    /// The world model itself, JSON.
    pub body: serde_json::Value,
}
