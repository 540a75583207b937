//! Evaluation of kernel candidates for ksearch: untrusted code, trusted numbers.
//!
//! [`evaluate`] turns (task, solution, options) into an [`Evaluation`]: static checks on the
//! source, then one supervised child process running the Python harness
//! (`python3 -m ksearch_harness`, docs/protocol.md) that compiles, checks against the reference
//! on fresh inputs, and returns raw timing samples. Statistics (medians, IQR, speedups,
//! geometric means) are computed here, never by code that shares a process with the candidate.
//! The child runs in its own process group with resource limits and a private temp dir; a crash,
//! a hang or garbage on its pipes becomes a status with a reason, never a lost evaluation.

mod assemble;
pub mod harness;
mod record;
mod static_check;
mod stats;
mod status;
pub mod supervisor;

pub use record::{CompileReport, Correctness, Evaluation, Provenance, Timing, WorkloadResult};
pub use static_check::{check_sources, Rejection};
pub use stats::{geometric_mean, SampleStats};
pub use status::Status;

use ksearch_spec::{Problem, Solution, Task};
use serde_json::json;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The task itself is unusable (e.g. its reference cannot discriminate); tell its author.
    #[error("{0}")]
    Task(Problem),
    /// ksearch could not set up the evaluation (Python, the harness, a temp dir).
    #[error("{0}")]
    Setup(String),
    #[error("no evaluation backend runs '{language}' solutions yet (available: c)")]
    UnsupportedLanguage { language: String },
}

/// Settings of one evaluation; task.toml gives the defaults, these override them.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub seed: u64,
    pub trials: Option<u32>,
    pub timeout: Option<Duration>,
    /// Address-space limit of the evaluation process, in bytes.
    pub memory_bytes: Option<u64>,
    /// Stop at the first workload that does not pass (the search wants this; a report does not).
    pub fail_fast: bool,
}

impl EvalOptions {
    /// Options with the task's defaults. The seed has no default: a caller that forgot it would
    /// evaluate every candidate on the same predictable inputs.
    pub fn new(seed: u64) -> Self {
        EvalOptions {
            seed,
            trials: None,
            timeout: None,
            memory_bytes: Some(8 << 30),
            fail_fast: false,
        }
    }
}

/// The backend that evaluates a language, and the device it runs on.
fn backend_for(language: &str) -> Result<(&'static str, &'static str), EvalError> {
    match language {
        "c" => Ok(("c", "cpu")),
        other => Err(EvalError::UnsupportedLanguage {
            language: other.to_string(),
        }),
    }
}

