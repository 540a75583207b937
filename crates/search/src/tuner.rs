//! The knob tuner: a brain that needs no LLM (docs/templates.md). It answers the engine's
//! planner requests with edit scripts whose actions are knob assignments, and its coder
//! requests by rendering the task's template. It keeps no state of its own: everything it
//! decides is derived from the engine's state (the world model and the measured candidates),
//! so a tuner run replays and resumes like any other.

use crate::engine::{CodeKind, Engine, PlanKind, Request, Strategy};
use crate::world_model::Node;
use indexmap::IndexMap;
use ksearch_spec::{Assignment, KernelTemplate};
use serde_json::json;
use std::collections::{HashMap, HashSet};

/// The first line of every rendered kernel: how the tuner reads back what a candidate is. C-like
/// sources take it as a block comment, Python sources (Triton templates) as a line comment.
const MARK: &str = "/* ksearch knobs: ";
const PY_MARK: &str = "# ksearch knobs: ";

pub struct Tuner {
    template: KernelTemplate,
    /// The target's hardware figures, for constraints and the template.
    hw: IndexMap<String, f64>,
    /// Per knob, the prior (0-1) that changing it helps, from the knowledge base.
    priors: HashMap<String, f64>,
}

impl Tuner {
    /// Fails when the all-defaults assignment breaks a constraint on this hardware (the task's
    /// template cannot run here) or does not render.
    pub fn new(
        template: KernelTemplate,
        hw: IndexMap<String, f64>,
        priors: HashMap<String, f64>,
    ) -> Result<Tuner, String> {
        let tuner = Tuner { template, hw, priors };
        let default = tuner.template.space.default_assignment();
        tuner
            .template
            .space
            .check(&default, &tuner.hw)
            .map_err(|e| format!("the default knob assignment is not valid here: {e}"))?;
        tuner.render(&default)?;
        Ok(tuner)
    }

    /// The template's file name (the rendered kernel's).
    pub fn file(&self) -> &str {
        &self.template.file
    }

    /// The kernel for `a`, its first line recording the assignment.
    pub fn render(&self, a: &Assignment) -> Result<String, String> {
        let mut env = minijinja::Environment::new();
        env.set_keep_trailing_newline(true);
        env.add_template("kernel", &self.template.source)
            .map_err(|e| format!("the template does not parse: {e}"))?;
        let mut ctx: serde_json::Map<String, serde_json::Value> = a
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
            .collect();
        ctx.insert("hw".into(), json!(self.hw));
        let body = env
            .get_template("kernel")
            .and_then(|t| t.render(serde_json::Value::Object(ctx)))
            .map_err(|e| format!("the template does not render for {}: {e:#}", describe(a)))?;
        let json = serde_json::to_string(a).unwrap_or_default();
        Ok(if self.template.file.ends_with(".py") {
            format!("{PY_MARK}{json}\n{body}")
        } else {
            format!("{MARK}{json} */\n{body}")
        })
    }

    /// The seed: the all-defaults assignment, rendered.
    pub fn seed(&self) -> Result<String, String> {
        self.render(&self.template.space.default_assignment())
    }

    /// Answers a planner or coder request of `engine`.
    pub fn answer(&self, engine: &Engine, request: &Request) -> Result<String, String> {
        let history = History::of(self, engine);
        match request {
            Request::Plan { plan, .. } => Ok(self.plan(engine, plan, &history).to_string()),
            Request::Code {
                code,
                node_id,
                base_candidate,
                ..
            } => {
                let a = match engine.config().strategy {
                    Strategy::WorldModel => self.code(engine, *code, node_id, &history)?,
                    // No tree (`refine`, `evolve`): one step from the candidate the round builds on.
                    _ => self.step_from(engine, *code, *base_candidate, &history),
                };
                let fence = match self.file().rsplit_once('.').map(|(_, ext)| ext) {
                    Some("py") => "python",
                    Some("cu") => "cuda",
                    _ => "c",
                };
                Ok(format!("```{fence} {}\n{}```\n", self.file(), self.render(&a)?))
            }
            _ => Err("the tuner answers only planner and coder requests".into()),
        }
    }

