//! The search engine: a deterministic state machine over a durable log (docs/engine.md).
//!
//! It never calls an LLM or an evaluator. The driver asks [`Engine::in_flight`] (or
//! [`Engine::pending`], the oldest of them) what to serve, serves it, appends the resulting
//! [`Event`] to the run store, then hands it to [`Engine::apply`]. With `parallel` > 1 several
//! requests can be outstanding at once; an event answers any of them by id, and the order of
//! the log is the truth (docs/engine.md, "Parallel requests"). Replaying the stored events
//! into a fresh engine rebuilds the same state, which is how `resume` and `replay` work.
//! Everything here is pure: no clock, no I/O, and no randomness beyond a PRNG seeded from the
//! config and advanced only while applying events.
//!
//! Three strategies share the round budget and the final re-measurement (finish.rs):
//! `world-model` (cycles.rs), `refine` (refine.rs) and `evolve` (evolve.rs); the latter two
//! never call the planner. The answering events are handled in handlers.rs, a raised round
//! budget in budget.rs.

mod budget;
mod candidates;
mod compare;
mod cycles;
mod evidence;
mod evolve;
mod finish;
mod handlers;
mod knob_sweep;
mod prompts;
mod protocol;
mod refine;
mod remeasure;
mod render;
mod resources;

pub use candidates::{beats, verdict, Candidate};
pub use compare::{
    beats_by, compare, held_back_by_noise_of, own_noise, rank_key, CompareRule, Comparison, Order, MIN_NOISE,
};
pub use evidence::{
    clip, diff_sources, error_excerpt, parse_description, times_line, AttemptRecord, ATTEMPTS_BUDGET, ATTEMPTS_SHOWN,
    DIFFS_SHOWN, DIFF_MAX_CHARS, DIFF_MAX_LINES,
};
pub use evolve::{descriptors, Elite, Evolve, Island, Migration, Step};
pub use protocol::{
    CodeKind, EngineConfig, EvalSummary, Event, KernelResources, PlanKind, Purpose, Request, Source, Strategy,
    TaskBrief, WorkloadSummary,
};
pub use resources::{kernel_name, resource_brief, resource_lines};

use crate::world_model::{NodeId, WorldModel};
use ksearch_messages::extract::code_files;
use std::collections::HashMap;

/// A driver fed the engine something it did not ask for, or the engine's own invariants broke.
/// Either way it is a defect or a tampered log, never a planner or coder mistake (those are
/// handled inside the search).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// An answer event that no outstanding request asked for.
    #[error("event {event} does not answer the pending request ({pending})")]
    Unexpected {
        /// The event's kind (`coder_answered`, ...).
        event: String,
        /// The requests the engine was waiting on, described (or that it waited on none).
        pending: String,
    },
    /// A second `started` event.
    #[error("the search is already started")]
    AlreadyStarted,
    /// An invariant of the engine broke; the message says which.
    #[error("internal: {0}")]
    Internal(String),
    /// A `budget_raised` event the run cannot take; the message says why.
    #[error("the round budget cannot be raised: {0}")]
    BudgetNotRaised(String),
}

