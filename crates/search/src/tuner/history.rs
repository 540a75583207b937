//! What the measurements say, derived from the engine's candidates and tree each time the tuner
//! answers (the tuner keeps no state, so replays and resumes see the same history).

use super::{key, node_assignment, read_mark};
use crate::engine::{beats, Engine, EvalSummary};
use ksearch_spec::{Assignment, KnobSpace};
use std::collections::{HashMap, HashSet};

/// A solved node's measurement against its parent's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct NodeGain {
    /// Speedup over the parent's attached solution.
    pub gain: f64,
    /// The larger relative noise (IQR / median) of the two measurements.
    pub noise: f64,
    /// Whether the engine's own "better" rule separates them (one beats the other by more
    /// than that noise); otherwise the change is no gain.
    pub significant: bool,
}

pub(super) struct History {
    /// Assignments already rendered (as JSON), whatever their outcome.
    pub tried: HashSet<String>,
    /// Assignments of open actions in the tree, planned but not evaluated yet.
    pub planned: HashSet<String>,
    /// Per knob, the log gain of every measured change of that knob: ln(speedup / parent's
    /// speedup), or 0 when the change is within the noise of the two measurements.
    pub knob_gains: HashMap<String, Vec<f64>>,
    /// Per node: (assignment, speedup or None if failed), in candidate order.
    pub per_node: HashMap<String, Vec<(Assignment, Option<f64>)>>,
    /// Every evaluated assignment, the passing ones fastest first, then the others in candidate
    /// order: where the tuner looks for untried moves once the region it works in is exhausted.
    pub by_merit: Vec<Assignment>,
}

impl History {
    pub fn of(space: &KnobSpace, engine: &Engine) -> History {
        let mut h = History {
            tried: HashSet::new(),
            planned: HashSet::new(),
            knob_gains: HashMap::new(),
            per_node: HashMap::new(),
            by_merit: Vec::new(),
        };
        let mut seen: HashMap<i64, (Assignment, Option<&EvalSummary>)> = HashMap::new();
        let mut ranked: Vec<(Option<f64>, i64, Assignment)> = Vec::new();
        for c in engine.candidates() {
            let Some(a) = c.sources.iter().find_map(|s| read_mark(space, &s.content)) else {
                continue;
            };
            let result = c.result.as_ref();
            if h.tried.insert(key(&a)) {
                ranked.push((c.speedup(), c.id, a.clone()));
            }
            if let (Some(r), Some((pa, Some(pr)))) = (result, c.parent.and_then(|p| seen.get(&p))) {
                if let (Some(s), Some(ps)) = (c.speedup(), pr.speedup.filter(|_| pr.passed())) {
                    // The engine's rule: a change counts only when one of the two beats the
                    // other by more than the larger of their noises.
                    let gain = if beats(r, Some(pr)) || beats(pr, Some(r)) {
                        (s / ps).ln()
                    } else {
                        0.0
                    };
                    // A gain is the changed knobs' only for a step (one knob, or two where a
                    // coupled one was repaired); a scout changes many, and says nothing of each.
                    let changed: Vec<&str> = space
                        .knobs
                        .iter()
                        .filter(|k| a.get(&k.name) != pa.get(&k.name))
                        .map(|k| k.name.as_str())
                        .collect();
                    if changed.len() <= 2 {
                        for knob in changed {
                            h.knob_gains.entry(knob.to_string()).or_default().push(gain);
                        }
                    }
                }
            }
            h.per_node
                .entry(c.node_id.clone())
                .or_default()
                .push((a.clone(), c.speedup()));
            seen.insert(c.id, (a, result));
        }
        // Fastest first; the failed ones after, in candidate order (stable sort).
        ranked.sort_by(|x, y| match (x.0, y.0) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        h.by_merit = ranked.into_iter().map(|(_, _, a)| a).collect();
        for n in engine
            .world_model()
            .tree()
            .nodes()
            .iter()
            .filter(|n| n.is_open_action())
        {
            if let Some(a) = node_assignment(space, Some(n)) {
                h.planned.insert(key(&a));
            }
        }
        h
    }

    pub fn best_for_node(&self, node: &str) -> Option<Assignment> {
        self.per_node
            .get(node)?
            .iter()
            .filter_map(|(a, s)| s.map(|s| (a, s)))
            .fold(None, |best: Option<(&Assignment, f64)>, (a, s)| match best {
                Some((_, bs)) if bs >= s => best,
                _ => Some((a, s)),
            })
            .map(|(a, _)| a.clone())
    }

    pub fn last_for_node(&self, node: &str) -> Option<Assignment> {
        self.per_node.get(node)?.last().map(|(a, _)| a.clone())
    }

    /// A solved node's measurement against its parent's attached solution.
    pub fn node_gain(engine: &Engine, node_id: &str) -> Option<NodeGain> {
        let wm = engine.world_model();
        let node = wm.node(node_id)?;
        let own = node.solution_ref.as_ref()?;
        let parent = wm.node(node.parent_id.as_deref()?)?.solution_ref.as_ref()?;
        if own.speedup <= 0.0 || parent.speedup <= 0.0 {
            return None;
        }
        let result = |id: i64| engine.candidate(id).and_then(|c| c.result.as_ref());
        let (r, pr) = (result(own.candidate_id), result(parent.candidate_id));
        let noise = [r, pr]
            .iter()
            .filter_map(|x| x.and_then(|x| x.relative_noise))
            .fold(0.0, f64::max);
        let significant = match (r, pr) {
            (Some(r), Some(pr)) => beats(r, Some(pr)) || beats(pr, Some(r)),
            // Without both measurements, the speedups are all there is.
            _ => true,
        };
        Some(NodeGain {
            gain: own.speedup / parent.speedup,
            noise,
            significant,
        })
    }
}
