//! A typed view of one run, everything a report or the dashboard shows, built once from the run
//! store (see `load.rs`). Serialisable: templates read it, and the dashboard serves it as JSON.

use serde::Serialize;

/// One run as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run directory as given.
    pub run_dir: String,
    /// Its last path component: how the dashboard names the run.
    pub name: String,
    pub task: String,
    /// The target hardware's heading from the task brief (e.g. `NVIDIA H200 (`h200`)`).
    pub target: String,
    /// `world-model`, `refine` or `evolve`.
    pub strategy: String,
    pub brain: Brain,
    pub state: RunState,
    /// Rounds started so far, and the budget of rounds.
    pub round: u32,
    pub rounds: u32,
    pub cycles: u32,
    /// Events in the log: grows with every step, so the dashboard compares it to see progress.
    pub events: usize,
    pub budget: Budget,
    /// LLM usage per role and model.
    pub models: Vec<ModelUsage>,
    /// Every attempt in the order it was made: candidates, and coder answers that produced none.
    pub attempts: Vec<Attempt>,
    pub best: Option<BestKernel>,
    pub tree: Tree,
    /// `(what, value)` rows: the device, driver, toolkit, compiler, seeds.
    pub provenance: Vec<KeyValue>,
    /// Attempts per status, and the most common reason of a failure: what an all-fail run
    /// needs to be diagnosed.
    pub outcomes: Outcomes,
}

