//! Profiler feedback: Nsight Compute's view of a candidate's kernels, for the planner.
//!
//! [`profile`] runs the harness once more, in mode `profile` (docs/protocol.md, Profiling), under
//! `ncu`: the candidate is built (from the build cache after an evaluation), loaded and called a
//! few times on one workload between cudaProfilerStart and cudaProfilerStop, and ncu, started
//! with `--profile-from-start off`, collects the metrics of every kernel launched in that range.
//! It is a separate process from the evaluation, under the same supervision (process group,
//! limits, private temp dir, authenticated protocol lines), so ncu's kernel replay never touches
//! a timing. ncu writes its raw page as CSV to a file outside the harness's working directory;
//! [`parse_ncu_csv`] reads it and [`aggregate`] weighs the launches by their duration.
//!
//! A profile is advice, never evidence: the candidate shares the harness's process (GPU backends)
//! and could reach the report file, and nothing here changes a status or a speedup. Whatever goes
//! wrong (no ncu, a CPU backend, ncu refused the counters) is a [`Profile`] whose `note` says so;
//! [`profile`] never fails the evaluation it follows.
//!
//! The parts, one file each: the record's types (`types.rs`), finding and invoking ncu
//! (`ncu.rs`), the choice of workload (`workload.rs`), the profiling run itself (`run.rs`),
//! reading ncu's CSV (`ncu_csv.rs`), weighing its launches (`aggregate.rs`) and the planner's
//! summary (`summary.rs`).

mod aggregate;
mod ncu;
mod ncu_csv;
mod run;
mod summary;
mod types;
mod workload;

pub use aggregate::aggregate;
pub use ncu::{find_ncu, ncu_arguments};
pub use ncu_csv::parse_ncu_csv;
pub use run::profile;
pub use summary::summary;
pub use types::{KernelMetrics, KernelProfile, Launch, Profile, ProfileError, ProfileOptions, ProfileStatus, Stall};
pub use workload::choose_workload;

/// Metrics asked for by name, besides the sections that also hold them. On an H200 with ncu
/// 2025.3.1, `sm__pipe_tensor_op_hmma_cycles_active` counts HMMA, HGMMA and QGMMA (Hopper's
/// wgmma) alike, and no `..._gmma_cycles_active` metric exists (`ncu --query-metrics --chip
/// gh100`). Should ncu refuse a name (another chip or version), the profile is taken again with
/// the sections alone, whose ComputeWorkloadAnalysis lists the tensor pipes that chip has.
pub const METRICS: &[&str] = &[
    DURATION,
    MEMORY_PCT,
    COMPUTE_PCT,
    ACHIEVED_OCCUPANCY,
    L2_HIT_RATE,
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
];

/// ncu sections collected: throughputs (SpeedOfLight), occupancy, warp states (the stall
/// reasons), L2 and DRAM (MemoryWorkloadAnalysis) and pipe use (ComputeWorkloadAnalysis).
pub const SECTIONS: &[&str] = &[
    "SpeedOfLight",
    "Occupancy",
    "WarpStateStats",
    "MemoryWorkloadAnalysis",
    "ComputeWorkloadAnalysis",
];

const DURATION: &str = "gpu__time_duration.sum";
const MEMORY_PCT: &str = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
const COMPUTE_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const DRAM_PCT: &[&str] = &[
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
];
const ACHIEVED_OCCUPANCY: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
const THEORETICAL_OCCUPANCY: &str = "sm__maximum_warps_per_active_cycle_pct";
const L2_HIT_RATE: &str = "lts__t_sector_hit_rate.pct";
const TENSOR_PREFIX: &str = "sm__pipe_tensor";
const TENSOR_SUFFIX: &str = "cycles_active.avg.pct_of_peak_sustained_active";
/// WarpStateStats: warp cycles per issued instruction spent stalled for each reason.
const STALL_PREFIX: &str = "smsp__average_warps_issue_stalled_";
const STALL_SUFFIX: &str = "_per_issue_active.ratio";
/// Kernels kept in a record (by total duration), stall reasons kept per kernel.
const TOP_KERNELS: usize = 5;
const TOP_STALLS: usize = 4;
/// Largest ncu report read back.
const MAX_REPORT_BYTES: u64 = 32 << 20;
/// Candidate calls profiled by default (after one unwatched warm-up call).
pub const DEFAULT_CALLS: u32 = 2;

#[cfg(test)]
mod tests;
