//! What the run spent: after each event (the timeline of the charts), in all (LLM calls, tokens,
//! dollars, evaluations), and per model.

use crate::model::*;
use ksearch_search::engine::Event;
use ksearch_store::{EvaluationRow, EventRow, ExchangeRow};
use std::collections::{HashMap, HashSet};

/// What the run had spent after each event (`events[i]` and `rows[i]` are the same event).
///
/// An evaluation counts at its `evaluated` event, with the wall time of its record: the n-th
/// `evaluated` event of a candidate is its n-th evaluation row (the driver writes the row, then
/// the event). An LLM exchange counts at the event that answered its request, or failed it;
/// exchanges of a request no event has answered yet (a call in flight, a request held back
/// when the endpoint went down) count in the run's totals only.
pub(super) fn spending(
    events: &[Event],
    rows: &[EventRow],
    exchanges: &[ExchangeRow],
    evaluations: &[EvaluationRow],
) -> Vec<Spent> {
    let mut llm_by_request: HashMap<&str, (f64, u64)> = HashMap::new();
    for x in exchanges.iter().filter(|x| is_llm(x)) {
        if let Some(id) = x.request_id.as_deref() {
            let e = llm_by_request.entry(id).or_default();
            e.0 += x.cost_dollars.unwrap_or(0.0);
            e.1 += x.input_tokens + x.output_tokens;
        }
    }
    let mut rows_of: HashMap<i64, Vec<&EvaluationRow>> = HashMap::new();
    for e in evaluations {
        rows_of.entry(e.candidate_id).or_default().push(e);
    }
    let mut evaluated_of: HashMap<i64, usize> = HashMap::new();
    // A request is answered once; its exchanges must not count again if an event repeats it.
    let mut counted: HashSet<&str> = HashSet::new();
    let start = rows.first().and_then(|r| r.at.parse::<f64>().ok());
    let mut now = Spent::default();
    let mut out = Vec::with_capacity(events.len());
    for (event, row) in events.iter().zip(rows) {
        if let (Some(t0), Ok(t)) = (start, row.at.parse::<f64>()) {
            now.wall_seconds = (t - t0).max(now.wall_seconds);
        }
        match event {
            Event::Evaluated { candidate_id, .. } => {
                now.evaluations += 1;
                let n = evaluated_of.entry(*candidate_id).or_default();
                let seconds = rows_of
                    .get(candidate_id)
                    .and_then(|r| r.get(*n))
                    .and_then(|r| r.record["wall_seconds"].as_f64());
                *n += 1;
                now.device_seconds += seconds.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(0.0);
            }
            Event::PlannerAnswered { request_id, .. }
            | Event::CoderAnswered { request_id, .. }
            | Event::RequestFailed { request_id, .. } => {
                if counted.insert(request_id.as_str()) {
                    if let Some((dollars, tokens)) = llm_by_request.get(request_id.as_str()) {
                        now.dollars += dollars;
                        now.tokens += tokens;
                    }
                }
            }
            Event::Started { .. } | Event::BudgetRaised { .. } => {}
        }
        out.push(now);
    }
    out
}

/// The tuner's and an agent's answers are recorded like exchanges but are not LLM calls.
fn is_llm(x: &ExchangeRow) -> bool {
    x.provider != "tuner" && x.provider != "agent"
}

/// The kind of an LLM error, from its message (the store keeps the message only; the patterns
/// are the wording of ksearch-llm's `LlmError`).
pub(super) fn error_kind(message: &str) -> String {
    let m = message.to_ascii_lowercase();
    let http = || {
        m.split("http ")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .filter(|code| code.len() == 3)
            .map(|code| format!("HTTP {code}"))
    };
    if m.contains("api key variable") && m.contains("is not set") {
        "missing API key".into()
    } else if m.contains("refused the api key") {
        "API key refused".into()
    } else if m.contains("budget exhausted") {
        "budget exhausted".into()
    } else if m.contains("no answer within") || m.contains("timed out") {
        "timeout".into()
    } else if m.contains("cannot reach") {
        "unreachable".into()
    } else if m.contains("connection to") && m.contains("broke") {
        "connection broke".into()
    } else if m.contains("not in the expected format") {
        "malformed answer".into()
    } else if m.contains("no recorded answer") {
        "no recorded answer (replay)".into()
    } else if m.starts_with("configuration:") {
        "configuration".into()
    } else if m.contains("was rejected (http") {
        format!("rejected ({})", http().unwrap_or_else(|| "HTTP 4xx".into()))
    } else if let Some(code) = http() {
        code
    } else {
        "other".into()
    }
}

pub(super) fn budget(
    exchanges: &[ExchangeRow],
    evaluations: &[EvaluationRow],
    device_kind: &str,
    wall_seconds: f64,
) -> Budget {
    let llm: Vec<&ExchangeRow> = exchanges.iter().filter(|x| is_llm(x)).collect();
    let calls = llm.iter().filter(|x| x.answer.is_some()).count();
    let mut llm_errors: Vec<Count> = Vec::new();
    for x in llm.iter().filter(|x| x.answer.is_none()) {
        let kind = error_kind(x.error.as_deref().unwrap_or(""));
        match llm_errors.iter_mut().find(|c| c.what == kind) {
            Some(c) => c.count += 1,
            None => llm_errors.push(Count { what: kind, count: 1 }),
        }
    }
    llm_errors.sort_by_key(|c| std::cmp::Reverse(c.count));
    Budget {
        llm_calls: calls,
        failed_llm_calls: llm.len() - calls,
        input_tokens: llm.iter().map(|x| x.input_tokens).sum(),
        output_tokens: llm.iter().map(|x| x.output_tokens).sum(),
        cached_input_tokens: llm.iter().map(|x| x.cached_input_tokens).sum(),
        reasoning_tokens: llm.iter().map(|x| x.reasoning_tokens).sum(),
        cached_answers: llm.iter().filter(|x| x.answer.is_some() && x.from_cache).count(),
        // + 0.0: an empty sum of floats is -0.0, which prints as "-0.0".
        dollars: llm.iter().filter_map(|x| x.cost_dollars).sum::<f64>() + 0.0,
        unpriced_calls: llm
            .iter()
            .filter(|x| x.answer.is_some() && x.cost_dollars.is_none())
            .count(),
        llm_errors,
        last_llm_error: llm
            .iter()
            .rev()
            .find(|x| x.answer.is_none())
            .and_then(|x| x.error.clone()),
        evaluations: evaluations.len(),
        device_seconds: evaluations
            .iter()
            .filter_map(|e| e.record["wall_seconds"].as_f64())
            .sum::<f64>()
            + 0.0,
        device_kind: device_kind.to_string(),
        wall_seconds,
    }
}

pub(super) fn model_usage(exchanges: &[ExchangeRow]) -> Vec<ModelUsage> {
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
                    cached_input_tokens: 0,
                    reasoning_tokens: 0,
                    from_cache: 0,
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
        u.cached_input_tokens += x.cached_input_tokens;
        u.reasoning_tokens += x.reasoning_tokens;
        u.from_cache += (x.answer.is_some() && x.from_cache) as usize;
        u.dollars += x.cost_dollars.unwrap_or(0.0);
        u.latency_s += x.latency_s;
    }
    out
}
