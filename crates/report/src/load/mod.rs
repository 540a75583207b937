//! Builds a [`RunReport`] from a run directory: the event log is replayed (it is the truth, as
//! for `ksearch show`), and the store's other tables add what events do not carry (LLM usage,
//! whole evaluation records with provenance, who wrote each candidate).
//!
//! A run may be writing while we read (the dashboard): events are read first, and the driver
//! writes every row before the event that announces it, so each event read has its rows.
//!
//! One submodule per part of the report: [`run_state`] (live, stopped, stalled; how to resume),
//! [`attempts`] (every attempt, the outcomes, the noise flag), [`budget`] (what was spent, per
//! event and in all), [`best_kernel`], [`provenance`] (brain, target, devices, provenance rows)
//! and [`world_model`] (the tree).

mod attempts;
mod best_kernel;
mod budget;
mod provenance;
mod run_state;
mod world_model;

pub use attempts::{noise_flag, NOISY_ABOVE};
pub use provenance::{device_groups, device_of};

use crate::error::ReportError;
use crate::model::*;
use attempts::{attempts, outcomes, replay};
use best_kernel::{best_kernel, latest_record};
use budget::{budget, model_usage, spending};
use ksearch_search::engine::{Event, Request};
use ksearch_store::{MetaKey, RunStore};
use provenance::{brain, provenance, target_heading};
use run_state::{resume_hint, run_state};
use std::collections::HashMap;
use std::path::Path;
use world_model::tree;

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

#[cfg(test)]
mod tests {
    use super::attempts::origin;
    use super::budget::error_kind;
    use super::run_state::{minutes, stop_words, utc};
    use super::*;
    use ksearch_search::engine::Candidate;
    use ksearch_store::{ExchangeRow, StopReason};
    use serde_json::Value;

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
