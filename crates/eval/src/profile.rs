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

use crate::{auth, harness, record, request, supervisor, EvalOptions};
use ksearch_spec::{DType, Solution, Task};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

    fn failed(note: impl Into<String>) -> Profile {
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

/// `$KSEARCH_NCU`, else `ncu` in `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, on PATH, in
/// `/usr/local/cuda/bin`, or the newest `/opt/nvidia/nsight-compute/*/ncu`.
pub fn find_ncu() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KSEARCH_NCU") {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|d| PathBuf::from(d).join("bin"))
        .collect();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    let mut installs: Vec<PathBuf> = std::fs::read_dir("/opt/nvidia/nsight-compute")
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    installs.sort();
    dirs.extend(installs.into_iter().rev());
    dirs.into_iter().map(|d| d.join("ncu")).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Bytes of one copy of a workload's inputs and outputs (sub-byte types rounded up per tensor).
fn footprint(task: &Task, index: usize) -> u128 {
    let def = &task.definition;
    let axes = task.workloads[index].all_axes(def);
    def.inputs
        .values()
        .chain(def.outputs.values())
        .map(|t| {
            let elements: u128 = t
                .dims()
                .iter()
                .map(|d| axes.get(d).map_or(1, |v| (*v).max(0) as u128))
                .product();
            (elements * bits(t.dtype)).div_ceil(8)
        })
        .sum()
}

fn bits(dtype: DType) -> u128 {
    match dtype {
        DType::Float64 | DType::Int64 => 64,
        DType::Float32 | DType::Int32 => 32,
        DType::Float16 | DType::Bfloat16 | DType::Int16 => 16,
        DType::Float8E4m3 | DType::Float8E5m2 | DType::Int8 | DType::Uint8 | DType::Bool => 8,
        DType::Float4E2m1 => 4,
    }
}

/// The workload to profile: the one named, else the largest by bytes of inputs and outputs (the
/// first of equals): where a kernel spends most, and least distorted by launch overhead.
/// Returns its index and why it was chosen.
pub fn choose_workload(task: &Task, wanted: Option<&str>) -> Result<(usize, String), ProfileError> {
    if let Some(uuid) = wanted {
        return match task.workloads.iter().position(|w| w.uuid == uuid) {
            Some(i) => Ok((i, "named by --profile-workload".to_string())),
            None => Err(ProfileError::UnknownWorkload(uuid.to_string())),
        };
    }
    let (index, bytes) = (0..task.workloads.len())
        .map(|i| (i, footprint(task, i)))
        .fold(None, |best: Option<(usize, u128)>, (i, b)| match best {
            Some((_, top)) if top >= b => best,
            _ => Some((i, b)),
        })
        .ok_or(ProfileError::NoWorkloads)?;
    Ok((
        index,
        format!("the largest workload ({} of inputs and outputs)", size(bytes)),
    ))
}

fn size(bytes: u128) -> String {
    let b = bytes as f64;
    match bytes {
        n if n >= 1 << 30 => format!("{:.2} GiB", b / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", b / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", b / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// The arguments of ncu around `python -m ksearch_harness`: the raw page as CSV in base units,
/// to `log_file`, for kernels launched between cudaProfilerStart and Stop only. Clocks are left
/// as they run (`--clock-control none`), as the evaluation's timing leaves them; with
/// `named_metrics` false only the sections are asked for.
pub fn ncu_arguments(python: &Path, log_file: &Path, named_metrics: bool) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--print-kernel-base",
        "function",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--clock-control",
        "none",
    ]
    .iter()
    .map(Into::into)
    .collect();
    for section in SECTIONS {
        args.push("--section".into());
        args.push(section.into());
    }
    if named_metrics {
        args.push("--metrics".into());
        args.push(METRICS.join(",").into());
    }
    args.push("--log-file".into());
    args.push(log_file.as_os_str().to_owned());
    args.push(python.as_os_str().to_owned());
    args.push("-m".into());
    args.push("ksearch_harness".into());
    args
}

/// Profiles `solution` on one workload of `task` with ncu (see the module's doc). `opts` are the
/// evaluation's (device, arch, build cache, environment, seed); `notify` hears about set-up.
/// Never fails: a profile that could not be taken says why in its `note`.
pub fn profile(
    task: &Task,
    solution: &Solution,
    opts: &EvalOptions,
    popts: &ProfileOptions,
    notify: &dyn Fn(&str),
) -> Profile {
    let start = Instant::now();
    let mut profile = take(task, solution, opts, popts, notify);
    profile.seconds = Some(start.elapsed().as_secs_f64());
    profile
}

fn take(
    task: &Task,
    solution: &Solution,
    opts: &EvalOptions,
    popts: &ProfileOptions,
    notify: &dyn Fn(&str),
) -> Profile {
    let Some(ncu) = find_ncu() else {
        return Profile::unavailable(match std::env::var_os("KSEARCH_NCU") {
            Some(p) => format!(
                "not profiled: KSEARCH_NCU={} is not an executable file",
                Path::new(&p).display()
            ),
            None => "not profiled: Nsight Compute (ncu) was not found (looked at $KSEARCH_NCU, $CUDA_HOME/bin, \
                     $CUDA_PATH/bin, PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute/*); \
                     the evaluation is unaffected"
                .to_string(),
        });
    };
    let backend = match crate::backend_for(solution.spec.language, opts.device.as_deref()) {
        Ok(b) => b,
        Err(e) => return Profile::unavailable(format!("not profiled: {e}")),
    };
    if !backend.on_gpu() || backend.dialect() == Some("metal") {
        return Profile::unavailable(format!(
            "not profiled: Nsight Compute profiles CUDA kernels, and backend {} runs on {}",
            backend.name, backend.device
        ));
    }
    let calls = popts.calls.clamp(1, 10);
    let (index, choice) = match choose_workload(task, popts.workload.as_deref()) {
        Ok(c) => c,
        Err(e) => return Profile::unavailable(format!("not profiled: {e}")),
    };
    let one = Task {
        workloads: vec![task.workloads[index].clone()],
        ..task.clone()
    };
    let tool = ncu_version(&ncu);
    notify(&format!(
        "profile: {tool} on workload {} ({choice}), {calls} call(s)",
        one.workloads[0].uuid
    ));
    let mut outcome = run_once(&ncu, &one, solution, &backend, opts, calls, true, notify);
    if let Err(Failure::MetricsRefused(_)) = &outcome {
        notify("profile: ncu refused a named metric; profiling again with its sections alone");
        outcome = run_once(&ncu, &one, solution, &backend, opts, calls, false, notify);
    }
    let launches = match outcome {
        Ok(l) => l,
        Err(Failure::MetricsRefused(note) | Failure::Other(note)) => {
            let mut p = Profile::failed(format!("not profiled: {note}"));
            p.tool = Some(tool);
            p.workload = Some(one.workloads[0].uuid.clone());
            return p;
        }
    };
    let Some((total, kernels, kernel_count)) = aggregate(&launches, calls) else {
        let mut p = Profile::failed("not profiled: ncu's report lists no kernel launch");
        p.tool = Some(tool);
        return p;
    };
    Profile {
        status: ProfileStatus::Profiled,
        note: Some(
            "ncu replays each kernel with caches flushed: its durations are not the evaluation's timings".to_string(),
        ),
        tool: Some(tool),
        workload: Some(one.workloads[0].uuid.clone()),
        workload_choice: Some(choice),
        calls,
        launches: launches.len(),
        kernel_count,
        total: Some(total),
        kernels,
        seconds: None,
    }
}

enum Failure {
    /// ncu would not collect a named metric (another chip, another version).
    MetricsRefused(String),
    Other(String),
}

/// `ncu --version`'s version line as `ncu VERSION`, or plain `ncu`.
fn ncu_version(ncu: &Path) -> String {
    let out = std::process::Command::new(ncu)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Version "))
        .and_then(|v| v.split_whitespace().next())
        .map(|v| format!("ncu {v}"))
        .unwrap_or_else(|| "ncu".to_string())
}

#[allow(clippy::too_many_arguments)]
fn run_once(
    ncu: &Path,
    task: &Task,
    solution: &Solution,
    backend: &crate::Backend,
    opts: &EvalOptions,
    calls: u32,
    named_metrics: bool,
    notify: &dyn Fn(&str),
) -> Result<Vec<Launch>, Failure> {
    let cfg = &task.config.evaluation;
    let eval_timeout = opts
        .timeout
        .unwrap_or(Duration::try_from_secs_f64(cfg.timeout_s).unwrap_or(Duration::from_secs(60)));
    // ncu's start-up and its replay passes (tens per kernel) come on top of a plain run.
    let timeout = (eval_timeout * 2).clamp(Duration::from_secs(120), Duration::from_secs(600));
    let mut request = request::build_request(task, solution, backend, 1, timeout, opts);
    request["mode"] = serde_json::json!("profile");
    request["profile"] = serde_json::json!({"calls": calls});
    let key = auth::new_key().map_err(|e| Failure::Other(format!("cannot draw a protocol key: {e}")))?;
    request["auth"] = serde_json::json!({"key": auth::hex(&key)});
    let limits = supervisor::Limits {
        timeout,
        memory_bytes: None, // a GPU backend (see evaluate: CUDA reserves huge mappings)
        ..supervisor::Limits::default()
    };
    let attempt = |python: &Path| -> Result<(supervisor::Outcome, Option<String>), Failure> {
        let setup = |e: std::io::Error| Failure::Other(format!("cannot create a private temp dir: {e}"));
        let workdir = tempfile::Builder::new()
            .prefix("ksearch-profile-")
            .tempdir()
            .map_err(setup)?;
        // The report lies outside the harness's working directory.
        let reports = tempfile::Builder::new()
            .prefix("ksearch-ncu-")
            .tempdir()
            .map_err(setup)?;
        let log_file = reports.path().join("ncu.csv");
        let root = harness::install_harness(workdir.path()).map_err(|e| Failure::Other(e.to_string()))?;
        let mut env = vec![
            ("PYTHONPATH", root.as_os_str()),
            ("PYTHONDONTWRITEBYTECODE", std::ffi::OsStr::new("1")),
            ("PYTHONHASHSEED", std::ffi::OsStr::new("0")),
            ("OPENBLAS_NUM_THREADS", std::ffi::OsStr::new("1")),
            ("MKL_NUM_THREADS", std::ffi::OsStr::new("1")),
            ("OMP_NUM_THREADS", std::ffi::OsStr::new("1")),
        ];
        for (k, v) in &opts.env {
            env.push((k.as_str(), std::ffi::OsStr::new(v.as_str())));
        }
        let args = ncu_arguments(python, &log_file, named_metrics);
        let outcome = supervisor::run(
            ncu,
            &args,
            workdir.path(),
            &env,
            request.to_string().into_bytes(),
            &limits,
        )
        .map_err(|e| Failure::Other(format!("cannot start {}: {e}", ncu.display())))?;
        let report = read_bounded(&log_file);
        if let (Some(dir), Some(text)) = (std::env::var_os("KSEARCH_PROFILE_KEEP"), report.as_ref()) {
            let dest = Path::new(&dir).join(format!("ncu-{}.csv", task.definition.name));
            if let Err(e) = std::fs::write(&dest, text) {
                notify(&format!("KSEARCH_PROFILE_KEEP: cannot write {}: {e}", dest.display()));
            }
        }
        Ok((outcome, report))
    };
    let (mut outcome, mut report) = attempt(&harness::python())?;
    if record::missing_module(&auth::verify(&key, outcome.lines.clone()).lines).as_deref() == Some("numpy") {
        let python = harness::python_with_numpy(notify).map_err(|e| Failure::Other(e.to_string()))?;
        (outcome, report) = attempt(&python)?;
    }
    read_outcome(&key, outcome, report.as_deref(), named_metrics)
}

fn read_bounded(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_REPORT_BYTES {
        return None;
    }
    std::fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// What the profiling run's lines and ncu's report say: the launches, or why there are none.
fn read_outcome(
    key: &[u8],
    outcome: supervisor::Outcome,
    report: Option<&str>,
    named_metrics: bool,
) -> Result<Vec<Launch>, Failure> {
    let verified = auth::verify(key, outcome.lines);
    if !verified.unauthenticated.is_empty() {
        return Err(Failure::Other(format!(
            "{} protocol line(s) of the profiling run failed authentication",
            verified.unauthenticated.len()
        )));
    }
    let events: Vec<serde_json::Value> = verified
        .lines
        .iter()
        .filter_map(|l| l.as_ref().ok())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let text = |e: &serde_json::Value, field: &str| e[field].as_str().unwrap_or("").to_string();
    let mut profiled = None;
    for e in &events {
        match e["event"].as_str() {
            Some("compile") if e["ok"] == serde_json::json!(false) => {
                let why = e["refused"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| first_line(&text(e, "log")));
                return Err(Failure::Other(format!("the candidate did not build: {why}")));
            }
            Some("profile_error") => {
                return Err(Failure::Other(format!(
                    "the candidate failed while profiled ({}): {}",
                    text(e, "status"),
                    text(e, "reason")
                )))
            }
            Some("task_error") | Some("harness_error") => {
                return Err(Failure::Other(format!("the harness stopped: {}", text(e, "message"))))
            }
            Some("profiled") => profiled = Some(e.clone()),
            _ => {}
        }
    }
    let Some(profiled) = profiled else {
        let exit = match outcome.exit {
            supervisor::Exit::TimedOut => "it ran past its time limit".to_string(),
            supervisor::Exit::Code(c) => format!("exit status {c}"),
            supervisor::Exit::Signal(s) => format!("signal {s}"),
        };
        let tail: Vec<&str> = outcome.log.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(Failure::Other(format!(
            "the profiling run ended without calling the candidate ({exit}){}",
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {}", tail.join(" | "))
            }
        )));
    };
    if profiled["bracketed"] != serde_json::json!(true) {
        return Err(Failure::Other(
            "the harness found no CUDA profiler API to mark the candidate's calls with".to_string(),
        ));
    }
    let Some(report) = report else {
        return Err(Failure::Other("ncu wrote no report (or one over 32 MiB)".to_string()));
    };
    let messages = ncu_messages(report);
    match parse_ncu_csv(report) {
        Ok(launches) if !launches.is_empty() => Ok(launches),
        result => {
            let why = match result {
                Err(e) => e.to_string(),
                Ok(_) => "the report lists no kernel launch".to_string(),
            };
            let said = if messages.is_empty() {
                String::new()
            } else {
                format!("; ncu said: {}", messages.join(" | "))
            };
            let note = format!("ncu's report could not be used: {why}{said}");
            let refused = messages.iter().any(|m| m.to_lowercase().contains("metric"));
            Err(if named_metrics && refused {
                Failure::MetricsRefused(note)
            } else {
                Failure::Other(note)
            })
        }
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .chars()
        .take(300)
        .collect()
}

/// ncu's own `==ERROR==` and `==WARNING==` lines (the first few), without the prefix.
fn ncu_messages(report: &str) -> Vec<String> {
    report
        .lines()
        .filter_map(|l| l.strip_prefix("==ERROR==").or_else(|| l.strip_prefix("==WARNING==")))
        .map(|l| l.trim().chars().take(300).collect())
        .take(4)
        .collect()
}

/// Splits one CSV record (RFC 4180 quoting); `None` for an unterminated quote.
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}

/// A metric value as ncu prints it (`1,234.5`, `n/a`, empty), or `None`.
fn number(text: &str) -> Option<f64> {
    let cleaned: String = text.trim().chars().filter(|&c| c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Nanoseconds per unit of an ncu time unit (`nsecond`, `usecond`, `msecond`, `second`).
fn time_scale(unit: &str) -> Option<f64> {
    match unit.trim() {
        "nsecond" | "ns" => Some(1.0),
        "usecond" | "us" => Some(1e3),
        "msecond" | "ms" => Some(1e6),
        "second" | "s" => Some(1e9),
        _ => None,
    }
}

/// The launches of an ncu `--csv --page raw` report: a header line (`"ID","Process ID",...,
/// "Kernel Name",...` then one column per metric), a units line (its ID field empty), then one
/// line per kernel launch. ncu's `==PROF==`/`==WARNING==` lines and anything before the header
/// are skipped; time metrics are converted to ns from their unit.
pub fn parse_ncu_csv(text: &str) -> Result<Vec<Launch>, ProfileError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with("==") && !l.trim().is_empty());
    let header = loop {
        let Some((n, line)) = lines.next() else {
            return Err(ProfileError::NoHeader);
        };
        if !line.starts_with("\"ID\"") && !line.starts_with("ID,") {
            continue;
        }
        break csv_fields(line).ok_or(ProfileError::Unterminated { line: n + 1 })?;
    };
    let column = |name: &'static str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or(ProfileError::MissingColumn(name))
    };
    let id = column("ID")?;
    let name = column("Kernel Name")?;
    let first_metric = header.iter().position(|h| h.contains("__")).unwrap_or(header.len());
    let mut scales: Vec<f64> = vec![1.0; header.len()];
    let mut launches = Vec::new();
    for (n, line) in lines {
        let fields = csv_fields(line).ok_or(ProfileError::Unterminated { line: n + 1 })?;
        if fields.len() != header.len() {
            return Err(ProfileError::FieldCount {
                line: n + 1,
                found: fields.len(),
                expected: header.len(),
            });
        }
        if fields[id].trim().is_empty() {
            // The units line: time metrics scale to ns.
            for (i, unit) in fields.iter().enumerate() {
                scales[i] = time_scale(unit).unwrap_or(1.0);
            }
            continue;
        }
        let metrics = header
            .iter()
            .zip(&fields)
            .enumerate()
            .skip(first_metric)
            .filter_map(|(i, (h, v))| number(v).map(|v| (h.clone(), v * scales[i])))
            .collect();
        launches.push(Launch {
            name: fields[name].clone(),
            metrics,
        });
    }
    Ok(launches)
}

/// Weighted mean of `value(launch)` over the launches that have it, weighted by duration (by
/// count where no launch has a positive duration).
fn weighted(launches: &[&Launch], value: impl Fn(&Launch) -> Option<f64>) -> Option<f64> {
    let by_time = launches
        .iter()
        .any(|l| l.metrics.get(DURATION).is_some_and(|d| *d > 0.0));
    let (mut sum, mut weight) = (0.0, 0.0);
    for l in launches {
        if let Some(v) = value(l) {
            let w = if by_time {
                l.metrics.get(DURATION).copied().unwrap_or(0.0)
            } else {
                1.0
            };
            sum += v * w;
            weight += w;
        }
    }
    (weight > 0.0).then(|| sum / weight)
}

fn metrics_of(launches: &[&Launch], calls: u32) -> KernelMetrics {
    let get = |name: &'static str| weighted(launches, |l| l.metrics.get(name).copied());
    let tensor = weighted(launches, |l| {
        l.metrics
            .iter()
            .filter(|(k, _)| k.starts_with(TENSOR_PREFIX) && k.ends_with(TENSOR_SUFFIX))
            .map(|(_, v)| *v)
            .reduce(f64::max)
    });
    let mut reasons: Vec<String> = launches
        .iter()
        .flat_map(|l| l.metrics.keys())
        .filter_map(|k| k.strip_prefix(STALL_PREFIX)?.strip_suffix(STALL_SUFFIX))
        .filter(|r| *r != "selected")
        .map(str::to_string)
        .collect();
    reasons.sort();
    reasons.dedup();
    let mut stalls: Vec<Stall> = reasons
        .into_iter()
        .filter_map(|r| {
            let key = format!("{STALL_PREFIX}{r}{STALL_SUFFIX}");
            let v = weighted(launches, |l| l.metrics.get(&key).copied())?;
            Some(Stall {
                reason: r,
                cycles_per_instruction: v,
                share_pct: 0.0,
            })
        })
        .collect();
    let stalled: f64 = stalls.iter().map(|s| s.cycles_per_instruction).sum();
    for s in &mut stalls {
        s.share_pct = if stalled > 0.0 {
            100.0 * s.cycles_per_instruction / stalled
        } else {
            0.0
        };
    }
    stalls.sort_by(|a, b| {
        b.cycles_per_instruction
            .total_cmp(&a.cycles_per_instruction)
            .then(a.reason.cmp(&b.reason))
    });
    stalls.retain(|s| s.cycles_per_instruction > 0.0);
    stalls.truncate(TOP_STALLS);
    let total_ns: f64 = launches.iter().filter_map(|l| l.metrics.get(DURATION)).sum();
    KernelMetrics {
        duration_ns: total_ns / f64::from(calls.max(1)),
        memory_throughput_pct: get(MEMORY_PCT),
        dram_throughput_pct: DRAM_PCT.iter().find_map(|m| get(m)),
        compute_throughput_pct: get(COMPUTE_PCT),
        achieved_occupancy_pct: get(ACHIEVED_OCCUPANCY),
        theoretical_occupancy_pct: get(THEORETICAL_OCCUPANCY),
        l2_hit_rate_pct: get(L2_HIT_RATE),
        tensor_pipe_pct: tensor,
        stalls,
    }
}

/// Every launch together (duration-weighted), the top kernels by total duration, and the number
/// of distinct kernels; `None` for no launch. Durations are per candidate call (`calls`).
pub fn aggregate(launches: &[Launch], calls: u32) -> Option<(KernelMetrics, Vec<KernelProfile>, usize)> {
    if launches.is_empty() {
        return None;
    }
    let all: Vec<&Launch> = launches.iter().collect();
    let total = metrics_of(&all, calls);
    let mut names: Vec<&str> = Vec::new();
    for l in launches {
        if !names.contains(&l.name.as_str()) {
            names.push(&l.name);
        }
    }
    let mut kernels: Vec<KernelProfile> = names
        .iter()
        .map(|name| {
            let mine: Vec<&Launch> = launches.iter().filter(|l| l.name == *name).collect();
            let metrics = metrics_of(&mine, calls);
            KernelProfile {
                name: name.to_string(),
                launches: mine.len(),
                share_pct: if total.duration_ns > 0.0 {
                    100.0 * metrics.duration_ns / total.duration_ns
                } else {
                    0.0
                },
                metrics,
            }
        })
        .collect();
    kernels.sort_by(|a, b| b.metrics.duration_ns.total_cmp(&a.metrics.duration_ns));
    let count = kernels.len();
    kernels.truncate(TOP_KERNELS);
    Some((total, kernels, count))
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "n/a".to_string())
}