    fn plan(&self, engine: &Engine, plan: &PlanKind, h: &History) -> serde_json::Value {
        let wm = engine.world_model();
        let default = self.template.space.default_assignment();
        // Children start from the best configuration measured at their parent: the code a
        // child's action builds on (the engine's base candidate) is that one too.
        let solved = |n: &Node| {
            n.solution_ref
                .as_ref()
                .and_then(|s| engine.candidate(s.candidate_id))
                .and_then(|c| c.sources.iter().find_map(|src| read_mark(&src.content)))
                .or_else(|| node_assignment(Some(n)))
        };
        let (base_node, base) = match plan {
            PlanKind::Refine { node_id } => (node_id.clone(), wm.node(node_id).and_then(solved)),
            PlanKind::Init | PlanKind::TooHard { .. } | PlanKind::Propose => match wm.tree().best_solved() {
                // The root holds the seed; the best solved node grows the tree.
                Some(n) => (n.node_id.clone(), solved(n)),
                None => ("root".to_string(), None),
            },
        };
        let base = base.unwrap_or_else(|| default.clone());
        let mut ops = Vec::new();
        if let PlanKind::Refine { node_id } = plan {
            // The measurement becomes the node's rating: 5 is "as fast as its parent".
            if let Some(gain) = h.node_gain(engine, node_id) {
                let rating = (5.0 + 10.0 * gain.ln()).clamp(0.0, 10.0);
                ops.push(json!({"op": "update_node", "node_id": node_id, "set": {
                    "overall_rating": round2(rating), "confidence": 0.8,
                    "notes": format!("measured {:.3}x its parent", gain)}}));
            }
        }
        for (knob, a) in self.best_moves(&base, h, 3) {
            let value = a.get(&knob).map(|v| v.to_string()).unwrap_or_default();
            let score = self.knob_score(&knob, h);
            ops.push(json!({"op": "insert_node", "node": {
                "parent_id": base_node,
                "decision": format!("knob {knob}"),
                "choice": format!("{knob} = {value}"),
                "overall_rating": round2(5.0 + 5.0 * (score - 0.5)),
                "confidence": 0.3,
                "notes": self.template.space.knob(&knob).map(|k| k.help.clone()).unwrap_or_default(),
                "action": {
                    "title": format!("set {knob} = {value}"),
                    "description": format!("knobs: {}", serde_json::to_string(&a).unwrap_or_default()),
                    "rationale": format!("prior {:.2} from the pattern library, adjusted by measurements", self.prior(&knob)),
                    "difficulty": 1,
                    "score": round2(score),
                }
            }}));
        }
        json!({"ops": ops})
    }

    fn code(&self, engine: &Engine, kind: CodeKind, node_id: &str, h: &History) -> Result<Assignment, String> {
        let node_a = node_assignment(engine.world_model().node(node_id))
            .ok_or_else(|| format!("node {node_id} carries no knob assignment"))?;
        let from = match kind {
            CodeKind::Action => return Ok(node_a),
            // Improve: step from the best of this node's candidates; debug: from what failed.
            CodeKind::Improve => h.best_for_node(node_id).unwrap_or(node_a),
            CodeKind::Debug => h.last_for_node(node_id).unwrap_or(node_a),
        };
        Ok(self
            .best_moves(&from, h, 1)
            .into_iter()
            .next()
            .map(|(_, a)| a)
            .unwrap_or(from))
    }

    /// For the strategies without a tree: the best untried one-knob step from the base
    /// candidate's assignment (the defaults when there is none, which are also the answer to a
    /// request to write the kernel from the specification).
    fn step_from(&self, engine: &Engine, kind: CodeKind, base: Option<i64>, h: &History) -> Assignment {
        let from = base
            .and_then(|id| engine.candidate(id))
            .and_then(|c| c.sources.iter().find_map(|s| read_mark(&s.content)));
        match from {
            None if kind == CodeKind::Action => self.template.space.default_assignment(),
            from => {
                let from = from.unwrap_or_else(|| self.template.space.default_assignment());
                self.best_moves(&from, h, 1)
                    .into_iter()
                    .next()
                    .map(|(_, a)| a)
                    .unwrap_or(from)
            }
        }
    }

