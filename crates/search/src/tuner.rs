//! The knob tuner: a brain that needs no LLM (docs/templates.md). It answers the engine's
//! planner requests with edit scripts whose actions are knob assignments, and its coder
//! requests by rendering the task's template. It keeps no state of its own: everything it
//! decides is derived from the engine's state (the world model, the measured candidates and the
//! run's seed), so a tuner run replays and resumes like any other.

mod history;

use crate::engine::{CodeKind, Engine, PlanKind, Request, Strategy};
use crate::world_model::Node;
use history::History;
use indexmap::IndexMap;
use ksearch_spec::{
    describe_assignment, Assignment, ConstraintError, KernelTemplate, KnobSpace, RenderError, SpecError,
    TemplateRenderer,
};
use serde_json::json;
use std::collections::{HashMap, HashSet};

/// The first line of every rendered kernel: how the tuner reads back what a candidate is. C-like
/// sources take it as a block comment, Python sources (Triton templates) as a line comment.
const MARK: &str = "/* ksearch knobs: ";
const PY_MARK: &str = "# ksearch knobs: ";

/// Spaces with at most this many valid assignments are rendered in full when the tuner is
/// made, so a template that breaks for some assignment is rejected before the search, naming
/// the file, the line and the assignment.
pub const RENDER_ALL_LIMIT: usize = 4096;

/// Spaces of at most this many assignments (valid or not) are walked to count or render the
/// valid ones; larger ones only ever see the assignments the search reaches.
const ENUMERATE_LIMIT: u128 = 65_536;

/// The largest score the run's seed adds to a move: enough to reorder moves whose scores tie
/// or nearly tie (two values one step either side, knobs with the same prior), too little to
/// override a measured gain of a few percent (a 10% gain adds about 0.1).
const SEED_JITTER: f64 = 0.03;

