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
use ksearch_store::{EvaluationRow, EventRow, ExchangeRow, MetaKey, RunStore, StopReason, StopRecord};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// A run that has written no event for this long, and recorded no stop, is shown as stalled
/// rather than live: a search step (an LLM answer, a compile and timing) takes seconds to a few
/// minutes, so a quarter of an hour of silence means the process is most likely gone (killed,
/// crashed, the machine rebooted) without a chance to record why.
pub const STALLED_AFTER_S: f64 = 15.0 * 60.0;

/// Reads a run directory into a report model, as of now.
pub fn load(run_dir: &Path) -> Result<RunReport, ReportError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    load_at(run_dir, now)
}

/// Reads a run directory into a report model as of `now` (seconds since the Unix epoch): the
/// time against which a run's silence is measured.
pub fn load_at(run_dir: &Path, now: f64) -> Result<RunReport, ReportError> {
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

    let meta = |key: MetaKey| store.meta(key).ok().flatten();
    let brain = brain(meta(MetaKey::Brain));
    let origins: HashMap<i64, String> = candidate_rows.iter().map(|c| (c.id, c.origin.clone())).collect();
    let timeline = spending(&events, &rows, &exchanges, &evaluations);
    let mut attempts = attempts(&engine, &origins, failed_code, &brain.kind, &events, &timeline);
    let devices = device_groups(&evaluations);
    // The device of each candidate's search evaluation (the latest, should there be several).
    let device_of_candidate: HashMap<i64, String> = evaluations
        .iter()
        .filter(|e| e.purpose == "search")
        .map(|e| (e.candidate_id, device_of(&e.record).label()))
        .collect();
    for a in &mut attempts {
        a.device = a.candidate.and_then(|c| device_of_candidate.get(&c).cloned());
    }
    let times: Vec<f64> = rows.iter().filter_map(|r| r.at.parse::<f64>().ok()).collect();
    let wall_seconds = match (times.first(), times.last()) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    };

    let stop = store.stop_record().ok().flatten();
    let stop_reason = stop.as_ref().map(|s| s.reason.clone());
    let mut state = run_state(&engine, stop, times.last().copied(), now);
    state.resume = resume_hint(&state.kind, stop_reason.as_ref(), run_dir);
    let best_id = match engine.pending() {
        Some(Request::Finished { best_candidate, .. }) => *best_candidate,
        _ => engine.best().map(|b| b.id),
    };
    let best = best_id.and_then(|id| best_kernel(&engine, id, &evaluations, &origins));
    let record = best_id
        .and_then(|id| latest_record(&evaluations, id))
        .or_else(|| evaluations.last().map(|e| &e.record));
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
        brain,
        state,
        round: engine.round(),
        rounds: engine.config().rounds,
        cycles: engine.cycle_count(),
        events: rows.len(),
        budget: budget(&exchanges, &evaluations, device_kind, wall_seconds),
        models: model_usage(&exchanges),
        best,
        tree: tree(&engine, best_id),
        provenance,
        devices,
        outcomes: outcomes(&attempts),
        attempts,
    })
}

/// What a stop reason means, for people; a reason without words (one a newer ksearch wrote,
/// say) as it is spelled.
fn stop_words(reason: &StopReason) -> &str {
    match reason {
        StopReason::Budget => "the LLM budget ran out",
        StopReason::Fatal => "a request failed for good",
        StopReason::LlmUnavailable => "the LLM endpoint was unavailable",
        StopReason::LlmRefused => "the LLM endpoint refused the credentials",
        StopReason::ExecutorUnavailable => "the executor became unavailable",
        StopReason::AwaitingEvaluation => "waiting for `ksearch evaluate`",
        StopReason::Interrupted => "interrupted",
        StopReason::Error => "ksearch failed",
        other @ (StopReason::Finished | StopReason::AwaitingAgent | StopReason::Other(_)) => other.as_str(),
    }
}

