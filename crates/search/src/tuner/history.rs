//! What the measurements say, derived from the engine's candidates and tree each time the tuner
//! answers (the tuner keeps no state, so replays and resumes see the same history).

use super::{key, node_assignment, read_mark};
use crate::engine::{Engine, EvalSummary};
use ksearch_spec::{Assignment, KnobSpace};
use std::collections::{HashMap, HashSet};

/// A solved node's measurement against its parent's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct NodeGain {
    /// How many times faster than the parent's attached solution, by the engine's rule (the
    /// paired per-workload times, or the speedups for runs recorded before them).
    pub gain: f64,
    /// The relative difference the noise of the two measurements allows.
    pub noise: f64,
    /// Whether the engine's own "better" rule (`Engine::compare`) separates them (one beats
    /// the other by more than that noise); otherwise the change is no gain.
    pub significant: bool,
}

pub(super) struct History {
    /// Assignments already rendered (as JSON), whatever their outcome.
    pub tried: HashSet<String>,
    /// Assignments of open actions in the tree, planned but not evaluated yet.
    pub planned: HashSet<String>,
    /// Per knob, the log gain of every measured change of that knob: ln of how many times
    /// faster than its parent by the engine's rule, or 0 when the change is within the noise.
    pub knob_gains: HashMap<String, Vec<f64>>,
    /// Per node: (assignment, the candidate if it passed), in candidate order.
    pub per_node: HashMap<String, Vec<(Assignment, Option<i64>)>>,
    /// Every evaluated assignment, the passing ones fastest first (the engine's ranking), then
    /// the others in candidate order: where the tuner looks for untried moves once the region it works in is exhausted.
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
        let mut assignments: HashMap<i64, Assignment> = HashMap::new();
        for c in engine.candidates() {
            let Some(a) = c.sources.iter().find_map(|s| read_mark(space, &s.content)) else {
                continue;
            };
            let result = c.result.as_ref();
            h.tried.insert(key(&a));
            assignments.insert(c.id, a.clone());
            if let (Some(r), Some((pa, Some(pr)))) = (result, c.parent.and_then(|p| seen.get(&p))) {
                // The engine's rule: a change counts only when one of the two beats the other
                // beyond the noise of the two measurements.
                if let Some(cmp) = engine.compare(r, pr) {
                    let gain = if cmp.significant() { cmp.gain.ln() } else { 0.0 };
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
                .push((a.clone(), c.passed().then_some(c.id)));
            seen.insert(c.id, (a, result));
        }
        // Fastest first by the engine's ranking; the failed ones after, in candidate order. Each
        // assignment once, where it ranks best.
        let mut listed = HashSet::new();
        let passing = engine.ranked().into_iter().map(|c| c.id);
        let failed = engine.candidates().iter().filter(|c| !c.passed()).map(|c| c.id);
        for id in passing.chain(failed) {
            if let Some(a) = assignments.get(&id) {
                if listed.insert(key(a)) {
                    h.by_merit.push(a.clone());
                }
            }
        }
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

    /// The best passing assignment measured at `node` by the engine's rule (the first, replaced
    /// by each later one that beats it).
    pub fn best_for_node(&self, engine: &Engine, node: &str) -> Option<Assignment> {
        let result = |id: i64| engine.candidate(id).and_then(|c| c.result.as_ref());
        self.per_node
            .get(node)?
            .iter()
            .filter_map(|(a, id)| id.map(|id| (a, id)))
            .fold(None, |best: Option<(&Assignment, i64)>, (a, id)| match best {
                Some((_, b)) if !result(id).is_some_and(|r| engine.beats(r, result(b))) => best,
                _ => Some((a, id)),
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
        match r.zip(pr).and_then(|(r, pr)| engine.compare(r, pr)) {
            Some(c) => Some(NodeGain {
                gain: c.gain,
                noise: c.noise,
                significant: c.significant(),
            }),
            // Without both measurements, the attached speedups are all there is.
            None => Some(NodeGain {
                gain: own.speedup / parent.speedup,
                noise: 0.0,
                significant: true,
            }),
        }
    }
}
