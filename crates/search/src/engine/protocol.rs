//! What flows between the engine and its driver: events in, requests out. Both are serialised
//! into the run store, so their field names are a file format: add fields with defaults, never
//! rename.

use super::compare::CompareRule;
use ksearch_messages::Message;
use serde::{Deserialize, Serialize};

/// A source file of a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The file's relative path in the solution, e.g. `kernel.cu`.
    pub path: String,
    /// The file's full text.
    pub content: String,
}

/// What the engine needs to know about the task, fixed for the whole run and recorded in the
/// `started` event so a replay sees exactly what the original run saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskBrief {
    /// The task's name as its definition gives it, e.g. `mamba_scan`.
    pub name: String,
    /// The task for the planner and coder: description, inputs and outputs, reference, workloads.
    pub text: String,
    /// Language of candidates (`c`, `cuda`, ...).
    pub language: ksearch_spec::Language,
    /// The calling convention a kernel must follow, in words.
    pub convention: String,
    /// The file name a single unnamed code block is given.
    pub default_file: String,
    /// The target device's slice of the knowledge base (may be empty).
    pub target: String,
    /// Existing implementations to adapt (the task's `[[expertise]]`, rendered), shown beside
    /// the target's translation layer at the `full` context level; empty otherwise and in runs
    /// recorded before it existed.
    #[serde(default)]
    pub expertise: String,
    /// The naive starting kernel, evaluated first and attached to the root.
    pub seed: Option<Vec<Source>>,
}

/// Knobs of the method (the K-Search paper, arXiv 2602.19128, gives the published defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineConfig {
    /// Coder rounds (one code answer + one evaluation each) before the run stops.
    pub rounds: u32,
    /// Actions harder than this are not selected.
    pub difficulty_cap: u8,
    /// A cycle ends after this many consecutive rounds without beating the cycle's best.
    pub stagnation_window: u32,
    /// The planner is asked to propose when the frontier has fewer actions than this.
    pub min_frontier: usize,
    /// How often a planner answer that fails validation is re-asked.
    pub planner_tries: u32,
    /// UCB exploration weight; 0 (off) reproduces the paper.
    pub exploration: f64,
    /// Passing candidates re-measured at the end, best first.
    pub final_top_k: usize,
    /// Caps of the world model's compact rendering in prompts.
    pub wm_max_nodes: usize,
    /// The most characters of that rendering.
    pub wm_max_chars: usize,
    /// How candidates are generated; every strategy spends the same budget (`rounds`).
    pub strategy: Strategy,
    /// `evolve`: how many islands (separate populations) take turns, round-robin.
    pub islands: u32,
    /// `evolve`: every this many rounds the best of each island is copied to the next island
    /// (0: never).
    pub migration_interval: u32,
    /// `evolve`: bins of the MAP-Elites archive per descriptor (source size, loop count).
    pub archive_grid: [u32; 2],
    /// Seed of the engine's PRNG: `evolve` draws parents and inspirations from it, and the knob
    /// tuner breaks ties between equally scored moves with it.
    pub rng_seed: u64,
    /// Share of `rounds` that knob sweeps of written kernels may use together (world-model
    /// strategy; 0 turns them off and drops the annotation from the coder's instructions).
    pub knob_share: f64,
    /// Requests that may be outstanding at once (docs/engine.md, "Parallel requests"). 1 (the
    /// default) serves one request at a time, as every run before this setting did. Above 1,
    /// `evolve` works on up to this many islands at once, and every strategy re-measures up to
    /// this many finalists at once; `world-model` and `refine` otherwise stay one step at a time.
    pub parallel: u32,
    /// How "faster than" is decided everywhere (docs/engine.md, "Comparing candidates"):
    /// `paired` (the default) by the candidates' own per-workload times; a `started` event
    /// without the field (a run recorded before it) means `speedup`, the rule it was made with,
    /// so its log replays to the same decisions.
    #[serde(default = "CompareRule::recorded_before_paired")]
    pub compare: CompareRule,
    /// `world-model`: coder answers asked for at once at each step of a cycle (parallel
    /// sampling, docs/engine.md "Parallel requests"): each is its own round and candidate, the
    /// step keeps the fastest, and the cycle goes on when all are measured. 1 (the default, and
    /// what a `started` event without the field means) asks one at a time.
    #[serde(default = "one")]
    pub samples: u32,
    /// How often the run's best may be measured again (`Evaluate(remeasure)`) when a later
    /// candidate reads faster than it beyond that candidate's own noise but within the best's:
    /// the best's noisy measurement alone keeps the challenger from winning (docs/engine.md,
    /// "Re-measuring a noisy best"). 0 never; a `started` event without the field (a run
    /// recorded before it) means 0, so its log replays to the same requests.
    #[serde(default)]
    pub remeasure: u32,
}