/// Why the tuner cannot be made for a template, or cannot answer a request.
#[derive(Debug, thiserror::Error)]
pub enum TunerError {
    /// The knob file or the template does not fit the target (names the file).
    #[error("{0}")]
    Spec(#[from] SpecError),
    /// The knob file's default assignment breaks a constraint on this target.
    #[error("{knobs}: the default assignment ({assignment}) is not valid on this target: {error}")]
    InvalidDefault {
        /// The knob file, by its file name.
        knobs: String,
        /// The default assignment, described.
        assignment: String,
        /// The constraint it breaks.
        error: ConstraintError,
    },
    /// An assignment asked for breaks a constraint on this hardware (a run resumed on other
    /// hardware than it was planned on).
    #[error("{knobs}: {assignment} is not valid on this target: {error}")]
    Invalid {
        /// The knob file, by its file name.
        knobs: String,
        /// The assignment asked for, described.
        assignment: String,
        /// The constraint it breaks.
        error: ConstraintError,
    },
    /// The template could not be rendered with an assignment.
    #[error("{0}")]
    Render(#[from] RenderError),
    /// Every assignment the tuner can reach has been evaluated: the search is over.
    #[error("the knob space is exhausted: {0}")]
    Exhausted(String),
    /// A node the tuner is asked to code names no knob assignment.
    #[error("node {0} carries no knob assignment")]
    NoAssignment(String),
    /// A request the tuner cannot answer (an evaluation, say).
    #[error("the tuner answers only planner and coder requests")]
    NotMine,
}

/// The knob tuner: a brain without an LLM that answers the planner by choosing knob assignments
/// and the coder by rendering the kernel template with them.
pub struct Tuner {
    template: KernelTemplate,
    renderer: TemplateRenderer,
    /// The target's hardware figures, for constraints and the template.
    hw: IndexMap<String, f64>,
    /// Per knob, the prior (0-1) that changing it helps, from the knowledge base.
    priors: HashMap<String, f64>,
    /// What the priors are of (`memory-bound`), for the actions' rationale.
    prior_basis: Option<String>,
    /// Every valid assignment, where the space is small enough to list (scouts are drawn
    /// from it); empty otherwise.
    valid: Vec<Assignment>,
}

/// How many assignments drawn at random (by the run's seed) the first plan adds beside its
/// one-knob moves from the seed. One-knob steps need several successive gains to combine the
/// knobs that matter together, while a draw from the whole space can land on such a combination
/// at once when they are common (random search led the tuner early on softmax,
/// bench/results/tuner.md). One draw, because a plan adds at most three nodes and each first
/// action opens a cycle of improvement steps: on softmax's 20 rounds (the README's run) the mean
/// best went from 2.0x to 4.3x over six seeds with one draw, against two draws' wider spread.
const SCOUTS: usize = 1;

/// One candidate step of the search: the knob it changes, the assignment, its score.
#[derive(Debug, Clone)]
struct Move {
    knob: String,
    assignment: Assignment,
    score: f64,
}

impl Tuner {
    /// The tuner for `template` on hardware `hw`, the template named `<file>.j2` in messages.
    /// See [`Tuner::for_template`].
    pub fn new(
        template: KernelTemplate,
        hw: IndexMap<String, f64>,
        priors: HashMap<String, f64>,
    ) -> Result<Tuner, TunerError> {
        let path = format!("{}.j2", template.file);
        Tuner::for_template(template, &path, hw, priors)
    }

    /// The tuner for `template` (named `path` in messages) on hardware `hw`. Fails, naming the
    /// file at fault, when a constraint or the template reads a hardware figure the target
    /// lacks, when the all-defaults assignment breaks a constraint or does not render, or, for
    /// spaces of at most [`RENDER_ALL_LIMIT`] valid assignments, when any of them does not
    /// render.
    pub fn for_template(
        template: KernelTemplate,
        path: &str,
        hw: IndexMap<String, f64>,
        priors: HashMap<String, f64>,
    ) -> Result<Tuner, TunerError> {
        template.space.check_figures(&hw)?;
        template.check_figures(path, &hw)?;
        let renderer = template.renderer(path)?;
        let mut tuner = Tuner {
            template,
            renderer,
            hw,
            priors,
            prior_basis: None,
            valid: Vec::new(),
        };
        let space = tuner.space();
        let default = space.default_assignment();
        space
            .check(&default, &tuner.hw)
            .map_err(|error| TunerError::InvalidDefault {
                knobs: space.file_name().to_string(),
                assignment: describe_assignment(&default),
                error,
            })?;
        tuner.render(&default)?;
        if space.size() <= ENUMERATE_LIMIT {
            let valid = space.enumerate_valid(&tuner.hw, RENDER_ALL_LIMIT + 1);
            if valid.len() <= RENDER_ALL_LIMIT {
                for a in &valid {
                    tuner.renderer.render(a, &tuner.hw)?;
                }
                tuner.valid = valid;
            }
        }
        Ok(tuner)
    }

    /// Names what the priors are of (the task's regime, `memory-bound`) in the actions'
    /// rationale.
    pub fn with_prior_basis(mut self, basis: impl Into<String>) -> Tuner {
        self.prior_basis = Some(basis.into());
        self
    }

    /// The template's file name (the rendered kernel's).
    pub fn file(&self) -> &str {
        &self.template.file
    }

    fn space(&self) -> &KnobSpace {
        &self.template.space
    }

    /// The kernel for `a`, its first line recording the assignment. The constraints are checked
    /// again here: a run resumed on other hardware may hold assignments planned for the first.
    pub fn render(&self, a: &Assignment) -> Result<String, TunerError> {
        self.space().check(a, &self.hw).map_err(|error| TunerError::Invalid {
            knobs: self.space().file_name().to_string(),
            assignment: describe_assignment(a),
            error,
        })?;
        let body = self.renderer.render(a, &self.hw)?;
        Ok(format!("{}{body}", self.mark(a)))
    }

    /// The first line of a kernel for `a`.
    fn mark(&self, a: &Assignment) -> String {
        if self.template.file.ends_with(".py") {
            format!("{PY_MARK}{}\n", key(a))
        } else {
            format!("{MARK}{} */\n", key(a))
        }
    }

    /// A kernel for `a` that cannot build and says why: what the coder answers when `a` does
    /// not render, so the failure is a failed candidate of the search (recorded with the
    /// template, line and assignment, never tried again) rather than the end of the run.
    fn failing_kernel(&self, a: &Assignment, error: &TunerError) -> String {
        let message =
            format!("ksearch: the knob tuner could not render this kernel: {error}").replace(['\n', '\r'], " ");
        // A JSON string is a valid C and Python string literal for any text.
        let literal = serde_json::Value::String(message).to_string();
        if self.template.file.ends_with(".py") {
            format!("{}raise RuntimeError({literal})\n", self.mark(a))
        } else {
            format!("{}#error {literal}\n", self.mark(a))
        }
    }

    /// The seed: the all-defaults assignment, rendered.
    pub fn seed(&self) -> Result<String, TunerError> {
        self.render(&self.space().default_assignment())
    }

    /// Answers a planner or coder request of `engine`. `Err` is the text of a fatal failure of
    /// the request, which ends the search with it as the reason: the knob space is exhausted,
    /// or the request is not one the tuner answers.
    pub fn answer(&self, engine: &Engine, request: &Request) -> Result<String, String> {
        self.try_answer(engine, request).map_err(|e| e.to_string())
    }

    fn try_answer(&self, engine: &Engine, request: &Request) -> Result<String, TunerError> {
        let history = History::of(self.space(), engine);
        match request {
            Request::Plan { plan, .. } => Ok(self.plan(engine, plan, &history)?.to_string()),
            Request::Code {
                code,
                node_id,
                base_candidate,
                ..
            } => {
                let a = match engine.config().strategy {
                    Strategy::WorldModel => self.code(engine, *code, node_id, *base_candidate, &history)?,
                    // No tree (`refine`, `evolve`): one step from the candidate the round builds on.
                    _ => self.step_from(engine, *code, *base_candidate, &history)?,
                };
                let fence = ksearch_spec::language_of(self.file()).map_or("c", |l| l.fence_tag());
                let source = self.render(&a).unwrap_or_else(|e| self.failing_kernel(&a, &e));
                Ok(format!(
                    "DESCRIPTION: knobs {}\n```{fence} {}\n{source}```\n",
                    describe_assignment(&a),
                    self.file()
                ))
            }
            _ => Err(TunerError::NotMine),
        }
    }

    fn plan(&self, engine: &Engine, plan: &PlanKind, h: &History) -> Result<serde_json::Value, TunerError> {
        let wm = engine.world_model();
        let default = self.space().default_assignment();
        // Children start from the best configuration measured at their parent: the code a
        // child's action builds on (the engine's base candidate) is that one too.
        let solved = |n: &Node| {
            n.solution_ref
                .as_ref()
                .and_then(|s| engine.candidate(s.candidate_id))
                .and_then(|c| c.sources.iter().find_map(|src| read_mark(self.space(), &src.content)))
                .or_else(|| node_assignment(self.space(), Some(n)))
        };
        let (base_node, base) = match plan {
            PlanKind::Refine { node_id } => {
                // A step that did not beat its parent beyond the noise is no base to build on:
                // the next steps grow from the best measured node instead. (Growing under every
                // measured node let the search spend most of its rounds below a slow branch.)
                let improved = History::node_gain(engine, node_id).is_some_and(|m| m.significant && m.gain > 1.0);
                match engine.best_solved() {
                    Some(best) if !improved && best.node_id != *node_id => (best.node_id.clone(), solved(best)),
                    _ => (node_id.clone(), wm.node(node_id).and_then(solved)),
                }
            }
            PlanKind::Init | PlanKind::TooHard { .. } | PlanKind::Propose => match engine.best_solved() {
                // The root holds the seed; the best solved node grows the tree.
                Some(n) => (n.node_id.clone(), solved(n)),
                None => ("root".to_string(), None),
            },
        };
        let base = base.unwrap_or_else(|| default.clone());
        let mut ops = Vec::new();
        if let PlanKind::Refine { node_id } = plan {
            if let Some(m) = History::node_gain(engine, node_id) {
                // The measurement becomes the node's rating: 5 is "as fast as its parent", and
                // a change within the noise of the two measurements is no change. The noisier
                // the measurements, the less the rating is to be trusted.
                let rating = if m.significant {
                    (5.0 + 10.0 * m.gain.ln()).clamp(0.0, 10.0)
                } else {
                    5.0
                };
                let notes = if m.significant {
                    format!("measured {:.3}x its parent (noise {:.1}%)", m.gain, 100.0 * m.noise)
                } else {
                    format!(
                        "measured {:.3}x its parent, within the noise ({:.1}%): no gain",
                        m.gain,
                        100.0 * m.noise
                    )
                };
                ops.push(json!({"op": "update_node", "node_id": node_id, "set": {
                    "overall_rating": round2(rating), "confidence": round2(confidence(m.noise)),
                    "notes": notes}}));
            }
        }
        // Open actions whose assignment was evaluated since they were planned (an improve step
        // of another cycle reached it) would only be evaluated again: they go.
        let active = wm.tree().active_leaf_id();
        let mut stale = HashSet::new();
        for n in wm.tree().nodes().iter().filter(|n| n.is_open_action()) {
            let tried = node_assignment(self.space(), Some(n)).is_some_and(|a| h.tried.contains(&key(&a)));
            if tried && n.node_id != active && !wm.tree().has_children(&n.node_id) {
                stale.insert(n.node_id.clone());
                ops.push(json!({"op": "delete_node", "node_id": n.node_id}));
            }
        }
        let open_left = wm.frontier().iter().filter(|n| !stale.contains(&n.node_id)).count();
        let skip = |k: &str| h.tried.contains(k) || h.planned.contains(k);
        // A plan may add at most 3 nodes: the first one's scouts take their share.
        let scouts = match plan {
            PlanKind::Init => self.scouts(engine.config().rng_seed, &skip),
            _ => Vec::new(),
        };
        let room = 3 - scouts.len();
        let mut moves = self.best_moves(&base, h, room, engine.config().rng_seed, &skip);
        if moves.is_empty() {
            // Nothing new one step from the base: the nearest untried step from the best other
            // measured assignments, so the search goes on wherever untried ones are left.
            moves = h
                .by_merit
                .iter()
                .map(|b| self.best_moves(b, h, room, engine.config().rng_seed, &skip))
                .find(|m| !m.is_empty())
                .unwrap_or_default();
        }
        if moves.is_empty() && scouts.is_empty() && open_left == 0 {
            return Err(self.exhausted(h));
        }
        {
            for (i, a) in scouts.into_iter().enumerate() {
                ops.push(json!({"op": "insert_node", "node": {
                    "parent_id": base_node,
                    "decision": "scout",
                    "choice": format!("draw {}", i + 1),
                    "overall_rating": 5.0,
                    "confidence": 0.2,
                    "notes": "an assignment drawn at random from the whole space, to find where to climb from",
                    "action": {
                        "title": format!("try a random assignment ({})", i + 1),
                        "description": format!("knobs: {}", key(&a)),
                        "rationale": "a few draws from the whole space find combinations of knobs that single steps reach late",
                        "difficulty": 1,
                        // Before the one-knob moves (scores up to 0.99 are theirs only after gains).
                        "score": 0.95,
                    }
                }}));
            }
        }
        for m in moves {
            let value = m.assignment.get(&m.knob).map(|v| v.to_string()).unwrap_or_default();
            let prior = match &self.prior_basis {
                Some(basis) => format!("prior {:.2} ({basis})", self.prior(&m.knob)),
                None => format!("prior {:.2}", self.prior(&m.knob)),
            };
            ops.push(json!({"op": "insert_node", "node": {
                "parent_id": base_node,
                "decision": format!("knob {}", m.knob),
                "choice": format!("{} = {value}", m.knob),
                "overall_rating": round2(5.0 + 5.0 * (self.knob_score(&m.knob, h) - 0.5)),
                "confidence": 0.3,
                "notes": self.space().knob(&m.knob).map(|k| k.help.clone()).unwrap_or_default(),
                "action": {
                    "title": format!("set {} = {value}", m.knob),
                    "description": format!("knobs: {}", key(&m.assignment)),
                    "rationale": format!("{prior} from the pattern library, adjusted by measurements"),
                    "difficulty": 1,
                    "score": round2(m.score.clamp(0.0, 1.0)),
                }
            }}));
        }
        Ok(json!({ "ops": ops }))
    }

    fn code(
        &self,
        engine: &Engine,
        kind: CodeKind,
        node_id: &str,
        base: Option<i64>,
        h: &History,
    ) -> Result<Assignment, TunerError> {
        let node_a = node_assignment(self.space(), engine.world_model().node(node_id))
            .ok_or_else(|| TunerError::NoAssignment(node_id.to_string()))?;
        let from = match kind {
            // The node's own assignment, unless it was evaluated meanwhile or breaks a
            // constraint here (planned on other hardware): then the nearest untried step from it.
            CodeKind::Action => {
                if !h.tried.contains(&key(&node_a)) && self.space().check(&node_a, &self.hw).is_ok() {
                    return Ok(node_a);
                }
                node_a
            }
            // Improve: step from the cycle's best (the request's base, the code the engine calls
            // the best of this step), else the best of this node's candidates; debug: from what
            // failed.
            CodeKind::Improve => base
                .and_then(|id| engine.candidate(id))
                .and_then(|c| c.sources.iter().find_map(|s| read_mark(self.space(), &s.content)))
                .or_else(|| h.best_for_node(engine, node_id))
                .unwrap_or(node_a),
            CodeKind::Debug => h.last_for_node(node_id).unwrap_or(node_a),
        };
        self.next_untried(engine, &from, h)
    }

    /// For the strategies without a tree: the best untried one-knob step from the base
    /// candidate's assignment (the defaults when there is none, which are also the answer to a
    /// request to write the kernel from the specification, unless they were evaluated already).
    fn step_from(
        &self,
        engine: &Engine,
        kind: CodeKind,
        base: Option<i64>,
        h: &History,
    ) -> Result<Assignment, TunerError> {
        let from = base
            .and_then(|id| engine.candidate(id))
            .and_then(|c| c.sources.iter().find_map(|s| read_mark(self.space(), &s.content)));
        let from = match from {
            Some(from) => from,
            None => {
                let default = self.space().default_assignment();
                if kind == CodeKind::Action && !h.tried.contains(&key(&default)) {
                    return Ok(default);
                }
                default
            }
        };
        self.next_untried(engine, &from, h)
    }

    /// The best untried step from `from`, else from the best other evaluated assignments
    /// (planned but unevaluated assignments are left to their actions while anything else is
    /// left); `Exhausted` when every assignment reachable by one-knob steps has been evaluated.
    fn next_untried(&self, engine: &Engine, from: &Assignment, h: &History) -> Result<Assignment, TunerError> {
        let seed = engine.config().rng_seed;
        let unplanned = |k: &str| h.tried.contains(k) || h.planned.contains(k);
        let untried = |k: &str| h.tried.contains(k);
        for skip in [&unplanned as &dyn Fn(&str) -> bool, &untried] {
            let found = std::iter::once(from)
                .chain(h.by_merit.iter())
                .find_map(|b| self.best_moves(b, h, 1, seed, skip).into_iter().next());
            if let Some(m) = found {
                return Ok(m.assignment);
            }
        }
        Err(self.exhausted(h))
    }

    fn exhausted(&self, h: &History) -> TunerError {
        let space = self.space();
        let of = if space.size() <= ENUMERATE_LIMIT {
            let valid = space.enumerate_valid(&self.hw, usize::MAX).len();
            format!(" ({} of the {valid} valid assignments)", h.tried.len())
        } else {
            String::new()
        };
        TunerError::Exhausted(format!(
            "every assignment reachable by one-knob steps from the {} evaluated has been evaluated{of}",
            h.tried.len()
        ))
    }

    /// The `n` most promising valid one-step changes of `from` that `skip` does not rule out.
    /// The run's seed breaks ties and near-ties, so different seeds explore differently and
    /// the same seed replays the same choices.
    fn best_moves(
        &self,
        from: &Assignment,
        h: &History,
        n: usize,
        seed: u64,
        skip: &dyn Fn(&str) -> bool,
    ) -> Vec<Move> {
        let space = self.space();
        let mut moves: Vec<(usize, Move)> = Vec::new();
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
                let k = key(&a);
                if skip(&k) || !seen.insert(k.clone()) {
                    continue;
                }
                let distance = pos.abs_diff(j) as f64;
                let score = self.knob_score(&knob.name, h) - 0.01 * distance + jitter(seed, &k);
                moves.push((
                    i,
                    Move {
                        knob: knob.name.clone(),
                        assignment: a,
                        score,
                    },
                ));
            }
        }
        // Highest score first; ties by knob order, then value order (stable sort keeps it).
        moves.sort_by(|x, y| {
            y.1.score
                .partial_cmp(&x.1.score)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(x.0.cmp(&y.0))
        });
        let mut seen_knobs = HashSet::new();
        let mut out: Vec<Move> = Vec::new();
        // Prefer distinct knobs (true alternatives), then fill with the rest.
        for (_, m) in &moves {
            if out.len() < n && seen_knobs.insert(m.knob.clone()) {
                out.push(m.clone());
            }
        }
        for (_, m) in &moves {
            if out.len() < n && !out.iter().any(|o| o.assignment == m.assignment) {
                out.push(m.clone());
            }
        }
        out
    }

