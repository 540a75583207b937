//! Knob sweeps of written kernels (docs/engine.md, "Knob sweeps").
//!
//! When a coder's kernel passes and beats its cycle's best, and its source annotates knobs
//! (`ksearch_spec::annotations`), the engine spends part of the round budget on variants that
//! differ in one knob value at a time, without asking the coder: a hill climb from the coder's
//! values, each step moving one knob to a neighbouring value in its list (the next one first,
//! then the previous one), keeping a variant only when it beats the best so far by more than the
//! noise. The share of rounds all sweeps may use together is `EngineConfig::knob_share`. Every
//! variant is an ordinary candidate of the cycle (parent: the kernel it varies), so the cycle's
//! best, the tree and the final re-measurement see it like any other.

use super::protocol::{Purpose, Source};
use super::{Engine, EngineError};
use ksearch_spec::annotations::{annotated_knobs, set_annotated_values, AnnotatedKnob};

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sweep {
    knobs: Vec<AnnotatedKnob>,
    /// The best candidate of the sweep so far (the coder's kernel at first) and its values.
    best: i64,
    best_values: Vec<String>,
    /// Every assignment measured or being measured, the coder's first.
    tried: Vec<Vec<String>>,
    /// The variant being evaluated.
    pending: Option<i64>,
}

/// Rounds all sweeps of the run may spend together.
pub(super) fn budget(e: &Engine) -> u32 {
    (e.config.knob_share.clamp(0.0, 1.0) * f64::from(e.config.rounds)).floor() as u32
}

/// Whether `candidate_id` is the sweep variant being evaluated.
pub(super) fn is_variant(e: &Engine, candidate_id: i64) -> bool {
    e.sweep.as_ref().is_some_and(|s| s.pending == Some(candidate_id))
}

/// After a coder's candidate passed and improved its cycle: starts a sweep over its annotated
/// knobs if it has any and budget is left. Returns whether an evaluation was requested.
pub(super) fn maybe_start(e: &mut Engine, candidate_id: i64) -> bool {
    // Without a share the annotation is not offered to the coder, so there is nothing to read.
    if budget(e) == 0 {
        return false;
    }
    let Some(c) = e.candidate(candidate_id) else {
        return false;
    };
    let knobs = match annotated_knobs(c.sources.iter().map(|s| (s.path.as_str(), s.content.as_str()))) {
        Ok(knobs) => knobs,
        Err(problems) => {
            // Malformed annotations only cost the sweep; the kernel itself was measured as
            // written. The problems become the candidate's note, which the report shows and the
            // coder's next improve round (this candidate is now the cycle's best) can be shown.
            let note = annotation_note(&problems);
            if let Some(c) = e.candidates.iter_mut().find(|c| c.id == candidate_id) {
                c.note = Some(note);
            }
            return false;
        }
    };
    if knobs.is_empty() || e.sweep_rounds >= budget(e) || e.round >= e.config.rounds {
        return false;
    }
    let values: Vec<String> = knobs.iter().map(|k| k.current.clone()).collect();
    e.sweep = Some(Sweep {
        knobs,
        best: candidate_id,
        best_values: values.clone(),
        tried: vec![values],
        pending: None,
    });
    next(e)
}

/// The note of a kernel whose knob annotations could not be read: every `file:line` problem.
fn annotation_note(problems: &[String]) -> String {
    format!(
        "knob annotations not swept (fix them to have the values tried): {}",
        problems.join("; ")
    )
}