impl RunReport {
    /// A run of `brain` named `name` with nothing in it, for the unit tests.
    #[cfg(test)]
    pub(crate) fn for_test(name: &str, brain: &str) -> RunReport {
        RunReport {
            run_dir: format!("runs/{name}"),
            name: name.into(),
            task: "t".into(),
            target: String::new(),
            strategy: "world-model".into(),
            brain: Brain {
                kind: brain.into(),
                planner: None,
                coder: None,
                limits: vec![],
            },
            state: RunState {
                finished: false,
                kind: "running".into(),
                text: "in progress".into(),
                detail: None,
                last_event_at: None,
                resume: None,
            },
            round: 0,
            rounds: 10,
            cycles: 0,
            events: 0,
            budget: Budget::default(),
            models: vec![],
            attempts: vec![],
            best: None,
            tree: Tree {
                kernel_summary: String::new(),
                open_questions: vec![],
                active_leaf: "root".into(),
                nodes: vec![],
            },
            provenance: vec![],
            outcomes: Outcomes::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcomes {
    /// `(status, attempts)`, most frequent first (`evaluating` for attempts not yet evaluated).
    pub by_status: Vec<Count>,
    pub passed: usize,
    pub failed: usize,
    /// The failure reason (its first line) shared by the most failed attempts.
    pub top_failure: Option<Count>,
}

/// Something and how often it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Count {
    pub what: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
}

/// Who answered the planner and the coder.
#[derive(Debug, Clone, Serialize)]
pub struct Brain {
    /// `llm`, `replay`, `agent` or `tuner`.
    pub kind: String,
    /// `provider:model` for LLM brains.
    pub planner: Option<String>,
    pub coder: Option<String>,
    /// Budget limits set for the run (`max_calls = 400`, ...).
    pub limits: Vec<KeyValue>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunState {
    /// The engine reached its end (the round budget, no action left, a fatal failure).
    pub finished: bool,
    /// `running`, `waiting` (on an external agent), `finished`, `stopped` (the driver recorded
    /// why: interrupted, the LLM endpoint down, the budget, an error) or `stalled` (no record
    /// and no event for a long time: most likely killed). Also the badge's class.
    pub kind: String,
    /// `finished: the round budget (20) is spent`, `in progress, waiting on the coder`,
    /// `stopped: interrupted at 2025-06-01 12:34 UTC`, `no progress for 42 minutes ...`.
    pub text: String,
    /// What the driver recorded about the stop (the error, the endpoint's last answer).
    pub detail: Option<String>,
    /// When the last event was written (seconds since the Unix epoch).
    pub last_event_at: Option<f64>,
    /// How to continue a run that stopped before its end; `None` for one that needs nothing
    /// (finished, live, or waiting for an agent's answer, which `ksearch agent` gives).
    pub resume: Option<Resume>,
}

/// The command that continues a stopped run, and when it is worth running.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resume {
    /// `ksearch resume RUN_DIR`, the directory quoted for a shell where it needs it.
    pub command: String,
    /// What must hold first (`once the endpoint answers again`); `None` when nothing must.
    pub when: Option<String>,
}

/// What the run spent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Budget {
    /// Answered LLM calls (the tuner's and an agent's answers are not LLM calls of ours).
    pub llm_calls: usize,
    pub failed_llm_calls: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the input tokens, those the provider served from its prompt cache (where reported).
    pub cached_input_tokens: u64,
    /// Of the output tokens, those spent on reasoning (where reported).
    pub reasoning_tokens: u64,
    /// Answers served from ksearch's own answer cache instead of a new call.
    pub cached_answers: usize,
    pub dollars: f64,
    /// Answered calls whose price is unknown (their cost is not in `dollars`).
    pub unpriced_calls: usize,
    /// Failed calls by kind of error (`timeout`, `HTTP 503`, `missing API key`), most first.
    pub llm_errors: Vec<Count>,
    /// The last failed call's error message.
    pub last_llm_error: Option<String>,
    pub evaluations: usize,
    /// Wall time of every evaluation added up (harness start to end, compiles included): how
    /// long the device was held for this run, not time spent in kernels.
    pub device_seconds: f64,
    /// `GPU` when the evaluations ran on a GPU, else `CPU`.
    pub device_kind: String,
    /// From the first event to the last.
    pub wall_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelUsage {
    pub role: String,
    pub provider: String,
    pub model: String,
    pub calls: usize,
    pub failed: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub reasoning_tokens: u64,
    /// Answers served from ksearch's answer cache.
    pub from_cache: usize,
    pub dollars: f64,
    pub latency_s: f64,
}

/// One attempt: a candidate and its evaluation, or a coder answer that gave no candidate.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The candidate's id; `None` when the answer had no usable code.
    pub candidate: Option<i64>,
    pub parent: Option<i64>,
    pub node_id: Option<String>,
    pub round: u32,
    pub cycle: u32,
    /// `seed`, `coder`, `knob_sweep`, or `none` for an answer without code.
    pub origin: String,
    /// The search evaluation's status; `None` while it is being evaluated.
    pub status: Option<String>,
    pub reason: Option<String>,
    /// Speedup over the reference when it passed.
    pub speedup: Option<f64>,
    /// Relative spread of the timings (IQR over median, worst workload).
    pub relative_noise: Option<f64>,
    /// Why the measurement is too noisy to trust at face value; `None` when it is not.
    pub noisy: Option<String>,
    /// The final re-measurement (top candidates only).
    pub final_speedup: Option<f64>,
    pub final_status: Option<String>,
    /// How the engine made it when no coder wrote it.
    pub note: Option<String>,
    /// The compiler's resources per kernel in short (`30 regs, 1 KiB smem`); empty when the
    /// build reported none (CPU backends, failed builds, runs recorded before it existed).
    pub resources: String,
    /// What the run had spent when this attempt's outcome was known (its evaluation, or the
    /// coder's answer that had no code): where it sits on the comparison chart when runs are
    /// compared by what they spent rather than by round. `None` while it is being evaluated.
    pub spent: Option<Spent>,
}

/// What a run had spent at some moment, counted from its first event. The LLM's part counts
/// the exchanges of the requests answered (or failed) by then; the device's, the evaluations
/// finished by then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spent {
    /// Evaluations finished (search and final re-measurements alike).
    pub evaluations: usize,
    /// Their wall time added up (see [`Budget::device_seconds`]).
    pub device_seconds: f64,
    /// Since the run's first event.
    pub wall_seconds: f64,
    /// LLM dollars (calls of unknown price count nothing).
    pub dollars: f64,
    /// LLM tokens, in and out.
    pub tokens: u64,
}

impl Attempt {
    /// Evaluated (or failed before it could be): drawn on the chart.
    pub fn is_done(&self) -> bool {
        self.status.is_some()
    }