/// Whether the run is finished, stopped, waiting, live or silent, from the engine's state, the
/// driver's stop record and the time of the last event.
fn run_state(engine: &Engine, stop: Option<StopRecord>, last_event_at: Option<f64>, now: f64) -> RunState {
    let at = |t: f64| format!(" at {}", utc(t));
    let state = |kind: &str, text: String, detail: Option<String>| RunState {
        finished: kind == "finished" || matches!(engine.pending(), Some(Request::Finished { .. })),
        kind: kind.to_string(),
        text,
        detail,
        last_event_at,
        resume: None,
    };
    let silent_for = last_event_at.map(|t| (now - t).max(0.0));
    let silence = |s: f64| format!("no progress for {}", minutes(s));
    match (engine.pending(), stop) {
        (Some(Request::Finished { reason, .. }), stop) => {
            let when = last_event_at.map(at).unwrap_or_default();
            match stop.filter(|s| matches!(s.reason, StopReason::Budget | StopReason::Fatal)) {
                // The engine wound up (re-measured, picked the best) after a failure that ended
                // the search early: finished, but not by running its course.
                Some(s) => state(
                    "stopped",
                    format!("stopped: {}{when}", stop_words(&s.reason)),
                    s.detail.or(Some(reason.clone())),
                ),
                None => state("finished", format!("finished: {reason}{when}"), None),
            }
        }
        (Some(r), Some(s)) if s.reason == StopReason::AwaitingAgent => {
            let mut text = format!("waiting for the agent to answer the {}", r.role());
            if let Some(quiet) = silent_for.filter(|&q| q >= STALLED_AFTER_S) {
                text.push_str(&format!(" ({})", silence(quiet)));
            }
            state("waiting", text, None)
        }
        (Some(_), Some(s)) if s.reason == StopReason::AwaitingEvaluation => {
            let mut text = "waiting for `ksearch evaluate` (evaluations deferred)".to_string();
            if let Some(quiet) = silent_for.filter(|&q| q >= STALLED_AFTER_S) {
                text.push_str(&format!(" ({})", silence(quiet)));
            }
            state("waiting", text, s.detail.filter(|d| !d.is_empty()))
        }
        (Some(_), Some(s)) if s.reason != StopReason::Finished => {
            let detail = s.detail.filter(|d| !d.is_empty());
            state(
                "stopped",
                format!("stopped: {}{}", stop_words(&s.reason), at(s.at)),
                detail,
            )
        }
        (Some(r), _) => match silent_for.filter(|&q| q >= STALLED_AFTER_S) {
            // Nothing recorded why, and nothing has happened for long: do not claim it is live.
            Some(quiet) => state(
                "stalled",
                format!(
                    "{}, last event{} (was waiting on the {})",
                    silence(quiet),
                    last_event_at.map(at).unwrap_or_default(),
                    r.role()
                ),
                None,
            ),
            None => state("running", format!("in progress, waiting on the {}", r.role()), None),
        },
        (None, _) => state("running", "not started".into(), None),
    }
}

/// How to continue a run that stopped short, by how it stopped (`kind` of its [`RunState`],
/// and the reason the driver recorded). Only where resuming is what helps: an interrupted run,
/// one whose endpoint was down, one whose process vanished. A run stopped by its budget or by a
/// request that cannot succeed would stop again the same way.
fn resume_hint(kind: &str, reason: Option<&StopReason>, run_dir: &Path) -> Option<Resume> {
    let command = format!("ksearch resume {}", shell_word(&run_dir.display().to_string()));
    let when = match (kind, reason) {
        ("stopped", Some(StopReason::LlmUnavailable)) => {
            Some("once the endpoint answers again (nothing is lost: the request that failed last is kept unanswered)")
        }
        ("stopped", Some(StopReason::LlmRefused)) => {
            Some("once the key works (the refused request is kept unanswered)")
        }
        ("stopped", Some(StopReason::ExecutorUnavailable)) => Some(
            "once the executor is back, or with `--executor local` (the evaluations it left unjudged stay pending)",
        ),
        ("stopped", Some(StopReason::Interrupted)) => None,
        ("stalled", _) => Some("if its process is gone (killed, crashed, the machine restarted)"),
        _ => return None,
    };
    Some(Resume {
        command,
        when: when.map(str::to_string),
    })
}

