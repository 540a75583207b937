//! A typed view of one run, everything a report or the dashboard shows, built once from the run
//! store (see `load/`). Serialisable: templates read it, and the dashboard serves it as JSON.

use serde::Serialize;

/// One run as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run directory as given.
    pub run_dir: String,
    /// Its last path component: how the dashboard names the run.
    pub name: String,
    /// The task's name as its definition gives it, e.g. `mamba_scan`.
    pub task: String,
    /// The target hardware's heading from the task brief (e.g. `NVIDIA H200 (`h200`)`).
    pub target: String,
    /// `world-model`, `refine` or `evolve`.
    pub strategy: String,
    /// Who answered the planner and the coder, and the budget limits.
    pub brain: Brain,
    /// Whether the run is live, waiting, finished, stopped or stalled, and how to continue it.
    pub state: RunState,
    /// Rounds started so far, and the budget of rounds.
    pub round: u32,
    /// The run's budget of rounds (`--rounds`).
    pub rounds: u32,
    /// Cycles started so far (a cycle works on one world-model node).
    pub cycles: u32,
    /// Events in the log: grows with every step, so the dashboard compares it to see progress.
    pub events: usize,
    /// What the run spent: LLM calls, tokens, dollars, device and wall time.
    pub budget: Budget,
    /// LLM usage per role and model.
    pub models: Vec<ModelUsage>,
    /// Every attempt in the order it was made: candidates, and coder answers that produced none.
    pub attempts: Vec<Attempt>,
    /// The best passing candidate; `None` while none has passed.
    pub best: Option<BestKernel>,
    /// The world-model tree as of the last version.
    pub tree: Tree,
    /// `(what, value)` rows: the device, driver, toolkit, compiler, seeds.
    pub provenance: Vec<KeyValue>,
    /// Where the evaluations ran, by device model and node, in the order each first appears
    /// (docs/ray.md): one entry for a run on one machine, several for a mixed cluster, where
    /// numbers from different models are not comparable as they stand.
    pub devices: Vec<DeviceGroup>,
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
            devices: vec![],
            outcomes: Outcomes::default(),
        }
    }
}

/// How the run's attempts ended, for diagnosing a run whose attempts all fail.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcomes {
    /// `(status, attempts)`, most frequent first (`evaluating` for attempts not yet evaluated).
    pub by_status: Vec<Count>,
    /// Attempts whose search evaluation passed.
    pub passed: usize,
    /// Attempts that ended without passing (answers without code included).
    pub failed: usize,
    /// The failure reason (its first line) shared by the most failed attempts.
    pub top_failure: Option<Count>,
}

/// Something and how often it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Count {
    /// The thing counted: a status, an error kind, a failure reason.
    pub what: String,
    /// How many times it happened.
    pub count: usize,
}

/// A labelled value of a table (provenance, budget limits).
#[derive(Debug, Clone, Serialize)]
pub struct KeyValue {
    /// The row's label, e.g. `device` or `max_calls`.
    pub key: String,
    /// Its value, as text.
    pub value: String,
}

/// Who answered the planner and the coder.
#[derive(Debug, Clone, Serialize)]
pub struct Brain {
    /// `llm`, `replay`, `agent` or `tuner`.
    pub kind: String,
    /// `provider:model` for LLM brains.
    pub planner: Option<String>,
    /// `provider:model` of the coder for LLM brains.
    pub coder: Option<String>,
    /// Budget limits set for the run (`max_calls = 400`, ...).
    pub limits: Vec<KeyValue>,
}

/// Where the run stands now, as the dashboard's badge and the report's heading say it.
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
    /// LLM calls that ended in an error (see `llm_errors`).
    pub failed_llm_calls: usize,
    /// Prompt tokens over all calls, cached ones included.
    pub input_tokens: u64,
    /// Completion tokens over all calls, reasoning ones included.
    pub output_tokens: u64,
    /// Of the input tokens, those the provider served from its prompt cache (where reported).
    pub cached_input_tokens: u64,
    /// Of the output tokens, those spent on reasoning (where reported).
    pub reasoning_tokens: u64,
    /// Answers served from ksearch's own answer cache instead of a new call.
    pub cached_answers: usize,
    /// LLM cost in US dollars, of the calls whose price is known.
    pub dollars: f64,
    /// Answered calls whose price is unknown (their cost is not in `dollars`).
    pub unpriced_calls: usize,
    /// Failed calls by kind of error (`timeout`, `HTTP 503`, `missing API key`), most first.
    pub llm_errors: Vec<Count>,
    /// The last failed call's error message.
    pub last_llm_error: Option<String>,
    /// Evaluations finished (search and final re-measurements alike).
    pub evaluations: usize,
    /// Wall time of every evaluation added up (harness start to end, compiles included): how
    /// long the device was held for this run, not time spent in kernels.
    pub device_seconds: f64,
    /// `GPU` when the evaluations ran on a GPU, else `CPU`.
    pub device_kind: String,
    /// From the first event to the last.
    pub wall_seconds: f64,
}