/// One attempt of a cycle: a coder answer and what became of it.
#[derive(Debug, Clone, PartialEq)]
struct Attempt {
    round: u32,
    kind: CodeKind,
    candidate: Option<i64>,
    /// For answers that yielded no candidate: why.
    failure: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct Cycle {
    node_id: NodeId,
    base: Option<i64>,
    attempts: Vec<Attempt>,
    best: Option<i64>,
    /// Rounds of consecutive steps that did not beat `best` (a step is one attempt, or
    /// `samples` at once: a step of N that all fail to improve counts N).
    stale: u32,
    /// Attempts in the current step, and those not yet resolved (measured, or no code).
    step_size: u32,
    step_left: u32,
    /// Whether an attempt of the current step beat the cycle's best.
    step_improved: bool,
}

/// A request the engine waits on, with the round it belongs to (the round counter moves on
/// while other requests are out, so an answer must know its own).
#[derive(Debug, Clone, PartialEq)]
struct Outstanding {
    request: Request,
    round: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Running,
    Finalizing,
    Finished,
}

/// The search engine: a pure state machine. Events go in through [`Engine::apply`], requests
/// come out; it does no I/O, so replaying a run's event log rebuilds the same engine.
#[derive(Debug, Clone)]
pub struct Engine {
    task: Option<TaskBrief>,
    config: EngineConfig,
    wm: WorldModel,
    candidates: Vec<Candidate>,
    phase: Phase,
    /// The requests waiting for an answer, oldest first (at most `parallel`).
    outstanding: Vec<Outstanding>,
    /// `Request::Finished` once the run is over.
    finished: Option<Request>,
    /// The request the event being applied answers (set only inside `apply`).
    answering: Option<Outstanding>,
    requests_issued: u64,
    round: u32,
    cycle_count: u32,
    cycle: Option<Cycle>,
    /// Re-asks used on the current planner request, and the feedback for the next one.
    planner_try: u32,
    /// Cycles spent per node, for the optional exploration bonus.
    visits: HashMap<NodeId, u32>,
    final_queue: Vec<i64>,
    /// The candidates of the final re-measurement under way or made (its queue, before it
    /// pops): only their final results decide the winner, not those of an earlier end of a run
    /// whose budget was raised since.
    finalists: Vec<i64>,
    stop_reason: Option<String>,
    /// Where the round budget ended the search, for a raise of it (budget.rs).
    resume_at: Option<budget::ResumeAt>,
    events_applied: u64,
    /// The cycle that ended last, which the refine / too-hard prompt describes.
    last_cycle: Option<Cycle>,
    /// Why the planner is asked to propose, for its prompt.
    propose_reason: String,
    /// State of the `refine` strategy (unused by the others).
    refine: refine::Refine,
    /// State of the `evolve` strategy (`Some` only when it runs).
    evolve: Option<Evolve>,
    /// The knob sweep under way, and the rounds all sweeps have used (knob_sweep.rs).
    sweep: Option<knob_sweep::Sweep>,
    sweep_rounds: u32,
    /// The run's best passing candidate under the paired rule: replaced, in the order
    /// evaluations are applied, by a candidate that beats it (`best()` under the legacy rule).
    best: Option<i64>,
    /// Candidates measured since the run's best became best that read faster than it but were
    /// held back by its noise alone, in the order measured: what a re-measurement of the best
    /// settles (cleared when the best changes).
    challengers: Vec<i64>,
    /// Every coder answer and knob sweep variant, in the order they were made.
    attempts: Vec<AttemptRecord>,
    /// A refine or too-hard planner step given up after `planner_tries` rejected answers: its
    /// evidence and the last errors, for the propose prompt that may follow (cleared when the
    /// next cycle starts).
    gave_up: Option<String>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

impl Engine {
    /// An engine that has seen no event; the first must be `started`.
    pub fn new() -> Engine {
        Engine {
            task: None,
            config: EngineConfig::default(),
            wm: WorldModel::new(""),
            candidates: Vec::new(),
            phase: Phase::NotStarted,
            outstanding: Vec::new(),
            finished: None,
            answering: None,
            requests_issued: 0,
            round: 0,
            cycle_count: 0,
            cycle: None,
            planner_try: 0,
            visits: HashMap::new(),
            final_queue: Vec::new(),
            finalists: Vec::new(),
            stop_reason: None,
            resume_at: None,
            events_applied: 0,
            last_cycle: None,
            propose_reason: String::new(),
            refine: refine::Refine::default(),
            evolve: None,
            sweep: None,
            sweep_rounds: 0,
            best: None,
            challengers: Vec::new(),
            attempts: Vec::new(),
            gave_up: None,
        }
    }

    /// Rebuilds an engine from a recorded event log.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Engine, EngineError> {
        let mut engine = Engine::new();
        for e in events {
            engine.apply(e)?;
        }
        Ok(engine)
    }

    // --- views ----------------------------------------------------------------------------

    /// What the driver must serve next: the oldest outstanding request, or `Finished` once the
    /// run is over (`None` before `started`). With `parallel` = 1 it is the only request.
    pub fn pending(&self) -> Option<&Request> {
        self.outstanding.first().map(|o| &o.request).or(self.finished.as_ref())
    }

    /// Every request waiting for an answer, oldest first (empty once finished). Events may
    /// answer them in any order.
    pub fn in_flight(&self) -> Vec<&Request> {
        self.outstanding.iter().map(|o| &o.request).collect()
    }

    /// The outstanding request with this id.
    pub fn outstanding(&self, request_id: &str) -> Option<&Request> {
        self.outstanding
            .iter()
            .map(|o| &o.request)
            .find(|r| r.id() == Some(request_id))
    }

