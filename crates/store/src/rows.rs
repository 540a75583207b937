//! Row types: what callers put in and get out. JSON bodies stay `serde_json::Value`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub seq: i64,
    pub at: String,
    pub kind: String,
    pub body: serde_json::Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestState {
    Pending,
    Answered,
    Failed,
    Cancelled,
}

impl RequestState {
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    pub id: String,
    pub role: String,
    pub body: serde_json::Value,
    pub state: RequestState,
    pub created_at: String,
}

/// One LLM call: the prompt, the answer (or the error), usage, cost and latency.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExchangeRow {
    pub id: Option<i64>,
    pub request_id: Option<String>,
    pub role: String,
    pub provider: String,
    pub model: String,
    /// Content key of the request (see ksearch-llm's `request_key`).
    pub key: String,
    pub prompt: serde_json::Value,
    pub answer: Option<serde_json::Value>,
    pub finish_reason: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub reasoning_tokens: u64,
    pub cost_dollars: Option<f64>,
    pub latency_s: f64,
    pub attempts: u32,
    pub from_cache: bool,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRow {
    /// The engine's id of the candidate.
    pub id: i64,
    /// The candidate this one was derived from.
    pub parent_id: Option<i64>,
    /// The world-model node it implements.
    pub node_id: Option<String>,
    pub round: u32,
    pub cycle: u32,
    /// Who wrote it: `seed`, `coder`, `tuner`, `user`.
    pub origin: String,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationRow {
    pub id: Option<i64>,
    pub candidate_id: i64,
    /// `search` (during the run) or `final` (the re-measurement of the top candidates).
    pub purpose: String,
    pub status: String,
    pub speedup: Option<f64>,
    /// The whole evaluation record: per-workload results, raw samples, provenance.
    pub record: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorldModelRow {
    pub version: i64,
    pub round: u32,
    pub cause: String,
    pub body: serde_json::Value,
}