/// LLM usage of one (role, provider, model), summed over its exchanges.
#[derive(Debug, Clone, Serialize)]
pub struct ModelUsage {
    /// `planner` or `coder`.
    pub role: String,
    /// The provider as configured (e.g. `anthropic`).
    pub provider: String,
    /// The model that answered.
    pub model: String,
    /// Exchanges recorded (answered and failed).
    pub calls: usize,
    /// Of those, the ones that ended in an error.
    pub failed: usize,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Completion tokens, reasoning ones included.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: u64,
    /// Answers served from ksearch's answer cache.
    pub from_cache: usize,
    /// Cost in US dollars (calls of unknown price count nothing).
    pub dollars: f64,
    /// Wall time of the calls added up, in seconds, retries included.
    pub latency_s: f64,
}

/// One attempt: a candidate and its evaluation, or a coder answer that gave no candidate.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The candidate's id; `None` when the answer had no usable code.
    pub candidate: Option<i64>,
    /// The candidate it was derived from; `None` for the seed or a fresh start.
    pub parent: Option<i64>,
    /// The world-model node it implements; `None` outside the world-model strategy's cycles.
    pub node_id: Option<String>,
    /// The engine's round it was made in.
    pub round: u32,
    /// The engine's cycle it was made in.
    pub cycle: u32,
    /// `seed`, `coder`, `knob_sweep`, or `none` for an answer without code.
    pub origin: String,
    /// The search evaluation's status; `None` while it is being evaluated.
    pub status: Option<String>,
    /// Why it failed (the evaluation's reason, or why no code was taken); `None` when it passed.
    pub reason: Option<String>,
    /// Speedup over the reference when it passed.
    pub speedup: Option<f64>,
    /// Relative spread of the timings (IQR over median, worst workload).
    pub relative_noise: Option<f64>,
    /// Why the measurement is too noisy to trust at face value; `None` when it is not.
    pub noisy: Option<String>,
    /// The final re-measurement (top candidates only).
    pub final_speedup: Option<f64>,
    /// The final re-measurement's status; `None` when it was not re-measured.
    pub final_status: Option<String>,
    /// How the engine made it when no coder wrote it.
    pub note: Option<String>,
    /// The compiler's resources per kernel in short (`30 regs, 1 KiB smem`); empty when the
    /// build reported none (CPU backends, failed builds, runs recorded before it existed).
    pub resources: String,
    /// The device its search evaluation ran on ([`DeviceGroup::label`]); `None` while it is
    /// being evaluated.
    pub device: Option<String>,
    /// What the run had spent when this attempt's outcome was known (its evaluation, or the
    /// coder's answer that had no code): where it sits on the comparison chart when runs are
    /// compared by what they spent rather than by round. `None` while it is being evaluated.
    pub spent: Option<Spent>,
}

/// Evaluations that ran on one device model of one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceGroup {
    /// The GPU's model (`NVIDIA H200`), or the CPU's for CPU evaluations (`AMD EPYC`).
    pub model: String,
    /// The cluster node (its address) for a remote evaluation; `None`: the machine the run
    /// ran on.
    pub node: Option<String>,
    /// The GPU driver's version, where the record names it.
    pub driver: Option<String>,
    /// Evaluations recorded there (search and final re-measurements alike).
    pub evaluations: usize,
    /// How many of them passed.
    pub passed: usize,
}

impl DeviceGroup {
    /// `NVIDIA H200 (node 10.0.0.2)`, or the model alone on the run's own machine.
    pub fn label(&self) -> String {
        match &self.node {
            Some(node) => format!("{} (node {node})", self.model),
            None => self.model.clone(),
        }
    }
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
            device: None,
            spent: Some(Spent::default()),
        }
    }
}

/// The best candidate: its source, its diff against the seed, and its per-workload numbers.
#[derive(Debug, Clone, Serialize)]
pub struct BestKernel {
    /// The candidate's id.
    pub candidate: i64,
    /// The world-model node it implements, as the engine recorded it.
    pub node_id: String,
    /// The round it was made in.
    pub round: u32,
    /// Speedup over the reference, from the final re-measurement if there was one.
    pub speedup: Option<f64>,
    /// Speedup over the seed (same reference, so the ratio of the two speedups).
    pub over_seed: Option<f64>,
    /// `final` when re-measured at the end of the run, else `search`.
    pub measured: String,
    /// Its source files, each with its diff against the seed.
    pub files: Vec<SourceFile>,
    /// True when the task has a seed to compare with.
    pub has_seed: bool,
    /// Its per-workload numbers, from the evaluation `measured` names.
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

/// One source file of the best candidate.
#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    /// The file's path in the solution (`kernel.cu`).
    pub path: String,
    /// Its full text (untrusted: templates escape it).
    pub content: String,
    /// Against the seed's file of the same path (or the seed's only file); empty if identical
    /// or there is no seed.
    pub diff: Vec<DiffLine>,
    /// `changed`, `new` (no such file in the seed), `identical`, or `no seed`.
    pub versus_seed: String,
}