fn one() -> u32 {
    1
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            rounds: 20,
            difficulty_cap: 4,
            stagnation_window: 5,
            min_frontier: 3,
            planner_tries: 3,
            exploration: 0.0,
            final_top_k: 3,
            wm_max_nodes: 60,
            wm_max_chars: 6000,
            strategy: Strategy::WorldModel,
            islands: 3,
            migration_interval: 5,
            archive_grid: [4, 4],
            rng_seed: 0,
            knob_share: 0.25,
            parallel: 1,
            compare: CompareRule::Paired,
            samples: 1,
            remeasure: 2,
        }
    }
}

/// How the engine generates candidates (docs/engine.md, "Strategies on the same accounting").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The planner keeps a world model; cycles implement its actions (the paper's method).
    #[default]
    WorldModel,
    /// No planner: every round improves the best candidate so far (or fixes the last failure).
    Refine,
    /// No planner: islands of candidates with a MAP-Elites archive each, and migration.
    Evolve,
}

impl Strategy {
    /// The command-line spelling: `world-model`, `refine`, `evolve`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::WorldModel => "world-model",
            Strategy::Refine => "refine",
            Strategy::Evolve => "evolve",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;

    /// Accepts the command-line spelling and the serialised one (`world-model`, `world_model`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "world-model" => Ok(Strategy::WorldModel),
            "refine" => Ok(Strategy::Refine),
            "evolve" => Ok(Strategy::Evolve),
            other => Err(format!(
                "unknown strategy `{other}` (expected world-model, refine or evolve)"
            )),
        }
    }
}

/// Per-workload figures of an evaluation, as the planner sees them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSummary {
    /// The workload's uuid as the task's workloads file gives it.
    pub uuid: String,
    /// The workload's status (`passed`, `incorrect`, ...).
    pub status: String,
    /// Reference median over candidate median; `None` without timings.
    pub speedup: Option<f64>,
    /// Median of the candidate's timings, in nanoseconds.
    pub median_ns: Option<f64>,
    /// Interquartile range of the candidate's timings, in nanoseconds.
    pub iqr_ns: Option<f64>,
    /// Median of the reference's timings, in nanoseconds.
    pub reference_median_ns: Option<f64>,
}

/// The part of an evaluation the search reasons with (the full record is in the store).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// The evaluation's overall status (`passed`, `compile_error`, `incorrect`, ...).
    pub status: String,
    /// Why it did not pass, for the planner and coder; `None` when it passed.
    pub reason: Option<String>,
    /// Geometric mean over workloads of reference median / candidate median.
    pub speedup: Option<f64>,
    /// The largest IQR / median of the candidate over workloads: the run-to-run noise.
    pub relative_noise: Option<f64>,
    /// Per-workload figures, in the task's workload order.
    #[serde(default)]
    pub workloads: Vec<WorkloadSummary>,
    /// The last lines of the evaluation's log (compiler or runtime messages), bounded.
    #[serde(default)]
    pub log_tail: String,
    /// Set when the timing looks physically impossible; such a result never becomes the best.
    #[serde(default)]
    pub suspicious: Option<String>,
    /// The compiler's resource report per kernel (ptxas `-v`, backend cuda), in compilation
    /// order. Empty for other backends, for builds that failed, and in runs recorded before it
    /// existed; not serialised when empty, so such events read and write as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<KernelResources>,
    /// What a profiler measured of the candidate (Nsight Compute: throughputs against peak,
    /// occupancy, warp stalls, L2 hits, tensor pipes), as a few lines for the planner; `None`
    /// where the run does not profile (`ksearch run --profile`) and in runs recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The version of the harness that measured it (the record's `provenance.harness_version`).
    /// Times measured by different harness versions are not compared with each other: the
    /// run's best is measured again first (docs/engine.md, "Re-measuring a noisy best"). `None`
    /// in runs recorded before it, where every summary has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
}

/// One kernel's compiler resources, as the evaluation record's `compile.resources` has them
/// (docs/protocol.md, "Compiler resource report").
pub use ksearch_spec::KernelResources;

impl EvalSummary {
    /// An evaluation that produced no measurement: `status` with `reason`, nothing else.
    pub fn failure(status: &str, reason: String) -> EvalSummary {
        EvalSummary {
            status: status.to_string(),
            reason: Some(reason),
            speedup: None,
            relative_noise: None,
            workloads: vec![],
            log_tail: String::new(),
            suspicious: None,
            resources: vec![],
            profile: None,
            harness: None,
        }
    }

    /// Whether it counts as a pass: status `passed`, a speedup, and no suspicious timing.
    pub fn passed(&self) -> bool {
        self.status == "passed" && self.speedup.is_some() && self.suspicious.is_none()
    }
}

/// Why a candidate is evaluated (stored as the evaluation row's `purpose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// During the search.
    Search,
    /// The final re-measurement of the top candidates.
    Final,
    /// The run's best measured again during the search, because a later candidate read faster
    /// than it but within the noise of the best's own measurement (`EngineConfig::remeasure`).
    Remeasure,
}

