//! Whether a run is finished, stopped, waiting, live or stalled, and how to resume one that
//! stopped short.

use super::STALLED_AFTER_S;
use crate::model::*;
use ksearch_search::engine::{Engine, Request};
use ksearch_store::{StopReason, StopRecord};
use std::path::Path;

/// What a stop reason means, for people; a reason without words (one a newer ksearch wrote,
/// say) as it is spelled.
pub(super) fn stop_words(reason: &StopReason) -> &str {
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
pub(super) fn run_state(engine: &Engine, stop: Option<StopRecord>, last_event_at: Option<f64>, now: f64) -> RunState {
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
pub(super) fn resume_hint(kind: &str, reason: Option<&StopReason>, run_dir: &Path) -> Option<Resume> {
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
pub(super) fn minutes(seconds: f64) -> String {
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