    /// `a` if it satisfies every constraint, else the valid assignment nearest to it that changes
    /// one knob other than `fixed` (fewest value steps; knob order breaks ties).
    fn valid_or_repaired(&self, a: Assignment, fixed: &str) -> Option<Assignment> {
        let space = self.space();
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

    /// Up to [`SCOUTS`] valid assignments drawn by `seed` (the same ones again in a replay),
    /// none of them the defaults or already tried or planned.
    fn scouts(&self, seed: u64, skip: &dyn Fn(&str) -> bool) -> Vec<Assignment> {
        let default = key(&self.space().default_assignment());
        let mut drawn: Vec<(f64, &Assignment)> = self
            .valid
            .iter()
            .map(|a| (jitter(seed ^ 0x5C0, &key(a)), a))
            .filter(|(_, a)| {
                let k = key(a);
                k != default && !skip(&k)
            })
            .collect();
        drawn.sort_by(|x, y| x.0.total_cmp(&y.0));
        drawn.into_iter().take(SCOUTS).map(|(_, a)| a.clone()).collect()
    }

    fn prior(&self, knob: &str) -> f64 {
        self.priors.get(knob).copied().unwrap_or(0.5)
    }

    /// Prior, sharpened by what changes of this knob did: each measured change moves the score
    /// by its log gain (a 10% gain adds about 0.1; a change within the noise adds nothing), at
    /// most halfway to 0 or 1.
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

/// How far a measured rating is to be trusted: 0.8 for noiseless measurements, falling as the
/// noise (relative IQR) rises: 0.67 at 2%, 0.4 at 10%.
fn confidence(noise: f64) -> f64 {
    0.8 / (1.0 + 10.0 * noise.max(0.0))
}

/// A number in [0, SEED_JITTER) drawn from the run's seed and the assignment: a pure function,
/// so the same seed makes the same choices in a replay or a resume.
fn jitter(seed: u64, key: &str) -> f64 {
    // FNV-1a over the key, mixed with the seed by splitmix64's finaliser.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * SEED_JITTER
}

/// An assignment as the tuner records it (JSON, in the knob file's order).
fn key(a: &Assignment) -> String {
    serde_json::to_string(a).unwrap_or_default()
}

/// The assignment an action carries (`knobs: {...}` in its description).
/// The assignment an open or solved node of the tuner stands for (its action's description).
fn node_assignment(space: &KnobSpace, node: Option<&Node>) -> Option<Assignment> {
    let d = &node?.action.as_ref()?.description;
    Some(complete(space, serde_json::from_str(d.strip_prefix("knobs: ")?).ok()?))
}

/// The assignment a rendered kernel was made from (its first line).
fn read_mark(space: &KnobSpace, source: &str) -> Option<Assignment> {
    let line = source.lines().next()?;
    let json = match line.strip_prefix(PY_MARK) {
        Some(rest) => rest,
        None => line.strip_prefix(MARK)?.strip_suffix(" */")?,
    };
    Some(complete(space, serde_json::from_str(json).ok()?))
}

/// `a` over the template's knobs as they are now: a knob added to the template since `a` was
/// recorded takes its default, one removed is dropped. A run started before its task's
/// template changed resumes with the assignments it recorded meaning what they meant.
fn complete(space: &KnobSpace, a: Assignment) -> Assignment {
    let mut full = space.default_assignment();
    for (knob, value) in a {
        if let Some(slot) = full.get_mut(&knob) {
            *slot = value;
        }
    }
    full
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_a_small_pure_function_of_seed_and_assignment() {
        let a = jitter(1, "{\"x\":1}");
        assert_eq!(a, jitter(1, "{\"x\":1}"));
        assert_ne!(a, jitter(2, "{\"x\":1}"));
        assert_ne!(a, jitter(1, "{\"x\":2}"));
        for s in 0..200 {
            let j = jitter(s, "k");
            assert!((0.0..SEED_JITTER).contains(&j), "{j}");
        }
    }

    #[test]
    fn recorded_assignments_are_read_over_the_templates_knobs_as_they_are_now() {
        let space = KnobSpace::parse(
            "knobs.toml",
            "[[knob]]\nname = \"acc\"\nvalues = [1, 2]\ndefault = 1\n\n\
             [[knob]]\nname = \"threads\"\nvalues = [1, 2]\ndefault = 1\n",
        )
        .unwrap();
        // Recorded before `threads` existed, with a knob since removed.
        let source = format!("{MARK}{{\"acc\":2,\"gone\":true}} */\nvoid k(void) {{}}\n");
        let a = read_mark(&space, &source).unwrap();
        assert_eq!(key(&a), "{\"acc\":2,\"threads\":1}");
    }

    #[test]
    fn confidence_falls_as_noise_rises() {
        assert_eq!(confidence(0.0), 0.8);
        assert!(confidence(0.02) < confidence(0.0));
        assert!(confidence(0.10) < confidence(0.02));
        assert!(confidence(0.10) > 0.0);
    }
}
