//! The run's attempts (every candidate, and every coder answer that produced none), their
//! outcomes, and the flag on measurements too noisy to take at face value.

use crate::model::*;
use ksearch_search::engine::{resource_brief, Engine, Event, Request};
use std::collections::HashMap;

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
pub(super) fn outcomes(attempts: &[Attempt]) -> Outcomes {
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
pub(super) struct FailedCode {
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
pub(super) fn replay(events: &[Event]) -> Result<(Engine, Vec<FailedCode>), String> {
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
pub(super) fn origin(c: &ksearch_search::engine::Candidate, origins: &HashMap<i64, String>, brain: &str) -> String {
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

pub(super) fn attempts(
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