/// A variant was measured: keep it if it beats the sweep's best, then try the next one.
/// Returns whether another evaluation was requested (otherwise the sweep is over).
pub(super) fn variant_done(e: &mut Engine, candidate_id: i64) -> Result<bool, EngineError> {
    let Some(mut sweep) = e.sweep.take() else {
        return Err(EngineError::Internal("a sweep variant without a sweep".into()));
    };
    sweep.pending = None;
    let result = e.candidate(candidate_id).and_then(|c| c.result.clone());
    let best = e.candidate(sweep.best).and_then(|c| c.result.clone());
    if result.as_ref().is_some_and(|r| e.beats(r, best.as_ref())) {
        sweep.best = candidate_id;
        if let Some(values) = sweep.tried.last() {
            sweep.best_values = values.clone();
        }
    }
    e.sweep = Some(sweep);
    Ok(next(e))
}

/// Requests the next untried neighbour of the best assignment, or ends the sweep.
fn next(e: &mut Engine) -> bool {
    let Some(sweep) = e.sweep.as_ref() else { return false };
    let found = (e.sweep_rounds < budget(e) && e.round < e.config.rounds)
        .then(|| neighbours(&sweep.knobs, &sweep.best_values).find(|v| !sweep.tried.contains(v)))
        .flatten();
    let Some(values) = found else {
        e.sweep = None;
        return false;
    };
    let (parent, sources, note) = {
        let Some(base) = e.candidate(sweep.best) else {
            e.sweep = None;
            return false;
        };
        let set: Vec<(String, String)> = sweep.knobs.iter().map(|k| k.name.clone()).zip(values.clone()).collect();
        let sources: Vec<Source> = base
            .sources
            .iter()
            .map(|s| Source {
                path: s.path.clone(),
                content: set_annotated_values(&s.path, &s.content, &sweep.knobs, &set),
            })
            .collect();
        let changed: Vec<String> = set
            .iter()
            .zip(&sweep.best_values)
            .filter(|((_, new), old)| new != *old)
            .map(|((name, new), _)| format!("{name}={new}"))
            .collect();
        (
            base.id,
            sources,
            format!("knob sweep of candidate {}: {}", base.id, changed.join(", ")),
        )
    };
    let node_id = e.cycle.as_ref().map(|c| c.node_id.clone()).unwrap_or_default();
    e.round += 1;
    e.sweep_rounds += 1;
    let id = e.add_candidate(Some(parent), node_id, sources, e.round);
    if let Some(c) = e.candidates.iter_mut().find(|c| c.id == id) {
        c.note = Some(note.clone());
    }
    e.attempts.push(super::AttemptRecord {
        round: e.round,
        kind: None,
        node_id: e.cycle.as_ref().map(|c| c.node_id.clone()).unwrap_or_default(),
        request: None,
        parent: Some(parent),
        candidate: Some(id),
        description: Some(note),
        failure: None,
    });
    if let Some(s) = e.sweep.as_mut() {
        s.tried.push(values);
        s.pending = Some(id);
    }
    e.request_evaluation(id, Purpose::Search);
    true
}

/// Assignments one step from `values`: per knob in order, its next value in the list, then its
/// previous one.
fn neighbours<'a>(knobs: &'a [AnnotatedKnob], values: &'a [String]) -> impl Iterator<Item = Vec<String>> + 'a {
    knobs.iter().enumerate().flat_map(move |(i, k)| {
        let at = k.values.iter().position(|v| *v == values[i]).unwrap_or(0);
        [at.checked_add(1), at.checked_sub(1)]
            .into_iter()
            .flatten()
            .filter_map(move |j| k.values.get(j))
            .map(move |v| {
                let mut out = values.to_vec();
                out[i] = v.clone();
                out
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_move_one_knob_next_value_first() {
        let knobs = annotated_knobs([(
            "k.c",
            "#define A 2 // ksearch: knob values=[1, 2, 4]\n#define B 8 // ksearch: knob values=[8, 16]\n",
        )])
        .unwrap();
        let v = |a: &str, b: &str| vec![a.to_string(), b.to_string()];
        let got: Vec<_> = neighbours(&knobs, &v("2", "8")).collect();
        assert_eq!(got, [v("4", "8"), v("1", "8"), v("2", "16")]);
    }
}
