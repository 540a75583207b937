//! The evaluation record: what the harness reported, checked and summarised here.

use crate::stats::SampleStats;
use crate::status::Status;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// One line of the harness protocol (docs/protocol.md).
#[derive(Debug, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    Progress {
        stage: String,
        #[serde(default)]
        workload: Option<usize>,
        #[serde(default)]
        trial: Option<u32>,
    },
    Compile {
        ok: bool,
        #[serde(default)]
        seconds: Option<f64>,
        #[serde(default)]
        command: Vec<String>,
        #[serde(default)]
        log: String,
        #[serde(default)]
        resources: Vec<KernelResources>,
        #[serde(default)]
        cached: bool,
        #[serde(default)]
        arch: Option<String>,
        #[serde(default)]
        refused: Option<String>,
        #[serde(default)]
        import_check: Option<String>,
    },
    Workload(Box<WorkloadEvent>),
    TaskError {
        #[serde(default)]
        field: String,
        message: String,
    },
    HarnessError {
        message: String,
        /// A Python module the interpreter lacks (docs/protocol.md).
        #[serde(default)]
        missing: Option<String>,
    },
    Done {
        #[serde(default)]
        environment: serde_json::Value,
        #[serde(default)]
        harness_version: String,
        #[serde(default)]
        stages: IndexMap<String, f64>,
    },
}

#[derive(Debug, Deserialize)]
pub(crate) struct WorkloadEvent {
    pub index: usize,
    pub uuid: String,
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub correctness: Option<Correctness>,
    #[serde(default)]
    pub timing: Option<RawTiming>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawTiming {
    #[serde(default)]
    pub clock: String,
    pub candidate_ns: Vec<f64>,
    pub reference_ns: Vec<f64>,
    /// GPU backends: the host clock around each call with a device-wide synchronise.
    #[serde(default)]
    pub candidate_host_ns: Vec<f64>,
    #[serde(default)]
    pub reference_host_ns: Vec<f64>,
    /// GPU backends: each call's launch path, from the host clock's start until the device may
    /// run the call (the gate's opening).
    #[serde(default)]
    pub candidate_enqueue_ns: Vec<f64>,
    #[serde(default)]
    pub reference_enqueue_ns: Vec<f64>,
    #[serde(default)]
    pub cuda_graph: Option<bool>,
    #[serde(default)]
    pub cuda_graph_note: Option<String>,
    #[serde(default)]
    pub gate: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub event_overhead_ns: Option<f64>,
    /// Backend c in its worker process: the harness's round trip of each timed call, and of
    /// empty calls (the cross-check of the worker's clock, worker_clock.rs).
    #[serde(default)]
    pub worker_outer_ns: Vec<f64>,
    #[serde(default)]
    pub worker_ping_ns: Vec<f64>,
}

/// Error statistics of the comparison with the reference, over all trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correctness {
    /// Trials actually compared: the harness stops at the first trial that makes the failure
    /// certain, and after a trial that mutated an input.
    pub trials: u32,
    /// Largest `|out - ref|` over finite pairs; `None` when no finite pair was compared.
    pub max_abs_error: Option<f64>,
    /// Largest `|out - ref| / |ref|` over finite pairs with `ref != 0`; `None` when there is none.
    pub max_rel_error: Option<f64>,
    /// `||out - ref|| / ||ref||` over finite pairs; `None` when there is none, or when `||ref||`
    /// is 0 and the outputs differ from it.
    pub rel_norm: Option<f64>,
    /// Share of compared elements within tolerance (`|out - ref| <= atol + rtol * |ref|`, NaN
    /// and inf matching only themselves); the workload fails below task.toml's `matched_ratio`.
    pub matched_ratio: f64,
    /// Elements out of tolerance, over the compared trials.
    pub mismatched: u64,
    /// Output elements compared, summed over the compared trials.
    pub elements: u64,
}