/// Evaluates `solution` on every workload of `task`. `notify` hears about slow one-time set-up
/// (creating the harness's Python environment).
pub fn evaluate(
    task: &Task,
    solution: &Solution,
    opts: &EvalOptions,
    notify: &dyn Fn(&str),
) -> Result<Evaluation, EvalError> {
    let (backend, device) = backend_for(&solution.spec.language)?;
    let cfg = &task.config.evaluation;
    let trials = opts.trials.unwrap_or(cfg.trials).max(1);
    // task.toml bounds timeout_s (spec validation), so the conversion cannot fail there.
    let timeout = opts
        .timeout
        .unwrap_or(Duration::try_from_secs_f64(cfg.timeout_s).unwrap_or(Duration::from_secs(60)));
    let provenance = Provenance {
        device: device.to_string(),
        backend: backend.to_string(),
        seed: opts.seed,
        harness_version: None,
        environment: serde_json::Value::Null,
        trials,
    };
    let assembler = assemble::Assembler::new(task, solution, provenance, timeout);

    if let Some(rejection) = check_sources(&solution.spec.language, &solution.sources, &task.config) {
        return Ok(assembler.rejected(&rejection));
    }

    let request = build_request(task, solution, backend, device, trials, timeout, opts);
    // Debugging aid (docs/protocol.md): keep the exact request to replay it by hand.
    if let Some(path) = std::env::var_os("KSEARCH_SAVE_REQUEST") {
        std::fs::write(&path, request.to_string()).map_err(|e| {
            EvalError::Setup(format!(
                "KSEARCH_SAVE_REQUEST: cannot write {}: {e}",
                path.to_string_lossy()
            ))
        })?;
    }
    let limits = supervisor::Limits {
        timeout,
        memory_bytes: opts.memory_bytes,
        ..supervisor::Limits::default()
    };
    // Candidates of OpenMP tasks get every core; otherwise OpenMP (in the reference's libraries)
    // is held to one thread like BLAS.
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .to_string();
    let omp_threads: &str = if task.config.kernel.openmp { &cores } else { "1" };
    let run = |python: &std::path::Path| -> Result<supervisor::Outcome, EvalError> {
        let workdir = tempfile::Builder::new()
            .prefix("ksearch-eval-")
            .tempdir()
            .map_err(|e| EvalError::Setup(format!("cannot create a private temp dir: {e}")))?;
        let root = harness::install_harness(workdir.path())?;
        let env = [
            ("PYTHONPATH", root.as_os_str()),
            ("PYTHONDONTWRITEBYTECODE", std::ffi::OsStr::new("1")),
            ("PYTHONHASHSEED", std::ffi::OsStr::new("0")),
            // One BLAS thread for the reference: multi-threaded BLAS keeps helper threads
            // spinning after a call, which would steal cores from the candidate's timed calls and
            // make the reference's time depend on the machine's load. (OpenMP stays free for
            // candidates of tasks that enable it.)
            ("OPENBLAS_NUM_THREADS", std::ffi::OsStr::new("1")),
            ("MKL_NUM_THREADS", std::ffi::OsStr::new("1")),
            ("OMP_NUM_THREADS", std::ffi::OsStr::new(omp_threads)),
        ];
        supervisor::run(
            python,
            &["-m", "ksearch_harness"],
            workdir.path(),
            &env,
            request.to_string().into_bytes(),
            &limits,
        )
        .map_err(|e| EvalError::Setup(format!("cannot start the harness with {}: {e}", python.display())))
    };
    let mut outcome = run(&harness::python())?;
    if record::missing_module(&outcome.lines).is_some() {
        // Set up an interpreter with NumPy (once; it is reused afterwards) and try again.
        outcome = run(&harness::python_with_numpy(notify)?)?;
    }
    assembler.finish(outcome)
}

fn build_request(
    task: &Task,
    solution: &Solution,
    backend: &str,
    device: &str,
    trials: u32,
    timeout: Duration,
    opts: &EvalOptions,
) -> serde_json::Value {
    let cfg = &task.config;
    let tolerance: serde_json::Map<String, serde_json::Value> = task
        .definition
        .dtypes()
        .into_iter()
        .filter_map(|d| {
            cfg.tolerance_for(d)
                .map(|t| (d.name().to_string(), json!({"atol": t.atol, "rtol": t.rtol})))
        })
        .collect();
    json!({
        "protocol": 1,
        "mode": "evaluate",
        "task_dir": task.dir().map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf())),
        "definition": task.definition,
        "workloads": task.workloads,
        "candidate": {
            "language": solution.spec.language,
            "sources": solution.sources,
            "entry_point": solution.spec.entry_point,
            "destination_passing_style": solution.spec.destination_passing_style,
            "build": {"openmp": cfg.kernel.openmp, "extra_flags": []},
        },
        "device": {"backend": backend, "name": device},
        "seed": opts.seed,
        "correctness": {
            "trials": trials,
            "distributions": cfg.evaluation.distributions,
            "input_overrides": cfg.inputs,
            "tolerance": tolerance,
            "matched_ratio": cfg.evaluation.matched_ratio,
        },
        "timing": {
            "warmup": cfg.evaluation.warmup,
            "iterations": cfg.evaluation.iterations,
            "min_iterations": cfg.evaluation.min_iterations,
            "max_seconds": cfg.evaluation.max_timing_s,
        },
        "limits": {"log_bytes": 65536, "compile_timeout_s": timeout.as_secs_f64().min(30.0)},
        "fail_fast": opts.fail_fast,
    })
}
