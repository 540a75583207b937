//! The profile as the evaluation record holds it, and the options and errors of taking one.

use super::DEFAULT_CALLS;
use serde::{Deserialize, Serialize};

/// Why a CSV report could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProfileError {
    /// No line of the report starts with the raw page's `ID` column.
    #[error("the report has no header line starting with \"ID\" (ncu wrote no raw page)")]
    NoHeader,
    /// The header lacks a column the parser needs (`ID`, `Kernel Name`).
    #[error("the report has no \"{0}\" column")]
    MissingColumn(&'static str),
    /// A line's field count differs from the header's.
    #[error("line {line} of the report has {found} fields where the header has {expected}")]
    FieldCount {
        /// 1-based line number in the report.
        line: usize,
        /// Fields on that line.
        found: usize,
        /// Fields in the header.
        expected: usize,
    },
    /// A quoted CSV field is not closed on its line.
    #[error("line {line} of the report has an unterminated quoted field")]
    Unterminated {
        /// 1-based line number in the report.
        line: usize,
    },
    /// `--profile-workload` named a uuid the task does not have.
    #[error("no workload named '{0}' (--profile-workload takes a workload uuid of the task)")]
    UnknownWorkload(String),
    /// There is no workload to choose from.
    #[error("the task has no workloads")]
    NoWorkloads,
}

/// Whether a [`Profile`] holds metrics; only `profiled` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileStatus {
    /// Metrics were collected.
    Profiled,
    /// No profile could be taken here: no ncu, a CPU backend, an evaluation that did not pass.
    Unavailable,
    /// ncu or the profiling run failed; `note` says how.
    Failed,
}

/// The profile of a candidate on one workload: the evaluation record's `profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Whether metrics were collected.
    pub status: ProfileStatus,
    /// Why there is no profile, or what to read it with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The profiler and its version, e.g. `ncu 2025.3.1.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The workload profiled (uuid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Why that workload: named by `--profile-workload`, or the largest (with its size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_choice: Option<String>,
    /// Candidate calls profiled (each may launch several kernels).
    #[serde(default)]
    pub calls: u32,
    /// Kernel launches profiled, over all calls.
    #[serde(default)]
    pub launches: usize,
    /// Distinct kernels (by name) among the launches; [`Profile::kernels`] lists at most five.
    #[serde(default)]
    pub kernel_count: usize,
    /// Every launch together, each metric weighted by the launch's duration; `duration_ns` is the
    /// GPU time of one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<KernelMetrics>,
    /// The kernels that took the most GPU time, longest first (at most five).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<KernelProfile>,
    /// Wall-clock seconds the profiling took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// What ncu measured, as % of the device's peak where it says `_pct`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelMetrics {
    /// GPU time per candidate call (gpu__time_duration.sum, under ncu's cache flush and replay).
    pub duration_ns: f64,
    /// "Memory Throughput" of SpeedOfLight: the busiest memory unit (L1, L2, DRAM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_throughput_pct: Option<f64>,
    /// DRAM throughput alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_throughput_pct: Option<f64>,
    /// "Compute (SM) Throughput": the busiest SM pipeline or unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_throughput_pct: Option<f64>,
    /// Active warps per cycle, of the SM's maximum; theoretical: what the launch allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_occupancy_pct: Option<f64>,
    /// The occupancy the launch configuration and the kernel's resources allow at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theoretical_occupancy_pct: Option<f64>,
    /// Share of L2 sector accesses that hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_hit_rate_pct: Option<f64>,
    /// The busiest tensor pipe (on Hopper HMMA, which includes wgmma; IMMA, DMMA), % of its peak
    /// over active cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_pipe_pct: Option<f64>,
    /// The top warp-stall reasons, most cycles first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<Stall>,
}

/// One warp-stall reason: warp cycles per issued instruction spent in it, and its share of all
/// stalled cycles (every reason but `selected`, which is issuing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// ncu's reason name, e.g. `long_scoreboard`, `wait`, `barrier`.
    pub reason: String,
    /// Warp cycles per issued instruction stalled for this reason (duration-weighted).
    pub cycles_per_instruction: f64,
    /// This reason's share of all stalled cycles, in percent.
    pub share_pct: f64,
}

/// One kernel (all its launches together) among those that took the most GPU time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// The kernel's function name as ncu prints it (`--print-kernel-base function`).
    pub name: String,
    /// Its launches over all profiled calls.
    pub launches: usize,
    /// This kernel's share of the GPU time of all launches.
    pub share_pct: f64,
    /// Its metrics, duration-weighted over its own launches (flattened into the same object).
    #[serde(flatten)]
    pub metrics: KernelMetrics,
}

/// One kernel launch of an ncu raw page: its name and every numeric metric (durations in ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The kernel's name (the `Kernel Name` column).
    pub name: String,
    /// Every column from the first metric on (names containing `__`) that holds a number, by
    /// ncu's metric name; time metrics converted to ns.
    pub metrics: std::collections::BTreeMap<String, f64>,
}

/// Which workload to profile and how often to call the candidate.
#[derive(Debug, Clone)]
pub struct ProfileOptions {
    /// A workload uuid; `None`: the largest (most bytes of inputs and outputs).
    pub workload: Option<String>,
    /// Candidate calls profiled, 1 to 10.
    pub calls: u32,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            workload: None,
            calls: DEFAULT_CALLS,
        }
    }
}

impl Profile {
    /// A profile not taken, saying why.
    pub fn unavailable(note: impl Into<String>) -> Profile {
        Profile::empty(ProfileStatus::Unavailable, note.into())
    }

    pub(super) fn failed(note: impl Into<String>) -> Profile {
        Profile::empty(ProfileStatus::Failed, note.into())
    }

    fn empty(status: ProfileStatus, note: String) -> Profile {
        Profile {
            status,
            note: Some(note),
            tool: None,
            workload: None,
            workload_choice: None,
            calls: 0,
            launches: 0,
            kernel_count: 0,
            total: None,
            kernels: Vec::new(),
            seconds: None,
        }
    }
}