/// The harness's compile stage, as its `compile` line reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileReport {
    /// The build succeeded; `false` makes the evaluation and every workload a `compile_error`
    /// (`rejected` instead when [`CompileReport::refused`] says why).
    pub ok: bool,
    /// Wall-clock seconds of the build (backend cuda: the whole build, also the part that ran
    /// while the harness was still importing torch).
    pub seconds: Option<f64>,
    /// The compiler command line; backend cuda's steps are joined by `&&`. Empty when nothing
    /// was run (e.g. sources refused before compiling).
    pub command: Vec<String>,
    /// The compiler's output (or why nothing was compiled), its head and tail kept within about
    /// the request's `log_bytes`.
    pub log: String,
    /// Per-kernel resource usage from `ptxas -v` (backend cuda), in compilation order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<KernelResources>,
    /// The build came from the build cache (same sources, flags, nvcc and arch).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The GPU architecture compiled for, e.g. `sm_90a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Why the build was refused rather than failed: the compiled objects import what a kernel
    /// never needs (backend cuda's import check, docs/threat-model.md). The evaluation is then
    /// `rejected`, not `compile_error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Backend cuda: `on`, or `off` when KSEARCH_IMPORT_CHECK=off built it without the check
    /// (kept so a record says which defences it had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_check: Option<String>,
}

/// What ptxas reported for one kernel (defined in ksearch-spec, shared with the search).
pub use ksearch_spec::KernelResources;

/// The timing of one workload that passed: statistics computed here from the harness's raw
/// samples, one sample per timed call, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// The primary clock of the samples: `perf_counter_ns`, the host clock (CPU devices, MLX;
    /// for backend c with the worker, the worker's own), or `cuda_event` on a CUDA device.
    pub clock: String,
    /// Statistics of [`Timing::candidate_ns`].
    pub candidate: SampleStats,
    /// Statistics of [`Timing::reference_ns`].
    pub reference: SampleStats,
    /// Reference median over candidate median.
    pub speedup: f64,
    /// Achieved rates from the task's roofline formulas, at the candidate's median.
    /// `None` without a `[roofline]` byte formula (or one that does not evaluate).
    pub achieved_gb_per_s: Option<f64>,
    /// As `achieved_gb_per_s`, from the `[roofline]` flop formula.
    pub achieved_gflop_per_s: Option<f64>,
    /// Set when the candidate beat what the device can physically do, or (GPU) when its event
    /// time is far below its host time: do not trust it.
    pub suspicious: Option<String>,
    /// The candidate's raw samples, one per timed call, in the order of the calls.
    pub candidate_ns: Vec<f64>,
    /// The reference's raw samples, each timed right after the candidate's call on the same
    /// input contents.
    pub reference_ns: Vec<f64>,
    /// GPU backends: statistics and raw samples of the host clock around each call, with a
    /// device-wide synchronise (the primary clock is `clock`, the CUDA events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_host: Option<SampleStats>,
    /// Statistics of [`Timing::reference_host_ns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_host: Option<SampleStats>,
    /// The candidate's host-clock samples, one per timed call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_host_ns: Vec<f64>,
    /// The reference's host-clock samples, one per timed call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_host_ns: Vec<f64>,
    /// GPU backends: each timed call's launch path (host clock's start to the gate's opening),
    /// so the cross-check can compare what the host waited for after the call returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_enqueue_ns: Vec<f64>,
    /// The reference's launch paths, as [`Timing::candidate_enqueue_ns`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_enqueue_ns: Vec<f64>,
    /// GPU backends: whether the timed calls replayed CUDA graphs ([`crate::CudaGraph`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<bool>,
    /// GPU backends: why graphs were or were not used (e.g. the gate made them unnecessary, or
    /// a capture failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph_note: Option<String>,
    /// GPU backends: whether each callee's timed calls ran behind the gate (`candidate` and
    /// `reference` -> `gated`, `expired at call K: ...`, `off from call K: ...` or
    /// `unavailable: ...`; docs/protocol.md), so a reader can tell launch-free event times from
    /// times with the host's gaps in them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<std::collections::BTreeMap<String, String>>,
    /// GPU backends: the cost of the events themselves (median empty gated interval), already
    /// subtracted from every sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_overhead_ns: Option<f64>,
    /// Backend c, whose candidate runs in a worker process and is timed by the worker's clock:
    /// the harness's own round trip of each timed call, and of a few empty calls. The worker's
    /// clock is in the candidate's process, so these bound what it can claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_outer_ns: Vec<f64>,
    /// Backend c with the worker: the harness's round trips of empty calls made before the
    /// timed pairs (the messaging cost alone, subtracted in the cross-check).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_ping_ns: Vec<f64>,
}