    /// The `n` most promising untried, valid one-step changes of `from`, with the knob changed.
    fn best_moves(&self, from: &Assignment, h: &History, n: usize) -> Vec<(String, Assignment)> {
        let space = &self.template.space;
        let mut moves: Vec<(f64, usize, String, Assignment)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for (i, knob) in space.knobs.iter().enumerate() {
            let Some(pos) = from
                .get(&knob.name)
                .and_then(|v| knob.values.iter().position(|x| x == v))
            else {
                continue;
            };
            // Any other value of one knob (knobs have few values), nearer values first on ties.
            for (j, value) in knob.values.iter().enumerate().filter(|(j, _)| *j != pos) {
                let mut a = from.clone();
                a.insert(knob.name.clone(), value.clone());
                // A move that breaks a constraint is repaired by the smallest change of one
                // other knob, so coupled knobs (a tile's rows need wide columns) stay reachable.
                let Some(a) = self.valid_or_repaired(a, &knob.name) else {
                    continue;
                };
                let key = serde_json::to_string(&a).unwrap_or_default();
                if h.tried.contains(&key) || !seen.insert(key) {
                    continue;
                }
                let distance = pos.abs_diff(j) as f64;
                moves.push((
                    self.knob_score(&knob.name, h) - 0.01 * distance,
                    i,
                    knob.name.clone(),
                    a,
                ));
            }
        }
        // Highest score first; ties by knob order, then value order (stable sort keeps it).
        moves.sort_by(|x, y| {
            y.0.partial_cmp(&x.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(x.1.cmp(&y.1))
        });
        let mut seen_knobs = HashSet::new();
        let mut out = Vec::new();
        // Prefer distinct knobs (true alternatives), then fill with the rest.
        for m in &moves {
            if out.len() < n && seen_knobs.insert(m.2.clone()) {
                out.push((m.2.clone(), m.3.clone()));
            }
        }
        for m in &moves {
            if out.len() < n && !out.iter().any(|o: &(String, Assignment)| o.1 == m.3) {
                out.push((m.2.clone(), m.3.clone()));
            }
        }
        out
    }

    /// `a` if it satisfies every constraint, else the valid assignment nearest to it that changes
    /// one knob other than `fixed` (fewest value steps; knob order breaks ties).
    fn valid_or_repaired(&self, a: Assignment, fixed: &str) -> Option<Assignment> {
        let space = &self.template.space;
        if space.check(&a, &self.hw).is_ok() {
            return Some(a);
        }
        let mut best: Option<(usize, Assignment)> = None;
        for knob in space.knobs.iter().filter(|k| k.name != fixed) {
            let Some(pos) = a.get(&knob.name).and_then(|v| knob.values.iter().position(|x| x == v)) else {
                continue;
            };
            for (j, value) in knob.values.iter().enumerate() {
                let steps = pos.abs_diff(j);
                if steps == 0 || best.as_ref().is_some_and(|(b, _)| *b <= steps) {
                    continue;
                }
                let mut b = a.clone();
                b.insert(knob.name.clone(), value.clone());
                if space.check(&b, &self.hw).is_ok() {
                    best = Some((steps, b));
                }
            }
        }
        best.map(|(_, b)| b)
    }

    fn prior(&self, knob: &str) -> f64 {
        self.priors.get(knob).copied().unwrap_or(0.5)
    }

    /// Prior, sharpened by what changes of this knob did: each measured change moves the score
    /// by its log gain (a 10% gain adds about 0.1), at most halfway to 0 or 1.
    fn knob_score(&self, knob: &str, h: &History) -> f64 {
        let prior = self.prior(knob);
        match h.knob_gains.get(knob) {
            Some(gains) if !gains.is_empty() => {
                let mean = gains.iter().sum::<f64>() / gains.len() as f64;
                (prior + mean.clamp(-0.5, 0.5)).clamp(0.01, 0.99)
            }
            _ => prior,
        }
    }
}

/// What the measurements say, derived from the engine's candidates.
struct History {
    /// Assignments already rendered (as JSON), whatever their outcome.
    tried: HashSet<String>,
    /// Per knob, ln(speedup / parent's speedup) of every measured change of that knob.
    knob_gains: HashMap<String, Vec<f64>>,
    /// Per node: (assignment, speedup or None if failed), in candidate order.
    per_node: HashMap<String, Vec<(Assignment, Option<f64>)>>,
    speedups: HashMap<i64, f64>,
}

impl History {
    fn of(tuner: &Tuner, engine: &Engine) -> History {
        let mut h = History {
            tried: HashSet::new(),
            knob_gains: HashMap::new(),
            per_node: HashMap::new(),
            speedups: HashMap::new(),
        };
        let mut assignments: HashMap<i64, Assignment> = HashMap::new();
        for c in engine.candidates() {
            let Some(a) = c.sources.iter().find_map(|s| read_mark(&s.content)) else {
                continue;
            };
            h.tried.insert(serde_json::to_string(&a).unwrap_or_default());
            let speedup = c.speedup();
            if let Some(s) = speedup {
                h.speedups.insert(c.id, s);
            }
            if let (Some(s), Some(parent)) = (speedup, c.parent) {
                if let (Some(ps), Some(pa)) = (h.speedups.get(&parent).copied(), assignments.get(&parent)) {
                    for knob in &tuner.template.space.knobs {
                        if a.get(&knob.name) != pa.get(&knob.name) {
                            h.knob_gains.entry(knob.name.clone()).or_default().push((s / ps).ln());
                        }
                    }
                }
            }
            h.per_node
                .entry(c.node_id.clone())
                .or_default()
                .push((a.clone(), speedup));
            assignments.insert(c.id, a);
        }
        h
    }

    fn best_for_node(&self, node: &str) -> Option<Assignment> {
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

    fn last_for_node(&self, node: &str) -> Option<Assignment> {
        self.per_node.get(node)?.last().map(|(a, _)| a.clone())
    }

    /// Speedup of a solved node over its parent's attached solution.
    fn node_gain(&self, engine: &Engine, node_id: &str) -> Option<f64> {
        let wm = engine.world_model();
        let node = wm.node(node_id)?;
        let own = node.solution_ref.as_ref()?.speedup;
        let parent = wm.node(node.parent_id.as_deref()?)?.solution_ref.as_ref()?.speedup;
        (parent > 0.0 && own > 0.0).then(|| own / parent)
    }
}

/// The assignment an action carries (`knobs: {...}` in its description).
fn node_assignment(node: Option<&Node>) -> Option<Assignment> {
    let d = &node?.action.as_ref()?.description;
    serde_json::from_str(d.strip_prefix("knobs: ")?).ok()
}

fn read_mark(source: &str) -> Option<Assignment> {
    let line = source.lines().next()?;
    let json = match line.strip_prefix(PY_MARK) {
        Some(rest) => rest,
        None => line.strip_prefix(MARK)?.strip_suffix(" */")?,
    };
    serde_json::from_str(json).ok()
}

fn describe(a: &Assignment) -> String {
    a.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