impl Purpose {
    /// The spelling of the store's `purpose` column: `search`, `final`, `remeasure`.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Search => "search",
            Purpose::Final => "final",
            Purpose::Remeasure => "remeasure",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
/// What a planner request asks for.
pub enum PlanKind {
    /// Build the first tree from the task.
    Init,
    /// Add actions: the frontier has too few to select from.
    Propose,
    /// A cycle ended with a passing candidate, now attached to the node: update the tree.
    Refine {
        /// The node the cycle worked on.
        node_id: String,
    },
    /// A cycle ended without a passing candidate and the node is marked too hard: update the tree.
    TooHard {
        /// The node the cycle worked on.
        node_id: String,
    },
}

/// What a coder request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeKind {
    /// Implement the selected action.
    Action,
    /// Fix the last failing attempt of the cycle.
    Debug,
    /// Improve the cycle's best passing candidate.
    Improve,
}

impl CodeKind {
    /// The JSON spelling: `action`, `debug`, `improve`.
    pub fn as_str(self) -> &'static str {
        match self {
            CodeKind::Action => "action",
            CodeKind::Debug => "debug",
            CodeKind::Improve => "improve",
        }
    }
}

/// What the engine asks for next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// Ask the planner for an edit script of the world model.
    Plan {
        /// The request's id (`r12`), which its answer event names.
        id: String,
        /// What the plan is for.
        plan: PlanKind,
        /// The prompt: the conversation to send.
        messages: Vec<Message>,
    },
    /// Ask the coder for a kernel.
    Code {
        /// The request's id, which its answer event names.
        id: String,
        /// Implement an action, debug a failure, or improve the best.
        code: CodeKind,
        /// The world-model node being worked on.
        node_id: String,
        /// The candidate the answer builds on (its parent); `None` to start from scratch.
        base_candidate: Option<i64>,
        /// The prompt: the conversation to send.
        messages: Vec<Message>,
    },
    /// Ask the executor to evaluate a candidate.
    Evaluate {
        /// The request's id, which the `evaluated` event names.
        id: String,
        /// The candidate to evaluate.
        candidate_id: i64,
        /// During the search, or the final re-measurement.
        purpose: Purpose,
        /// The candidate's language (`c`, `cuda`, ...), as [`TaskBrief::language`].
        language: String,
        /// The candidate's source files.
        sources: Vec<Source>,
    },
    /// The run is over; nothing to serve.
    Finished {
        /// The best passing candidate; `None` when none passed.
        best_candidate: Option<i64>,
        /// Why the run ended, in words (the round budget is spent, ...).
        reason: String,
    },
}

impl Request {
    /// The request's id; `None` for `Finished`, which nobody answers.
    pub fn id(&self) -> Option<&str> {
        match self {
            Request::Plan { id, .. } | Request::Code { id, .. } | Request::Evaluate { id, .. } => Some(id),
            Request::Finished { .. } => None,
        }
    }

    /// `planner`, `coder`, `evaluator`, or `none`.
    pub fn role(&self) -> &'static str {
        match self {
            Request::Plan { .. } => "planner",
            Request::Code { .. } => "coder",
            Request::Evaluate { .. } => "evaluator",
            Request::Finished { .. } => "none",
        }
    }
}

/// What happened: the only input of the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run begins: the first event of every log.
    Started {
        /// The task, as the run snapshot it.
        task: TaskBrief,
        /// The method's settings for the run.
        config: EngineConfig,
    },
    /// The planner's answer to a `Plan` request.
    PlannerAnswered {
        /// The id of the request it answers.
        request_id: String,
        /// The answer as written (the engine extracts the edit script).
        text: String,
    },
    /// The coder's answer to a `Code` request.
    CoderAnswered {
        /// The id of the request it answers.
        request_id: String,
        /// The answer as written (the engine extracts the code files).
        text: String,
    },
    /// The executor's result for an `Evaluate` request.
    Evaluated {
        /// The id of the request it answers.
        request_id: String,
        /// The candidate evaluated.
        candidate_id: i64,
        /// What the search needs of the evaluation record.
        summary: EvalSummary,
    },
    /// The request could not be served. `fatal` (an exhausted budget, a broken evaluator) ends
    /// the search: the engine goes straight to the final re-measurement.
    RequestFailed {
        /// The id of the request that failed.
        request_id: String,
        /// Why, in words (the provider's or executor's error).
        error: String,
        /// Whether the search must end (see above).
        fatal: bool,
    },
    /// The round budget raised to `rounds` (`ksearch resume --rounds`), answering no request:
    /// a running search goes on to the new budget; a search its budget ended goes on from where
    /// that ended it, and the final re-measurement is made again at the new end.
    BudgetRaised {
        /// The new round budget, above the old one.
        rounds: u32,
    },
}

impl Event {
    /// The event's tag in JSON and in the store's `kind` column (`started`, `coder_answered`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Started { .. } => "started",
            Event::PlannerAnswered { .. } => "planner_answered",
            Event::CoderAnswered { .. } => "coder_answered",
            Event::Evaluated { .. } => "evaluated",
            Event::RequestFailed { .. } => "request_failed",
            Event::BudgetRaised { .. } => "budget_raised",
        }
    }
}
