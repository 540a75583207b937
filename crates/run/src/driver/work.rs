//! What the driver's workers do, and what the driver does before and after them: an LLM call,
//! an evaluation on a leased device. Workers never touch the run store (the driver's loop is
//! its only writer); they hand back a [`Done`] with everything to record.

use crate::executor::{ExecError, Leased, Unavailable};
use crate::summary::summarize;
use ksearch_eval::{EvalError, Evaluation};
use ksearch_llm::{ChatRequest, LlmClient, LlmError, Message};
use ksearch_search::engine::{EvalSummary, Event, Purpose};
use ksearch_store::{EvaluationRow, ExchangeRow, RunStore};

/// A request's outcome, for the driver's loop to record and turn into an event.
// `Event::Started` carries the whole task brief; a `Done` is made once per request and mostly
// travels boxed (`Dispatch::Ready`), so the size of that variant costs next to nothing.
#[allow(clippy::large_enum_variant)]
pub enum Done {
    /// Known without a worker: a recorded evaluation, an answer stored before a crash, a
    /// candidate that cannot be a solution, a crashed worker.
    Event(Event),
    /// The tuner's answer, with its exchange row (recorded with the event, in one step).
    Tuner { row: Box<ExchangeRow>, event: Event },
    /// An LLM call, with its exchange row (recorded whatever became of the request).
    Llm {
        request_id: String,
        plan: bool,
        row: Box<ExchangeRow>,
        answer: Result<String, LlmFailure>,
    },
    /// An evaluation, with the device it ran on.
    Evaluation {
        request_id: String,
        candidate_id: i64,
        purpose: Purpose,
        device: Leased,
        result: Box<Result<Evaluation, ExecError>>,
    },
}

/// Why an LLM call failed.
#[derive(Debug, Clone)]
pub struct LlmFailure {
    pub error: String,
    /// What retrying cannot fix (budget, key, model, configuration): ends the search.
    pub fatal: bool,
    /// The LLM budget is spent (a fatal failure the run's stop record names apart).
    pub budget: bool,
    /// The endpoint refused the credentials (HTTP 401/403, or no key): the run stops with the
    /// request unanswered, so `resume` asks it again once the key works.
    pub auth: bool,
    /// The endpoint failed (HTTP 5xx or 429, timeout, connection) after the client's retries:
    /// a sign that it is down, unlike a refused request or an odd answer.
    pub endpoint: bool,
}

impl Done {
    /// The failure of an LLM call that ends the search, if this is one.
    pub fn fatal_llm_failure(&self) -> Option<&LlmFailure> {
        match self {
            Done::Llm { answer: Err(f), .. } if f.fatal => Some(f),
            _ => None,
        }
    }

    /// For an LLM call: `Ok` when it answered, `Err` with the error when the endpoint failed
    /// after its retries; `None` for anything else (no LLM call, a fatal failure, a refused
    /// request or an odd answer, which say nothing about whether the endpoint is up).
    pub fn llm_outcome(&self) -> Option<Result<(), String>> {
        match self {
            Done::Llm { answer: Ok(_), .. } => Some(Ok(())),
            Done::Llm { answer: Err(f), .. } if f.endpoint && !f.fatal => Some(Err(f.error.clone())),
            _ => None,
        }
    }

    /// The executor that became unavailable under this evaluation, if it did: the evaluation was
    /// not judged, so it is not recorded (its request stays outstanding for `resume`).
    pub fn executor_unavailable(&self) -> Option<&Unavailable> {
        match self {
            Done::Evaluation { result, .. } => match result.as_ref() {
                Err(ExecError::Unavailable(u)) => Some(u),
                _ => None,
            },
            _ => None,
        }
    }

    /// The refusal of an LLM call's credentials, if this is one.
    pub fn auth_failure(&self) -> Option<&LlmFailure> {
        match self {
            Done::Llm { answer: Err(f), .. } if f.auth => Some(f),
            _ => None,
        }
    }

    /// Keeps an LLM call's exchange (its prompt, error and attempts) in the store without
    /// answering its request.
    pub fn record_exchange_only(self, store: &RunStore) -> anyhow::Result<()> {
        if let Done::Llm { row, .. } = self {
            store.record_exchange(&row)?;
        }
        Ok(())
    }

    pub fn request_id(&self) -> &str {
        match self {
            Done::Event(e) | Done::Tuner { event: e, .. } => event_request_id(e).unwrap_or(""),
            Done::Llm { request_id, .. } | Done::Evaluation { request_id, .. } => request_id,
        }
    }