fn duration(ns: f64) -> String {
    match ns {
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.1} us", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}

fn stall_text(stalls: &[Stall], n: usize) -> String {
    stalls
        .iter()
        .take(n)
        .map(|s| format!("{} {:.0}%", s.reason, s.share_pct))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A few lines for the planner's prompt: what bounds the kernel (memory or compute throughput,
/// occupancy, stalls, L2, tensor pipes), for the whole call and its top kernels; one line when
/// there is no profile.
pub fn summary(p: &Profile) -> String {
    let Some(total) = p.total.as_ref().filter(|_| p.status == ProfileStatus::Profiled) else {
        let why = p.note.as_deref().unwrap_or("no profile");
        return format!("Profile: none ({})", why.strip_prefix("not profiled: ").unwrap_or(why));
    };
    let tool = p.tool.as_deref().unwrap_or("ncu");
    let workload = p.workload.as_deref().unwrap_or("?");
    let kernels = match p.kernel_count {
        1 => "1 kernel".to_string(),
        n => format!("{n} kernels"),
    };
    let mut out = vec![format!(
        "Profile ({tool}, workload {workload}, {kernels}, {} of GPU time per call under ncu):",
        duration(total.duration_ns)
    )];
    let dram = total
        .dram_throughput_pct
        .map(|d| format!(" (DRAM {d:.0}%)"))
        .unwrap_or_default();
    out.push(format!(
        "- throughput, % of peak: memory {}{dram}, compute (SM) {}; L2 hit rate {}; tensor pipes {}",
        pct(total.memory_throughput_pct),
        pct(total.compute_throughput_pct),
        pct(total.l2_hit_rate_pct),
        pct(total.tensor_pipe_pct),
    ));
    let theoretical = total
        .theoretical_occupancy_pct
        .map(|t| format!(" (theoretical {t:.0}%)"))
        .unwrap_or_default();
    let stalls = match total.stalls.is_empty() {
        true => "n/a".to_string(),
        false => stall_text(&total.stalls, 3),
    };
    out.push(format!(
        "- achieved occupancy {}{theoretical}; top warp stalls (share of stalled cycles): {stalls}",
        pct(total.achieved_occupancy_pct)
    ));
    if p.kernel_count > 1 {
        for k in p.kernels.iter().take(3) {
            out.push(format!(
                "- kernel {} ({}x): {:.0}% of GPU time, memory {}, compute {}, occupancy {}{}",
                k.name,
                k.launches,
                k.share_pct,
                pct(k.metrics.memory_throughput_pct),
                pct(k.metrics.compute_throughput_pct),
                pct(k.metrics.achieved_occupancy_pct),
                match k.metrics.stalls.first() {
                    Some(s) => format!(", mostly stalled on {}", s.reason),
                    None => String::new(),
                }
            ));
        }
    }
    out.join("\n")
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;