/// `s` as one word for a POSIX shell: as is when it is made of harmless characters, else in
/// single quotes (a run directory may hold spaces or quotes; the command must paste as is).
fn shell_word(s: &str) -> String {
    let harmless = |c: char| c.is_ascii_alphanumeric() || "/._-+:,=@%~".contains(c);
    if !s.is_empty() && s.chars().all(harmless) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `42 minutes`, `3 h 05 min`, `2 days`.
fn minutes(seconds: f64) -> String {
    let m = (seconds / 60.0).floor() as u64;
    match m {
        0..=1 => format!("{m} minute{}", if m == 1 { "" } else { "s" }),
        2..=119 => format!("{m} minutes"),
        120..=2879 => format!("{} h {:02} min", m / 60, m % 60),
        _ => format!("{} days", m / 1440),
    }
}

/// Seconds since the Unix epoch as `2025-06-01 12:34 UTC` (the store's clock is UTC seconds).
pub(crate) fn utc(t: f64) -> String {
    chrono::DateTime::from_timestamp(t.max(0.0) as i64, 0)
        .unwrap_or_default()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// Relative spread (IQR over median) above which a measurement is flagged as noisy. The engine
/// has no fixed threshold: it counts a gain only when it exceeds the larger noise of the two
/// measurements compared (`engine::beats`), so a spread above 5% hides the few-percent steps a
/// search mostly makes. A smaller spread is still flagged when it exceeds the measurement's
/// own gain over the reference: by the engine's rule, that is no gain at all.
pub const NOISY_ABOVE: f64 = 0.05;

/// Why a measurement (speedup over the reference, IQR over median) is too noisy to take at
/// face value, or `None`.
pub fn noise_flag(speedup: Option<f64>, noise: Option<f64>) -> Option<String> {
    let n = noise.filter(|n| n.is_finite())?;
    if n > NOISY_ABOVE {
        return Some(format!(
            "noisy: the IQR is {:.1}% of the median (flagged above {:.0}%)",
            n * 100.0,
            NOISY_ABOVE * 100.0
        ));
    }
    let s = speedup.filter(|s| s.is_finite() && *s > 0.0)?;
    let gain = (s - 1.0).abs();
    (n > 0.0 && gain <= n).then(|| {
        format!(
            "within the noise: {:+.1}% against the reference with {:.1}% noise, which the engine does not count as a difference",
            (s - 1.0) * 100.0,
            n * 100.0
        )
    })
}

/// What names a failure: the first line of its reason, with the next one when the first only
/// announces it (`compilation failed:`).
fn headline(reason: Option<&str>) -> String {
    let mut lines = reason.unwrap_or("").lines().map(str::trim).filter(|l| !l.is_empty());
    match (lines.next(), lines.next()) {
        (None, _) => "no reason given".to_string(),
        (Some(first), Some(next)) if first.ends_with(':') => format!("{first} {next}"),
        (Some(first), _) => first.to_string(),
    }
}

/// Attempts per status and the most common failure.
fn outcomes(attempts: &[Attempt]) -> Outcomes {
    let mut by_status: Vec<Count> = Vec::new();
    let mut reasons: Vec<Count> = Vec::new();
    let bump = |list: &mut Vec<Count>, what: &str| match list.iter_mut().find(|c| c.what == what) {
        Some(c) => c.count += 1,
        None => list.push(Count {
            what: what.to_string(),
            count: 1,
        }),
    };
    let (mut passed, mut failed) = (0, 0);
    for a in attempts {
        let status = a.status.as_deref().unwrap_or("evaluating");
        bump(&mut by_status, status);
        match a.status.as_deref() {
            Some("passed") => passed += 1,
            Some(_) => {
                failed += 1;
                // The first line names the failure; what follows (a log, a traceback) differs
                // between attempts that failed the same way.
                bump(
                    &mut reasons,
                    &format!("{status}: {}", crate::tree::clip(&headline(a.reason.as_deref()), 240)),
                );
            }
            None => {}
        }
    }
    // Most frequent first; ties keep the order of first appearance (sort is stable).
    by_status.sort_by_key(|c| std::cmp::Reverse(c.count));
    reasons.sort_by_key(|c| std::cmp::Reverse(c.count));
    Outcomes {
        by_status,
        passed,
        failed,
        top_failure: reasons.into_iter().next(),
    }
}

/// A coder answer that produced no candidate: where it happened and why.
struct FailedCode {
    /// Index in the candidate list at that moment: the attempt goes before that candidate.
    before: usize,
    /// The event that answered the request (the coder's answer, or its failure).
    event: usize,
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
                    event: i,
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

/// Who made a candidate: the store's record, else what the engine knows of it. The coder's
/// role is named after who played it when that was no LLM (the knob tuner, an agent).
fn origin(c: &ksearch_search::engine::Candidate, origins: &HashMap<i64, String>, brain: &str) -> String {
    let recorded = origins.get(&c.id).map(String::as_str);
    // A replayed evaluation has no candidate row: the engine's view decides (as the driver's
    // rule for the row does: the seed is round 0 of cycle 0, a sweep's variant has a note).
    let origin = recorded.unwrap_or(if c.round == 0 && c.cycle == 0 {
        "seed"
    } else if c.note.is_some() {
        "knob_sweep"
    } else {
        "coder"
    });
    match (origin, brain) {
        ("coder", "tuner") => "tuner".into(),
        ("coder", "agent") => "agent".into(),
        (o, _) => o.to_string(),
    }
}

/// What the run had spent after each event (`events[i]` and `rows[i]` are the same event).
///
/// An evaluation counts at its `evaluated` event, with the wall time of its record: the n-th
/// `evaluated` event of a candidate is its n-th evaluation row (the driver writes the row, then
/// the event). An LLM exchange counts at the event that answered its request, or failed it;
/// exchanges of a request no event has answered yet (a call in flight, a request held back
/// when the endpoint went down) count in the run's totals only.
fn spending(
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

fn attempts(
    engine: &Engine,
    origins: &HashMap<i64, String>,
    failed: Vec<FailedCode>,
    brain: &str,
    events: &[Event],
    timeline: &[Spent],
) -> Vec<Attempt> {
    // Where each candidate's outcome became known: the event of its first evaluation (the
    // search's; a final re-measurement comes later).
    let mut first_evaluated: HashMap<i64, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let Event::Evaluated { candidate_id, .. } = e {
            first_evaluated.entry(*candidate_id).or_insert(i);
        }
    }
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
                noisy: None,
                final_speedup: None,
                final_status: None,
                note: None,
                resources: String::new(),
                device: None,
                spent: timeline.get(f.event).copied(),
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
            origin: origin(c, origins, brain),
            status: result.map(|r| r.status.clone()),
            reason: result.and_then(|r| r.reason.clone()),
            speedup: c.speedup(),
            relative_noise: result.and_then(|r| r.relative_noise),
            noisy: noise_flag(c.speedup(), result.and_then(|r| r.relative_noise)),
            final_speedup: c.final_result.as_ref().filter(|r| r.passed()).and_then(|r| r.speedup),
            final_status: c.final_result.as_ref().map(|r| r.status.clone()),
            note: c.note.clone(),
            resources: result.map(|r| resource_brief(&r.resources)).unwrap_or_default(),
            device: None,
            spent: result
                .and_then(|_| first_evaluated.get(&c.id))
                .and_then(|&i| timeline.get(i))
                .copied(),
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

/// The kind of an LLM error, from its message (the store keeps the message only; the patterns
/// are the wording of ksearch-llm's `LlmError`).
fn error_kind(message: &str) -> String {
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

fn budget(exchanges: &[ExchangeRow], evaluations: &[EvaluationRow], device_kind: &str, wall_seconds: f64) -> Budget {
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
    let relative_noise = match (median, iqr) {
        (Some(m), Some(q)) if m > 0.0 => Some(q / m),
        _ => None,
    };
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
        relative_noise,
        noisy: noise_flag(t["speedup"].as_f64(), relative_noise),
        samples: t["candidate"]["n"].as_u64(),
        max_abs_error: w["correctness"]["max_abs_error"].as_f64(),
        gb_per_s: t["achieved_gb_per_s"].as_f64(),
        gflop_per_s: t["achieved_gflop_per_s"].as_f64(),
        suspicious: t["suspicious"].as_str().map(str::to_string),
    }
}

/// The device an evaluation record says it ran on (its `evaluations` count 1): the Ray node's
/// GPU model and address (`node`) for a remote evaluation, else the GPU the harness saw, else
/// the CPU's model.
pub fn device_of(record: &Value) -> DeviceGroup {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    let env = &record["provenance"]["environment"];
    let node = &record["node"];
    let model = text(&node["gpu"])
        .or_else(|| text(&env["device"]["name"]))
        .or_else(|| text(&env["cpu"]).map(|cpu| format!("CPU: {cpu}")))
        .or_else(|| text(&record["provenance"]["device"]))
        .unwrap_or_else(|| "unknown device".into());
    DeviceGroup {
        model,
        node: text(&node["ip"]).or_else(|| text(&node["node_id"])),
        driver: text(&node["driver"]).or_else(|| text(&env["device"]["driver"])),
        evaluations: 1,
        passed: usize::from(record["status"] == "passed"),
    }
}

/// Evaluations grouped by device model and node ([`device_of`]), in the order each group first
/// appears.
pub fn device_groups(evaluations: &[EvaluationRow]) -> Vec<DeviceGroup> {
    let mut out: Vec<DeviceGroup> = Vec::new();
    for e in evaluations {
        let d = DeviceGroup {
            passed: usize::from(e.status == "passed"),
            ..device_of(&e.record)
        };
        match out.iter_mut().find(|g| g.model == d.model && g.node == d.node) {
            Some(g) => {
                g.evaluations += 1;
                g.passed += d.passed;
                if g.driver.is_none() {
                    g.driver = d.driver;
                }
            }
            None => out.push(d),
        }
    }
    out
}

/// Provenance rows from an evaluation record and the run's metadata.
fn provenance(record: Option<&Value>, meta: &dyn Fn(MetaKey) -> Option<Value>) -> Vec<KeyValue> {
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
    for key in [
        MetaKey::KsearchVersion,
        MetaKey::RunSeed,
        MetaKey::Devices,
        MetaKey::Task,
    ] {
        if let Some(v) = meta(key) {
            push(&key.as_str().replace('_', " "), &v);
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

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_search::engine::Candidate;

    #[test]
    fn a_stop_reason_from_a_newer_build_is_shown_as_spelled_and_offers_no_resume() {
        let newer = StopReason::parse("paused_for_maintenance");
        assert_eq!(stop_words(&newer), "paused_for_maintenance");
        assert_eq!(stop_words(&StopReason::AwaitingAgent), "awaiting_agent");
        assert_eq!(
            stop_words(&StopReason::LlmRefused),
            "the LLM endpoint refused the credentials"
        );
        assert!(resume_hint("stopped", Some(&newer), Path::new("runs/r")).is_none());
        let hint = resume_hint("stopped", Some(&StopReason::LlmUnavailable), Path::new("runs/r"));
        assert_eq!(hint.map(|h| h.command), Some("ksearch resume runs/r".to_string()));
    }

    #[test]
    fn a_records_device_is_its_ray_nodes_gpu_else_the_gpu_or_cpu_the_harness_saw() {
        let env = |e: Value| serde_json::json!({"status": "passed", "provenance": {"device": "cpu", "environment": e}});
        let mut ray = env(serde_json::json!({"cpu": "AMD EPYC"}));
        ray["node"] = serde_json::json!({"ip": "10.0.0.2", "gpu": "NVIDIA H200", "driver": "580.1"});
        let d = device_of(&ray);
        assert_eq!(
            (d.label(), d.driver.as_deref(), d.passed),
            ("NVIDIA H200 (node 10.0.0.2)".to_string(), Some("580.1"), 1)
        );
        let gpu = device_of(&env(
            serde_json::json!({"device": {"name": "NVIDIA A100", "driver": "535"}}),
        ));
        assert_eq!(
            (gpu.label(), gpu.driver.as_deref()),
            ("NVIDIA A100".to_string(), Some("535"))
        );
        assert_eq!(
            device_of(&env(serde_json::json!({"cpu": "AMD EPYC"}))).label(),
            "CPU: AMD EPYC"
        );
        // A Ray CPU node: its CPU, on its node.
        let mut cpu_node = env(serde_json::json!({"cpu": "AMD EPYC"}));
        cpu_node["node"] = serde_json::json!({"ip": "10.0.0.3"});
        assert_eq!(device_of(&cpu_node).label(), "CPU: AMD EPYC (node 10.0.0.3)");
    }

    fn candidate(id: i64, round: u32, cycle: u32, note: Option<&str>) -> Candidate {
        Candidate {
            id,
            parent: None,
            node_id: "root".into(),
            round,
            cycle,
            sources: vec![],
            result: None,
            remeasured: vec![],
            superseded: None,
            final_result: None,
            note: note.map(Into::into),
        }
    }

    #[test]
    fn without_a_candidate_row_the_seed_is_still_the_seed() {
        let none = HashMap::new();
        assert_eq!(origin(&candidate(1, 0, 0, None), &none, "llm"), "seed");
        assert_eq!(origin(&candidate(2, 1, 1, None), &none, "llm"), "coder");
        assert_eq!(
            origin(&candidate(3, 2, 1, Some("BLOCK=64")), &none, "llm"),
            "knob_sweep"
        );
        // Who played the coder when it was no LLM.
        assert_eq!(origin(&candidate(2, 1, 1, None), &none, "tuner"), "tuner");
        assert_eq!(origin(&candidate(1, 0, 0, None), &none, "tuner"), "seed");
        let rows = HashMap::from([(2, "seed".to_string())]);
        assert_eq!(origin(&candidate(2, 1, 1, None), &rows, "agent"), "seed");
    }

    #[test]
    fn nothing_spent_is_zero_not_minus_zero() {
        let b = budget(&[], &[], "CPU", 0.0);
        assert!(b.device_seconds.is_sign_positive() && b.dollars.is_sign_positive());
        assert_eq!(format!("{:.1}", b.device_seconds), "0.0");
    }

    #[test]
    fn llm_errors_are_counted_by_kind_with_the_last_message_kept() {
        let failed = |error: &str| ExchangeRow {
            provider: "openai".into(),
            error: Some(error.into()),
            ..Default::default()
        };
        let xs = [
            failed("openai: no answer within 120 s, 3 attempt(s); raise `timeout_s` if the model is slow"),
            failed("openai: HTTP 503 after 4 attempt(s): overloaded"),
            failed("openai: no answer within 120 s, 3 attempt(s); raise `timeout_s` if the model is slow"),
            failed("anthropic: the API key variable ANTHROPIC_API_KEY is not set; export it"),
            ExchangeRow {
                provider: "openai".into(),
                answer: Some(serde_json::json!({"text": "ok"})),
                input_tokens: 100,
                cached_input_tokens: 60,
                reasoning_tokens: 7,
                from_cache: true,
                ..Default::default()
            },
            // The tuner's refusals are not LLM failures.
            ExchangeRow {
                provider: "tuner".into(),
                error: Some("no knob left".into()),
                ..Default::default()
            },
        ];
        let b = budget(&xs, &[], "CPU", 0.0);
        let kinds: Vec<(&str, usize)> = b.llm_errors.iter().map(|c| (c.what.as_str(), c.count)).collect();
        assert_eq!(kinds, [("timeout", 2), ("HTTP 503", 1), ("missing API key", 1)]);
        assert_eq!(b.failed_llm_calls, 4);
        assert!(b.last_llm_error.as_deref().unwrap().contains("ANTHROPIC_API_KEY"));
        assert_eq!(
            (b.cached_input_tokens, b.reasoning_tokens, b.cached_answers),
            (60, 7, 1)
        );
        assert_eq!(
            error_kind("openai: the request was rejected (HTTP 400): bad"),
            "rejected (HTTP 400)"
        );
        assert_eq!(error_kind("something else"), "other");
    }

    #[test]
    fn noise_is_flagged_above_the_threshold_or_above_the_gain() {
        assert_eq!(noise_flag(Some(1.5), Some(0.02)), None);
        assert!(noise_flag(Some(1.5), Some(0.08))
            .unwrap()
            .starts_with("noisy: the IQR is 8.0%"));
        // 1% faster with 2% noise: the engine would not call it faster.
        assert!(noise_flag(Some(1.01), Some(0.02))
            .unwrap()
            .starts_with("within the noise"));
        assert_eq!(noise_flag(None, Some(0.02)), None);
        assert_eq!(noise_flag(Some(1.01), None), None);
    }

    #[test]
    fn times_are_shown_in_utc_and_silences_in_minutes() {
        assert_eq!(utc(0.0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_709_210_096.0), "2024-02-29 12:34 UTC");
        assert_eq!(minutes(59.0), "0 minutes");
        assert_eq!(minutes(61.0), "1 minute");
        assert_eq!(minutes(42.0 * 60.0), "42 minutes");
        assert_eq!(minutes(185.0 * 60.0), "3 h 05 min");
    }

    #[test]
    fn the_most_common_failure_is_named_by_its_first_line() {
        let mut a = vec![Attempt::for_test(0, None, 0, "passed", Some(1.0))];
        for (i, reason) in [
            "failed:\nk.c:3: error: x\nmore log",
            "failed:\n\nk.c:3: error: x\nother log",
            "timeout after 10 s",
        ]
        .iter()
        .enumerate()
        {
            let mut f = Attempt::for_test(i as i64 + 1, None, 1, "compile_error", None);
            f.reason = Some(reason.to_string());
            a.push(f);
        }
        let o = outcomes(&a);
        assert_eq!((o.passed, o.failed), (1, 3));
        assert_eq!(
            o.by_status[0],
            Count {
                what: "compile_error".into(),
                count: 3
            }
        );
        assert_eq!(
            o.top_failure,
            Some(Count {
                what: "compile_error: failed: k.c:3: error: x".into(),
                count: 2
            })
        );
    }
}