    /// Writes what the work produced to the store and returns the event that answers its
    /// request.
    pub fn record(self, store: &RunStore) -> anyhow::Result<Event> {
        Ok(match self {
            Done::Event(e) => e,
            Done::Tuner { row, event } => {
                store.record_exchange(&row)?;
                event
            }
            Done::Llm {
                request_id,
                plan,
                row,
                answer,
            } => {
                store.record_exchange(&row)?;
                match answer {
                    Ok(text) if plan => Event::PlannerAnswered { request_id, text },
                    Ok(text) => Event::CoderAnswered { request_id, text },
                    Err(LlmFailure { error, fatal, .. }) => Event::RequestFailed {
                        request_id,
                        error,
                        fatal,
                    },
                }
            }
            Done::Evaluation {
                request_id,
                candidate_id,
                purpose,
                device,
                result,
            } => match *result {
                Ok(evaluation) => {
                    let summary = summarize(&evaluation);
                    let mut record = serde_json::to_value(&evaluation).unwrap_or_default();
                    // The pool's name for the device (the record's provenance has the
                    // harness's view of it, `cuda:K` as this process numbers the GPUs), and the
                    // GPU's UUID, which names it whatever the numbering.
                    record["leased_device"] = serde_json::json!(device.label);
                    if let Some(uuid) = device.uuid {
                        record["leased_device_uuid"] = serde_json::json!(uuid);
                    }
                    if let Some(node) = &device.node {
                        record["node"] = serde_json::json!(node);
                    }
                    store.add_evaluation(&EvaluationRow {
                        id: None,
                        candidate_id,
                        purpose: purpose.as_str().into(),
                        status: summary.status.clone(),
                        speedup: summary.speedup,
                        record,
                    })?;
                    Event::Evaluated {
                        request_id,
                        candidate_id,
                        summary,
                    }
                }
                Err(ExecError::Eval(EvalError::Task(p))) => Event::RequestFailed {
                    request_id,
                    error: format!("the task is unusable: {p}"),
                    fatal: true,
                },
                Err(ExecError::Unavailable(u)) => {
                    anyhow::bail!("internal: an evaluation the executor never judged reached the store ({u})")
                }
                Err(ExecError::Eval(e)) => Event::RequestFailed {
                    request_id,
                    error: format!("the evaluator cannot run: {e}"),
                    fatal: true,
                },
            },
        })
    }
}

/// The request an event answers (`None` for `started` and `budget_raised`).
pub fn event_request_id(e: &Event) -> Option<&str> {
    match e {
        Event::Started { .. } | Event::BudgetRaised { .. } => None,
        Event::PlannerAnswered { request_id, .. }
        | Event::CoderAnswered { request_id, .. }
        | Event::Evaluated { request_id, .. }
        | Event::RequestFailed { request_id, .. } => Some(request_id),
    }
}

/// The summary of a candidate that cannot even be made into a solution.
pub fn rejected(reason: String) -> EvalSummary {
    EvalSummary::failure("rejected", reason)
}

/// An answer recorded for `request_id` before a crash (never turned into an event): used as
/// is, so a resumed run does not pay for it twice.
pub fn answered_before(store: &RunStore, request_id: &str) -> anyhow::Result<Option<String>> {
    Ok(store
        .answer_for_request(request_id)?
        .and_then(|a| serde_json::from_value::<ksearch_llm::ChatResponse>(a).ok())
        .map(|r| r.text))
}

/// One LLM call (on a worker). `Err` when it failed: fatal for what retrying
/// cannot fix (keys, models, budgets, replay gaps).
pub async fn call_llm(
    client: &LlmClient,
    request_id: &str,
    messages: Vec<Message>,
) -> (ExchangeRow, Result<String, LlmFailure>) {
    let request = ChatRequest {
        messages,
        ..Default::default()
    };
    let key = client.key(&request);
    let prompt = serde_json::to_value(&request.messages).unwrap_or_default();
    let config = client.config();
    let result = client.complete(&request).await;
    let mut row = ExchangeRow {
        request_id: Some(request_id.to_string()),
        role: client.role().to_string(),
        provider: config.name.clone(),
        model: config.model.clone(),
        key,
        prompt,
        ..Default::default()
    };
    let outcome = match result {
        Ok(c) => {
            row.answer = serde_json::to_value(&c.response).ok();
            row.finish_reason = Some(format!("{:?}", c.response.finish_reason).to_lowercase());
            row.input_tokens = c.response.usage.input_tokens;
            row.output_tokens = c.response.usage.output_tokens;
            row.cached_input_tokens = c.response.usage.cached_input_tokens;
            row.reasoning_tokens = c.response.usage.reasoning_tokens;
            row.cost_dollars = c.cost_dollars;
            row.latency_s = c.response.latency.as_secs_f64();
            row.attempts = c.response.attempts;
            row.from_cache = c.from_cache;
            Ok(c.response.text)
        }
        Err(e) => {
            row.error = Some(e.to_string());
            row.attempts = e.attempts().unwrap_or(0);
            // What retrying cannot fix ends the run; a bad or odd answer is just a failed try.
            let fatal = matches!(
                e,
                LlmError::Budget(_)
                    | LlmError::Auth { .. }
                    | LlmError::NotFound { .. }
                    | LlmError::MissingKey { .. }
                    | LlmError::Config(_)
                    | LlmError::NoRecordedAnswer { .. }
            );
            Err(LlmFailure {
                error: e.to_string(),
                fatal,
                budget: matches!(e, LlmError::Budget(_)),
                auth: e.is_auth(),
                endpoint: e.is_transient(),
            })
        }
    };
    (row, outcome)
}
