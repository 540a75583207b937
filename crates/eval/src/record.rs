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
    pub trials: u32,
    /// `None` when no finite pair was compared.
    pub max_abs_error: Option<f64>,
    pub max_rel_error: Option<f64>,
    pub rel_norm: Option<f64>,
    pub matched_ratio: f64,
    pub mismatched: u64,
    pub elements: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileReport {
    pub ok: bool,
    pub seconds: Option<f64>,
    pub command: Vec<String>,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub clock: String,
    pub candidate: SampleStats,
    pub reference: SampleStats,
    /// Reference median over candidate median.
    pub speedup: f64,
    /// Achieved rates from the task's roofline formulas, at the candidate's median.
    pub achieved_gb_per_s: Option<f64>,
    pub achieved_gflop_per_s: Option<f64>,
    /// Set when the candidate beat what the device can physically do, or (GPU) when its event
    /// time is far below its host time: do not trust it.
    pub suspicious: Option<String>,
    pub candidate_ns: Vec<f64>,
    pub reference_ns: Vec<f64>,
    /// GPU backends: statistics and raw samples of the host clock around each call, with a
    /// device-wide synchronise (the primary clock is `clock`, the CUDA events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_host: Option<SampleStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_host: Option<SampleStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_host_ns: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_host_ns: Vec<f64>,
    /// GPU backends: each timed call's launch path (host clock's start to the gate's opening),
    /// so the cross-check can compare what the host waited for after the call returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_enqueue_ns: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_enqueue_ns: Vec<f64>,
    /// GPU backends: whether the timed calls replayed CUDA graphs, and why or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<bool>,
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_ping_ns: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    pub uuid: String,
    pub axes: IndexMap<String, i64>,
    pub status: Status,
    pub reason: Option<String>,
    pub correctness: Option<Correctness>,
    pub timing: Option<Timing>,
}

/// Provenance of the numbers: where, with what, and from which seed they were measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub device: String,
    pub backend: String,
    pub seed: u64,
    pub harness_version: Option<String>,
    /// What the harness found: interpreter, NumPy, compiler, CPU, platform.
    pub environment: serde_json::Value,
    pub trials: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub task: String,
    pub solution: String,
    pub status: Status,
    /// One sentence on why it did not pass (`None` when it passed).
    pub reason: Option<String>,
    /// Geometric mean of the per-workload speedups, when every workload passed.
    pub speedup: Option<f64>,
    pub workloads: Vec<WorkloadResult>,
    pub compile: Option<CompileReport>,
    pub provenance: Provenance,
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