/// The result of one workload of the task, in the order of workloads.jsonl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// The workload's uuid from workloads.jsonl.
    pub uuid: String,
    /// Every axis of the definition resolved for this workload (constant axes included).
    pub axes: IndexMap<String, i64>,
    /// `not_run` for a workload the harness never reported (fail-fast, a crash before it, a
    /// static rejection, a voided record).
    pub status: Status,
    /// Why it did not pass, in the harness's words (or the supervisor's, for a death during
    /// this workload).
    pub reason: Option<String>,
    /// Present for `passed` and `incorrect_numerical` workloads.
    pub correctness: Option<Correctness>,
    /// Present only for `passed` workloads that were timed (none under the sanitizer).
    pub timing: Option<Timing>,
}

/// Provenance of the numbers: where, with what, and from which seed they were measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The device evaluated on ([`crate::Backend::device`]): `cpu`, `cuda:N`, `mlx:gpu`, ...
    pub device: String,
    /// The harness backend ([`crate::Backend::name`]).
    pub backend: String,
    /// The seed of every input draw ([`crate::EvalOptions::seed`]).
    pub seed: u64,
    /// The harness's version from its `done` line; `None` when it wrote none (it died first, or
    /// the evaluation never started it).
    pub harness_version: Option<String>,
    /// What the harness found: interpreter, NumPy, compiler, CPU, platform.
    pub environment: serde_json::Value,
    /// Correctness trials asked for per workload (the trials compared are in
    /// [`Correctness::trials`]).
    pub trials: u32,
}

/// The record of one evaluation: what [`crate::evaluate`] returns and the run store keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The task's definition name.
    pub task: String,
    /// The solution's name.
    pub solution: String,
    /// The overall status: `passed` only when every workload passed; otherwise what ended the
    /// evaluation as a whole (`rejected`, `compile_error`, `timeout`, a crash, a broken or forged
    /// protocol), else the first failed workload's status.
    pub status: Status,
    /// One sentence on why it did not pass (`None` when it passed).
    pub reason: Option<String>,
    /// Geometric mean of the per-workload speedups, when every workload passed.
    pub speedup: Option<f64>,
    /// One result per workload of the task, in the task's order (empty for a build-only
    /// evaluation).
    pub workloads: Vec<WorkloadResult>,
    /// The compile stage's report; `None` when nothing reached it (a static rejection, a harness
    /// that died or stopped before compiling).
    pub compile: Option<CompileReport>,
    /// Where, with what and from which seed the numbers were measured.
    pub provenance: Provenance,
    /// Wall-clock seconds of the harness process, from its start (on a warm server: from asking
    /// for the server, so a cold start's wait counts) to its exit; 0 for a static rejection,
    /// which starts none.
    pub wall_seconds: f64,
    /// Seconds the harness spent per stage (startup, compile, correctness, timing, ...);
    /// `wall_seconds` minus their sum is process start-up and supervision.
    pub stage_seconds: IndexMap<String, f64>,
    /// The harness's stderr (what the candidate printed, tracebacks), bounded.
    pub log: String,
    /// Nsight Compute's metrics on one workload, when a profile was asked for
    /// (`ksearch eval --profile`, [`crate::profile`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::profile::Profile>,
}

impl Evaluation {
    /// Whether the status is `passed`.
    pub fn passed(&self) -> bool {
        self.status == Status::Passed
    }
}

/// The module the harness reported missing, if that is why it stopped.
pub(crate) fn missing_module(lines: &[Result<String, String>]) -> Option<String> {
    lines
        .iter()
        .filter_map(|l| l.as_ref().ok())
        .find_map(|l| match serde_json::from_str(l) {
            Ok(Event::HarnessError { missing: Some(m), .. }) => Some(m),
            _ => None,
        })
}