    /// The round an outstanding request belongs to (0 for the seed's evaluation).
    pub fn round_of(&self, request_id: &str) -> Option<u32> {
        self.outstanding
            .iter()
            .find(|o| o.request.id() == Some(request_id))
            .map(|o| o.round)
    }

    /// How many requests may be outstanding at once (`EngineConfig::parallel`, at least 1).
    pub fn parallel(&self) -> usize {
        self.config.parallel.max(1) as usize
    }

    /// The current world model (a root-only tree under `refine` and `evolve`).
    pub fn world_model(&self) -> &WorldModel {
        &self.wm
    }

    /// Every candidate so far, in id order.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// The candidate with id `id`, if there is one.
    pub fn candidate(&self, id: i64) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.id == id)
    }

    /// The current round (rounds started so far).
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Cycles started so far.
    pub fn cycle_count(&self) -> u32 {
        self.cycle_count
    }

    /// The configuration the `started` event gave (defaults before it).
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The task as the `started` event described it; `None` before it.
    pub fn task(&self) -> Option<&TaskBrief> {
        self.task.as_ref()
    }

    /// How many events [`Engine::apply`] has taken.
    pub fn events_applied(&self) -> u64 {
        self.events_applied
    }

    /// The search reached its end (budget of rounds, nothing left to do, a fatal failure).
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// The best passing candidate of the search so far, by the run's rule
    /// (`EngineConfig::compare`): under `paired`, the first candidate to pass, replaced by every
    /// later-measured one that beats the one before it beyond the noise (so a candidate within the
    /// noise of the best never displaces it); under the legacy `speedup` rule, the highest
    /// search-time speedup (the earliest candidate on ties).
    pub fn best(&self) -> Option<&Candidate> {
        match self.config.compare {
            CompareRule::Paired => self.best.and_then(|id| self.candidate(id)),
            CompareRule::Speedup => {
                self.candidates
                    .iter()
                    .filter(|c| c.passed())
                    .fold(None, |best: Option<&Candidate>, c| match best {
                        Some(b) if b.speedup() >= c.speedup() => Some(b),
                        _ => Some(c),
                    })
            }
        }
    }

    /// Whether `a` beats `b` by the run's rule (docs/engine.md, "Comparing candidates"): both
    /// passed and `a` is faster beyond the noise; anything that passed beats nothing.
    pub fn beats(&self, a: &EvalSummary, b: Option<&EvalSummary>) -> bool {
        beats_by(self.config.compare, a, b)
    }

    /// `a` measured against `b` by the run's rule; `None` unless both passed.
    pub fn compare(&self, a: &EvalSummary, b: &EvalSummary) -> Option<Comparison> {
        compare(self.config.compare, a, b)
    }

    /// Candidate `a`'s measurement against candidate `b`'s by the same harness version (`b`'s
    /// re-measurement by it where its own result is another's); `None` unless both passed and
    /// such a measurement of `b` exists.
    pub fn compare_candidates(&self, a: i64, b: i64) -> Option<Comparison> {
        let ra = self.candidate(a)?.result.as_ref()?;
        let rb = self.candidate(b)?.measured_by(ra.harness.as_deref())?;
        self.compare(ra, rb)
    }

    /// What the planner and `ksearch show` say of candidate `a` against `b` (its parent): the
    /// comparison, or, where both passed but only under different harness versions, that they
    /// were not compared and why (a ratio of such times measures the harness and the host as
    /// much as the kernels: gqa_paged_decode's session 17, bench/results/searches.md).
    pub fn describe_against(&self, a: i64, b: i64) -> Option<String> {
        let label = format!("candidate {b}");
        if let Some(cmp) = self.compare_candidates(a, b) {
            return Some(cmp.describe(&label));
        }
        let ra = self.candidate(a)?.result.as_ref().filter(|r| r.passed())?;
        let rb = self.candidate(b)?.result.as_ref().filter(|r| r.passed())?;
        let version = |r: &EvalSummary| r.harness.clone().unwrap_or_else(|| "unrecorded".into());
        (ra.harness != rb.harness).then(|| {
            format!(
                "not compared with {label}: it was measured by harness {}, this by {} (times of \
                 different harness versions are not compared)",
                version(rb),
                version(ra)
            )
        })
    }

    /// The passing candidates, fastest first by the run's rule: the best first, then the others
    /// by their gain over it (point estimates; ties by id). Under the legacy rule, by speedup.
    pub fn ranked(&self) -> Vec<&Candidate> {
        let best = self.best();
        let anchor = best.and_then(|b| b.result.as_ref());
        let mut rest: Vec<(&Candidate, f64)> = self
            .candidates
            .iter()
            .filter(|c| c.passed() && Some(c.id) != best.map(|b| b.id))
            .filter_map(|c| Some((c, rank_key(self.config.compare, c.result.as_ref()?, anchor)?)))
            .collect();
        rest.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.id.cmp(&y.0.id)));
        best.into_iter().chain(rest.into_iter().map(|(c, _)| c)).collect()
    }

    /// The solved node whose attached candidate is the best by the run's rule (the node of the
    /// run's best when it is attached; otherwise the first attached candidate beaten by none
    /// later in node order). Under the legacy rule, the highest attached speedup
    /// ([`crate::world_model::DecisionTree::best_solved`]).
    pub fn best_solved(&self) -> Option<&crate::world_model::Node> {
        let tree = self.wm.tree();
        if self.config.compare == CompareRule::Speedup {
            return tree.best_solved();
        }
        let solved = || tree.nodes().iter().filter(|n| n.solution_ref.is_some());
        let id_of = |n: &crate::world_model::Node| n.solution_ref.as_ref().map(|s| s.candidate_id);
        if let Some(best) = self.best().map(|b| b.id) {
            if let Some(n) = solved().find(|n| id_of(n) == Some(best)) {
                return Some(n);
            }
        }
        let result = |n: &crate::world_model::Node| id_of(n).and_then(|id| self.candidate(id)?.result.as_ref());
        solved().fold(None, |best: Option<&crate::world_model::Node>, n| match best {
            Some(b) if !result(n).is_some_and(|r| self.beats(r, result(b))) => Some(b),
            _ => Some(n),
        })
    }

    /// Every coder answer (with or without code) and knob sweep variant of the run, in the order
    /// they were made: what `ksearch show` and the prompts list as attempts.
    pub fn attempts(&self) -> &[AttemptRecord] {
        &self.attempts
    }

    /// What candidate `id` changed, in one line: the coder's `DESCRIPTION:` line, a sweep
    /// variant's knob values, or the engine's note.
    pub fn description(&self, id: i64) -> Option<&str> {
        evidence::description_of(self, self.candidate(id)?)
    }

    /// The islands and archives of the `evolve` strategy (`None` for the other strategies).
    pub fn evolve(&self) -> Option<&Evolve> {
        self.evolve.as_ref()
    }

    /// The node the current cycle works on.
    pub fn current_node(&self) -> Option<&str> {
        self.cycle.as_ref().map(|c| c.node_id.as_str())
    }

    /// Checks an answer to outstanding request `request_id` without applying anything: `Ok`
    /// when the engine would accept it, else every error it has at once, one line each (for a
    /// planner answer: the JSON, the edit script's shape and value ranges and the rules that
    /// depend on the tree; for a coder answer: the code blocks). The same checks run when the
    /// answer is applied, and a rejected planner answer is re-asked with the same list (a
    /// rejected coder answer becomes a `format_error` attempt). A request that is not
    /// outstanding, or an evaluation (answered by the evaluator, not by text), is an error too.
    /// Pure, so `ksearch agent submit` and MCP `submit_answer` can refuse an answer before
    /// recording it (the request stays outstanding and no try is used).
    pub fn check_answer(&self, request_id: &str, text: &str) -> Result<(), Vec<String>> {
        let Some(request) = self.outstanding(request_id) else {
            let waiting: Vec<&str> = self.outstanding.iter().filter_map(|o| o.request.id()).collect();
            return Err(vec![format!(
                "no request {request_id} is waiting for an answer (waiting: {})",
                if waiting.is_empty() {
                    "none".to_string()
                } else {
                    waiting.join(", ")
                }
            )]);
        };
        match request {
            Request::Plan { plan, .. } => self.checked_plan(plan, text).map(|_| ()),
            Request::Code { .. } => {
                let default_file = self.task_ref().map_err(|e| vec![e.to_string()])?.default_file.clone();
                code_files(text, Some(&default_file))
                    .map(|_| ())
                    .map_err(|e| vec![format!("format_error: {e}")])
            }
            Request::Evaluate { .. } => Err(vec![format!(
                "request {request_id} is an evaluation: the evaluator answers it, not a text"
            )]),
            Request::Finished { .. } => Err(vec!["the run is finished".to_string()]),
        }
    }

    // --- the state machine ------------------------------------------------------------------

    /// Takes one event: updates the state and queues the requests it calls for. An error means
    /// a defect of the driver or a tampered log (see [`EngineError`]).
    pub fn apply(&mut self, event: &Event) -> Result<(), EngineError> {
        let answered = self.answered_by(event)?;
        self.answering = answered.map(|i| self.outstanding.remove(i));
        let applied = self.apply_answer(event);
        self.answering = None;
        applied?;
        self.events_applied += 1;
        Ok(())
    }

    fn apply_answer(&mut self, event: &Event) -> Result<(), EngineError> {
        match event {
            Event::Started { task, config } => self.on_started(task, config)?,
            Event::PlannerAnswered { text, .. } => self.on_planner(Ok(text))?,
            Event::CoderAnswered { text, .. } => self.on_coder(Ok(text))?,
            Event::Evaluated {
                candidate_id, summary, ..
            } => self.on_evaluated(*candidate_id, summary)?,
            Event::BudgetRaised { rounds } => self.raise_budget(*rounds)?,
            Event::RequestFailed { error, fatal, .. } => {
                if *fatal {
                    self.stop_reason = Some(error.clone());
                    if self.phase == Phase::Finalizing {
                        self.finish_now();
                    } else {
                        self.finalize()?;
                    }
                } else {
                    match self.answering.clone().map(|a| a.request) {
                        Some(Request::Plan { .. }) => self.on_planner(Err(error))?,
                        Some(Request::Code { .. }) => self.on_coder(Err(error))?,
                        Some(Request::Evaluate { candidate_id, .. }) => {
                            let summary = EvalSummary::failure("harness_error", error.clone());
                            self.on_evaluated(candidate_id, &summary)?
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// The index of the outstanding request `event` answers (`None` for `started`); an event
    /// that answers none of them is refused, so no request is ever answered twice.
    fn answered_by(&self, event: &Event) -> Result<Option<usize>, EngineError> {
        let answers = |r: &Request| match (event, r) {
            (Event::PlannerAnswered { request_id, .. }, Request::Plan { id, .. }) => request_id == id,
            (Event::CoderAnswered { request_id, .. }, Request::Code { id, .. }) => request_id == id,
            (
                Event::Evaluated {
                    request_id,
                    candidate_id,
                    ..
                },
                Request::Evaluate {
                    id, candidate_id: c, ..
                },
            ) => request_id == id && candidate_id == c,
            (Event::RequestFailed { request_id, .. }, r) => r.id() == Some(request_id.as_str()),
            _ => false,
        };
        if let Event::Started { .. } = event {
            if self.phase != Phase::NotStarted {
                return Err(EngineError::AlreadyStarted);
            }
            return Ok(None);
        }
        if let Event::BudgetRaised { .. } = event {
            return Ok(None);
        }
        match self.outstanding.iter().position(|o| answers(&o.request)) {
            Some(i) => Ok(Some(i)),
            None => {
                let waiting: Vec<String> = self
                    .outstanding
                    .iter()
                    .map(|o| format!("{} {}", o.request.role(), o.request.id().unwrap_or("-")))
                    .collect();
                Err(EngineError::Unexpected {
                    event: event.kind().to_string(),
                    pending: if waiting.is_empty() {
                        "none".to_string()
                    } else {
                        waiting.join(", ")
                    },
                })
            }
        }
    }

    /// Adds a request to the outstanding ones.
    fn issue(&mut self, request: Request, round: u32) {
        self.outstanding.push(Outstanding { request, round });
    }

    /// The round of the request being answered (the current round outside `apply`).
    fn answered_round(&self) -> u32 {
        self.answering.as_ref().map(|a| a.round).unwrap_or(self.round)
    }

    fn next_id(&mut self) -> String {
        self.requests_issued += 1;
        format!("r{}", self.requests_issued)
    }

    fn task_ref(&self) -> Result<&TaskBrief, EngineError> {
        self.task
            .as_ref()
            .ok_or_else(|| EngineError::Internal("no task before `started`".into()))
    }
}