    /// A coder's candidate for the unit tests; the rest of the fields empty.
    #[cfg(test)]
    pub(crate) fn for_test(
        candidate: i64,
        parent: Option<i64>,
        round: u32,
        status: &str,
        speedup: Option<f64>,
    ) -> Attempt {
        Attempt {
            candidate: Some(candidate),
            parent,
            node_id: None,
            round,
            cycle: 0,
            origin: "coder".into(),
            status: Some(status.into()),
            reason: None,
            speedup,
            relative_noise: None,
            noisy: None,
            final_speedup: None,
            final_status: None,
            note: None,
            resources: String::new(),
            spent: Some(Spent::default()),
        }
    }
}

/// The best candidate: its source, its diff against the seed, and its per-workload numbers.
#[derive(Debug, Clone, Serialize)]
pub struct BestKernel {
    pub candidate: i64,
    pub node_id: String,
    pub round: u32,
    pub speedup: Option<f64>,
    /// Speedup over the seed (same reference, so the ratio of the two speedups).
    pub over_seed: Option<f64>,
    /// `final` when re-measured at the end of the run, else `search`.
    pub measured: String,
    pub files: Vec<SourceFile>,
    /// True when the task has a seed to compare with.
    pub has_seed: bool,
    pub workloads: Vec<WorkloadRow>,
    /// The compiler's resource report of its build, one row per kernel (CUDA builds only).
    pub kernels: Vec<KernelRow>,
}

/// One kernel of the best candidate's build, from ptxas `-v` (docs/protocol.md).
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    /// The kernel's name without C++ mangling where that is cheap, else its symbol.
    pub short_name: String,
    /// What ptxas reported; its `name` is the symbol as ptxas printed it.
    #[serde(flatten)]
    pub resources: ksearch_search::engine::KernelResources,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    pub path: String,
    pub content: String,
    /// Against the seed's file of the same path (or the seed's only file); empty if identical
    /// or there is no seed.
    pub diff: Vec<DiffLine>,
    /// `changed`, `new` (no such file in the seed), `identical`, or `no seed`.
    pub versus_seed: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffLine {
    /// `add`, `del`, `ctx` or `hunk`.
    pub kind: String,
    pub text: String,
}

/// One workload of the best candidate's evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadRow {
    pub uuid: String,
    /// `M=8 N=64`.
    pub axes: String,
    pub status: String,
    pub reason: Option<String>,
    pub speedup: Option<f64>,
    pub median_ns: Option<f64>,
    pub iqr_ns: Option<f64>,
    pub reference_median_ns: Option<f64>,
    pub reference_iqr_ns: Option<f64>,
    /// IQR over median of the candidate's timings.
    pub relative_noise: Option<f64>,
    /// Why the measurement is too noisy to trust at face value; `None` when it is not.
    pub noisy: Option<String>,
    pub samples: Option<u64>,
    pub max_abs_error: Option<f64>,
    pub gb_per_s: Option<f64>,
    pub gflop_per_s: Option<f64>,
    /// The harness's warning about the timing, if any.
    pub suspicious: Option<String>,
}

/// The world-model tree, nodes in drawing order (each after its parent, siblings in node order).
#[derive(Debug, Clone, Serialize)]
pub struct Tree {
    pub kernel_summary: String,
    pub open_questions: Vec<String>,
    pub active_leaf: String,
    pub nodes: Vec<TreeNode>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TreeNode {
    pub id: String,
    pub parent: Option<String>,
    pub depth: usize,
    pub decision: String,
    pub choice: String,
    pub rating: f64,
    pub confidence: f64,
    /// `open`, `solved`, `too_hard` or `closed`.
    pub status: String,
    pub status_reason: Option<String>,
    pub action: Option<String>,
    pub difficulty: Option<u8>,
    pub score: Option<f64>,
    pub expected_speedup: Option<f64>,
    /// The attached result: candidate, speedup and round.
    pub result: Option<NodeResult>,
    pub notes: String,
    /// Attempts made on this node.
    pub attempts: usize,
    pub last_updated_round: u32,
    pub active: bool,
    /// The node of the run's best candidate.
    pub best: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    pub candidate: i64,
    pub speedup: f64,
    pub round: u32,
}