/// One line of a unified diff against the seed.
#[derive(Debug, Clone, Serialize)]
pub struct DiffLine {
    /// `add`, `del`, `ctx` or `hunk`.
    pub kind: String,
    /// The line without its `+`/`-`/` ` marker (a hunk's `@@` header for `hunk`).
    pub text: String,
}

/// One workload of the best candidate's evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadRow {
    /// The workload's uuid as the task's workloads file gives it.
    pub uuid: String,
    /// `M=8 N=64`.
    pub axes: String,
    /// The workload's status in the evaluation (`passed`, `incorrect`, ...).
    pub status: String,
    /// Why it did not pass; `None` when it did.
    pub reason: Option<String>,
    /// Reference median over candidate median; `None` without timings.
    pub speedup: Option<f64>,
    /// Median of the candidate's timings, in nanoseconds.
    pub median_ns: Option<f64>,
    /// Interquartile range of the candidate's timings, in nanoseconds.
    pub iqr_ns: Option<f64>,
    /// Median of the reference's timings, in nanoseconds.
    pub reference_median_ns: Option<f64>,
    /// Interquartile range of the reference's timings, in nanoseconds.
    pub reference_iqr_ns: Option<f64>,
    /// IQR over median of the candidate's timings.
    pub relative_noise: Option<f64>,
    /// Why the measurement is too noisy to trust at face value; `None` when it is not.
    pub noisy: Option<String>,
    /// How many timed calls the candidate's numbers come from.
    pub samples: Option<u64>,
    /// Largest absolute difference from the reference's outputs.
    pub max_abs_error: Option<f64>,
    /// Achieved memory throughput in GB/s, where the task says how many bytes move.
    pub gb_per_s: Option<f64>,
    /// Achieved arithmetic throughput in GFLOP/s, where the task says how many FLOPs there are.
    pub gflop_per_s: Option<f64>,
    /// The harness's warning about the timing, if any.
    pub suspicious: Option<String>,
}

/// The world-model tree, nodes in drawing order (each after its parent, siblings in node order).
#[derive(Debug, Clone, Serialize)]
pub struct Tree {
    /// The planner's summary of the kernel as it stands.
    pub kernel_summary: String,
    /// Questions the planner has left open.
    pub open_questions: Vec<String>,
    /// The id of the node being worked on.
    pub active_leaf: String,
    /// The nodes, in drawing order.
    pub nodes: Vec<TreeNode>,
}

/// One node of the world-model tree, flattened for the templates.
#[derive(Debug, Clone, Serialize)]
pub struct TreeNode {
    /// The node's id (`root`, `n3`, or a name the planner chose).
    pub id: String,
    /// The parent's id; `None` for the root.
    pub parent: Option<String>,
    /// Edges from the root: 0 for the root.
    pub depth: usize,
    /// The design question the node answers (the planner's words).
    pub decision: String,
    /// The answer this node takes to it.
    pub choice: String,
    /// The planner's overall rating, 0-10.
    pub rating: f64,
    /// The planner's confidence in the rating, 0-1.
    pub confidence: f64,
    /// `open`, `solved`, `too_hard` or `closed`.
    pub status: String,
    /// Why the node is `too_hard` (set by the engine); `None` otherwise.
    pub status_reason: Option<String>,
    /// The title of the node's action; `None` for a node without one.
    pub action: Option<String>,
    /// The action's difficulty, 1 (trivial) to 5 (very hard).
    pub difficulty: Option<u8>,
    /// The action's priority, 0-1, as the planner gave it.
    pub score: Option<f64>,
    /// The speed factor the planner expects from the action, when it gave one.
    pub expected_speedup: Option<f64>,
    /// The attached result: candidate, speedup and round.
    pub result: Option<NodeResult>,
    /// The planner's notes on the node.
    pub notes: String,
    /// Attempts made on this node.
    pub attempts: usize,
    /// The last round in which the planner changed the node.
    pub last_updated_round: u32,
    /// It is the active leaf (the node being worked on).
    pub active: bool,
    /// The node of the run's best candidate.
    pub best: bool,
}

/// The best passing candidate of the cycle that worked on a node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    /// The candidate's id.
    pub candidate: i64,
    /// Its speedup over the reference.
    pub speedup: f64,
    /// The round it was made in.
    pub round: u32,
}
