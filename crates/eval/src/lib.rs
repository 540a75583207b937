//! Evaluation of kernel candidates for ksearch: untrusted code, trusted numbers.
//!
//! [`evaluate`] turns (task, solution, options) into an [`Evaluation`]: static checks on the
//! source, then one supervised child process running the Python harness
//! (`python3 -m ksearch_harness`, docs/protocol.md) that compiles, checks against the reference
//! on fresh inputs, and returns raw timing samples. Statistics (medians, IQR, speedups,
//! geometric means) are computed here, never by code that shares a process with the candidate.
//! The child runs in its own process group with resource limits and a private temp dir; a crash,
//! a hang or garbage on its pipes becomes a status with a reason, never a lost evaluation.
//!
//! The steps of one evaluation, each in its own module:
//! - request building: the backend and device a solution runs on ([`backend_for`], [`Backend`];
//!   one module per harness backend under `backend/`, which also adds that backend's fields)
//!   and the JSON request the harness reads on stdin (docs/protocol.md, "Request");
//! - the [`supervisor`]: the harness process in its own process group under resource limits,
//!   bounded capture of its stdout (protocol lines) and stderr (the log), the timeout, the kill
//!   of everything it started; and its seccomp guard, installed between fork and exec, which
//!   keeps every process of the evaluation from signalling, tracing or re-limiting ksearch;
//! - the [`warm`] fork server: on CUDA devices (elsewhere with `KSEARCH_WARM`) a server that
//!   imported NumPy (and PyTorch, for the GPU backends) once forks one child per evaluation, so
//!   the imports are paid once, not per evaluation; a server that cannot be used means a fresh
//!   process, never a lost evaluation;
//! - authentication of the protocol stream: a fresh key per evaluation, and every line the
//!   harness writes carries an HMAC under it, so a line forged, replayed or reordered by the
//!   candidate voids the record (docs/protocol.md, "Authenticated lines");
//! - record assembly: the lines and how the process ended become an [`Evaluation`], with
//!   [`SampleStats`] of the raw samples, speedups, and the checks that flag a timing as
//!   `suspicious` (the roofline bound of the device, from ksearch-kb's hardware entries, and the
//!   clock cross-checks);
//! - GPU checks: the host clock against CUDA events (work on another stream or thread), and
//!   compute-sanitizer's verdict ([`sanitizer`], [`EvalOptions::sanitize`]);
//! - profiling: [`profile::profile`] runs the harness once more under Nsight Compute for advice
//!   to the planner, never evidence.
//!
//! Entry points: [`evaluate`] with [`EvalOptions`] (and [`EvalError`] for what is no candidate's
//! fault); [`check_sources`] alone, for the static checks; [`profile::profile`] after an
//! evaluation that passed; [`harness`] for the interpreter and the embedded harness package.
//! docs/threat-model.md lists what a hostile candidate can try and which of these steps stops it.
//!
//! This crate reads tasks and solutions through ksearch-spec and device peaks through ksearch-kb;
//! ksearch-run (the search's executor), ksearch-cli (`ksearch eval`) and ksearch-import's tests
//! call it. It stores nothing: the caller keeps the [`Evaluation`] (ksearch-store's
//! `evaluations` table holds it as JSON).
//!
//! Backends ([`backend_for`]): `c` on the CPU; `cuda`, `triton` and `python` on a CUDA device
//! through PyTorch (the python backend also on a CPU-only torch); `mlx` on MLX's GPU or CPU
//! (docs/mlx.md).

#![warn(missing_docs)]

mod assemble;
mod auth;
mod backend;
mod gpu_checks;
pub mod harness;
pub mod profile;
mod record;
mod request;
mod roofline;
pub mod sanitizer;
mod static_check;
mod stats;
mod status;
pub mod supervisor;
pub mod warm;
mod worker_clock;

pub use backend::{backend_for, Backend};
pub use record::{CompileReport, Correctness, Evaluation, KernelResources, Provenance, Timing, WorkloadResult};
pub use static_check::{check_sources, Rejection};
pub use stats::{geometric_mean, SampleStats};
pub use status::Status;

use ksearch_spec::{Problem, Solution, Task};
use std::path::PathBuf;
use std::time::Duration;

/// Why no evaluation could be made at all. A candidate's own failure is never one of these: it is
/// a [`Status`] with a reason in the [`Evaluation`].
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The task itself is unusable (e.g. its reference cannot discriminate); tell its author.
    #[error("{0}")]
    Task(Problem),
    /// ksearch could not set up the evaluation (Python, the harness, a temp dir).
    #[error("{0}")]
    Setup(String),
    /// The interpreter the user chose (`KSEARCH_PYTHON`) cannot run the harness: it does not
    /// start or lacks NumPy. A setting to fix, unlike [`EvalError::Setup`]'s failures of the
    /// machine.
    #[error("{0}")]
    Interpreter(String),
    /// The options asked for do not go together, or not with this solution's backend (e.g.
    /// `--sanitize` with `--build-only`, or on a C kernel): bad input.
    #[error("{0}")]
    Options(String),
    /// The backend of the solution's language cannot run on the device asked for (e.g. backend
    /// c on `cuda:0`, or a malformed `cuda:N`).
    #[error("backend {backend} cannot run on device '{device}' (expected {expected})")]
    UnsupportedDevice {
        /// The backend's name ([`Backend::name`]).
        backend: &'static str,
        /// The device asked for.
        device: String,
        /// The devices this backend accepts, in words (`cpu`, `cuda or cuda:N`, ...).
        expected: &'static str,
    },
}

/// CUDA-graph timing of GPU kernels (docs/protocol.md, Timing on a GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CudaGraph {
    /// No graphs while the harness's gate works (the launch is then outside the events anyway);
    /// without a gate, graphs for kernels whose warm-up replay took under 30 us, where launch
    /// overhead would dominate, and plain calls otherwise.
    #[default]
    Auto,
    /// Capture each callee's call once into a CUDA graph and time its replays (a call that
    /// cannot be captured falls back to plain calls).
    On,
    /// Never capture: every timed call is a plain call between the events.
    Off,
}

/// Settings of one evaluation; task.toml gives the defaults, these override them.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Seeds every input draw (docs/protocol.md, "Seeds and inputs"), so an evaluation can be
    /// reproduced from its recorded [`Provenance::seed`]; it is never passed to the candidate.
    pub seed: u64,
    /// Correctness trials per workload, each on a fresh draw of inputs; `None`: task.toml's
    /// `[evaluation].trials`. At least 1 is run.
    pub trials: Option<u32>,
    /// Wall-clock limit of the whole harness process (start-up, compile, every workload); at it
    /// the process group is killed and the evaluation is a `timeout`. `None`: task.toml's
    /// `timeout_s`. The compile step gets at most 30 s of it (120 s for backend cuda's nvcc).
    pub timeout: Option<Duration>,
    /// Address-space limit of the evaluation process, in bytes. CPU backends only: CUDA
    /// reserves far more virtual address space than it uses, so GPU evaluations run without one.
    pub memory_bytes: Option<u64>,
    /// Stop at the first workload that does not pass (the search wants this; a report does not).
    pub fail_fast: bool,
    /// Run the correctness phase under `compute-sanitizer --tool memcheck` (GPU backends):
    /// errors it reports fail the workload as a runtime_error; nothing is timed.
    pub sanitize: bool,
    /// The device of GPU backends: `cuda`, `cuda:N`, or `cpu` for the python backend;
    /// `None` is `cuda:0` (and `cpu` for the c backend).
    pub device: Option<String>,
    /// nvcc's `-arch` for the cuda backend; `None`: read from the device (sm_90a on Hopper).
    pub arch: Option<String>,
    /// Whether GPU timings replay CUDA graphs (cuda, triton and python backends; MLX and the c
    /// backend ignore it).
    pub cuda_graph: CudaGraph,
    /// Where the cuda backend caches builds; `None` disables the cache.
    pub build_cache: Option<PathBuf>,
    /// A bytecode cache for the harness's interpreter (`KSEARCH_BYTECODE_CACHE`), used only when
    /// torch (else NumPy) has no compiled bytecode beside its sources (a read-only or pip
    /// `--no-compile` install): then every fresh process compiles torch from source again, about
    /// 3 s of each evaluation's start on the H200 machine. Written only by the warm server,
    /// which runs no candidate or harness code (warm.rs, bytecode.py). `None`: not used.
    pub bytecode_cache: Option<PathBuf>,
    /// The solution is the task author's own (a `[[baselines]]` entry of task.toml): the static
    /// checks, which exist to stop candidates from calling the framework's op, are skipped.
    /// Everything else (supervision, checks against the reference, timing) is the same.
    pub trusted: bool,
    /// Extra environment of the harness process, e.g. `CUDA_VISIBLE_DEVICES=<uuid>` from a
    /// device lease, so an evaluation sees its GPU alone (as `cuda:0`) and nothing it runs can
    /// create a context on another GPU and disturb the timings there.
    pub env: Vec<(String, String)>,
    /// Compile only (harness mode `build`): no device is opened, no reference or candidate code
    /// runs, nothing is timed; the record has the compile report (for backend cuda: ptxas's
    /// resources and the import check) and no workloads. A cuda build needs `arch`.
    pub build_only: bool,
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
            sanitize: false,
            device: None,
            arch: None,
            cuda_graph: CudaGraph::Auto,
            build_cache: Some(harness::cache_dir().join("cuda-build")),
            bytecode_cache: Some(harness::cache_dir().join("python-bytecode")),
            env: Vec::new(),
            build_only: false,
            trusted: false,
        }
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
    let backend = backend_for(solution.spec.language, opts.device.as_deref())?;
    // A build has no workloads: the record then holds the compile report alone.
    let unbuilt;
    let task = if opts.build_only {
        if opts.sanitize {
            return Err(EvalError::Options(
                "sanitize: a build-only evaluation runs no kernel for compute-sanitizer to check".into(),
            ));
        }
        if backend.rules().build_needs_arch() && opts.arch.is_none() {
            return Err(EvalError::Options(
                "a build-only evaluation of a CUDA kernel needs the GPU architecture to compile for (--arch, e.g. sm_90a): there is no device to read it from".into(),
            ));
        }
        unbuilt = Task {
            workloads: Vec::new(),
            ..task.clone()
        };
        &unbuilt
    } else {
        task
    };
    let cfg = &task.config.evaluation;
    let trials = opts.trials.unwrap_or(cfg.trials).max(1);
    // task.toml bounds timeout_s (spec validation), so the conversion cannot fail there.
    let timeout = opts
        .timeout
        .unwrap_or(Duration::try_from_secs_f64(cfg.timeout_s).unwrap_or(Duration::from_secs(60)));
    let provenance = Provenance {
        device: backend.device.clone(),
        backend: backend.name.to_string(),
        seed: opts.seed,
        harness_version: None,
        environment: serde_json::Value::Null,
        trials,
    };
    let assembler = assemble::Assembler::new(task, solution, provenance, timeout, !opts.sanitize);

    // A trusted solution skips the checks (see EvalOptions::trusted).
    let rejection = (!opts.trusted)
        .then(|| check_sources(solution.spec.language, &solution.sources, &task.config))
        .flatten();
    if let Some(rejection) = rejection {
        return Ok(assembler.rejected(&rejection));
    }
    let sanitizer = match opts.sanitize {
        false => None,
        // MLX compiles its kernels itself (NVRTC) inside its own runtime, out of the sanitizer's
        // reach from here.
        true if !backend.on_gpu() || !backend.rules().sanitizable() => {
            return Err(EvalError::Options(format!(
                "sanitize: compute-sanitizer checks CUDA kernels launched by the cuda, triton and python backends; backend {} on {} has none",
                backend.name, backend.device
            )))
        }
        true => Some(sanitizer::find().ok_or_else(|| {
            EvalError::Setup(
                "sanitize: compute-sanitizer not found; set KSEARCH_COMPUTE_SANITIZER or CUDA_HOME, or put it on PATH"
                    .to_string(),
            )
        })?),
    };

    let mut request = request::build_request(task, solution, &backend, trials, timeout, opts);
    if opts.build_only {
        request["mode"] = serde_json::json!("build");
    }
    // A fresh key per evaluation: the harness authenticates every line with it (auth.rs), so
    // nothing else that reaches the stream can make a line this side accepts.
    let key = auth::new_key().map_err(|e| EvalError::Setup(format!("cannot draw a protocol key: {e}")))?;
    request["auth"] = serde_json::json!({"key": auth::hex(&key)});
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
        // CUDA reserves tens of GiB of virtual address space at initialisation (the unified
        // address space, the caching allocator's pools), so RLIMIT_AS would fail every GPU
        // evaluation at start. What still bounds a GPU evaluation: the wall-clock timeout, the
        // CPU-time limit, the file-size limit, the group kill, and the device's own memory (an
        // oversized cudaMalloc fails in the candidate, a runtime_error).
        memory_bytes: if backend.on_gpu() { None } else { opts.memory_bytes },
        ..supervisor::Limits::default()
    };
    // Candidates of OpenMP tasks get every core; otherwise OpenMP (in the reference's libraries)
    // is held to one thread like BLAS.
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .to_string();
    let omp_threads: &str = if task.config.kernel.openmp { &cores } else { "1" };
    let run = |python: &std::path::Path| -> Result<(supervisor::Outcome, Option<Result<String, String>>), EvalError> {
        let workdir = tempfile::Builder::new()
            .prefix("ksearch-eval-")
            .tempdir()
            .map_err(|e| EvalError::Setup(format!("cannot create a private temp dir: {e}")))?;
        let root = harness::install_harness(workdir.path())?;
        let mut env = vec![
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
            // OpenMP's idle threads sleep at once instead of spinning after a parallel region
            // (libgomp spins for a while by default): spinning would take cores from the
            // reference, timed right after the candidate, and inflate the candidate's speedup.
            // The candidate pays its own wake-up cost at its next region.
            ("OMP_WAIT_POLICY", std::ffi::OsStr::new("passive")),
        ];
        if let Some(dir) = &opts.bytecode_cache {
            env.push(("KSEARCH_BYTECODE_CACHE", dir.as_os_str()));
        }
        for (key, value) in &opts.env {
            env.push((key.as_str(), std::ffi::OsStr::new(value.as_str())));
        }
        let (program, args): (PathBuf, Vec<std::ffi::OsString>) = match &sanitizer {
            Some(tool) => {
                // One cudaMalloc per tensor, so memcheck knows every tensor's bounds (PyTorch's
                // caching allocator would hand out slices of larger blocks).
                env.push(("PYTORCH_NO_CUDA_MEMORY_CACHING", std::ffi::OsStr::new("1")));
                (tool.clone(), sanitizer::arguments(python, request::SANITIZER_LOG))
            }
            None => (python.to_path_buf(), vec!["-m".into(), "ksearch_harness".into()]),
        };
        let fresh = |note: Option<warm::WarmError>| {
            let mut outcome = supervisor::run(
                &program,
                &args,
                workdir.path(),
                &env,
                request.to_string().into_bytes(),
                &limits,
            )
            .map_err(|e| {
                let what = format!("cannot start the harness with {}: {e}", program.display());
                if std::env::var_os("KSEARCH_PYTHON").is_some_and(|p| std::path::Path::new(&p) == program.as_path()) {
                    EvalError::Interpreter(format!("KSEARCH_PYTHON: {what}"))
                } else {
                    EvalError::Setup(what)
                }
            })?;
            if let Some(why) = note {
                outcome.log = format!(
                    "ksearch: {why}; this evaluation ran in a fresh process\n{}",
                    outcome.log
                );
            }
            Ok::<_, EvalError>(outcome)
        };
        // The sanitizer wraps the interpreter in its own program: always a fresh process.
        let cold = warm::mode(&backend).filter(|_| sanitizer.is_none());
        let outcome = match cold {
            Some(cold) => match warm::run(
                warm::Wanted {
                    python,
                    modules: warm::preload(&backend),
                    cold,
                },
                &env,
                workdir.path(),
                &root,
                request.to_string().into_bytes(),
                &limits,
            ) {
                Ok(outcome) => outcome,
                Err(why) => fresh(Some(why))?,
            },
            None => fresh(None)?,
        };
        // A missing or unreadable log is not an empty one: gpu_checks::sanitizer_verdict
        // refuses to pass an evaluation whose sanitizer left no summary.
        let log = sanitizer.as_ref().map(|_| {
            let path = workdir.path().join(request::SANITIZER_LOG);
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        });
        Ok((outcome, log))
    };
    let run_verified = |python: &std::path::Path| -> Result<_, EvalError> {
        let (mut outcome, log) = run(python)?;
        let verified = auth::verify(&key, std::mem::take(&mut outcome.lines));
        outcome.lines = verified.lines;
        let unauthenticated = assemble::Unauthenticated {
            lines: verified.unauthenticated,
            authenticated: verified.authenticated,
        };
        Ok((outcome, log, unauthenticated))
    };
    let (mut outcome, mut sanitizer_log, mut unauthenticated) = run_verified(&harness::python())?;
    if record::missing_module(&outcome.lines).as_deref() == Some("numpy") {
        // Set up an interpreter with NumPy (once; it is reused afterwards) and try again. Other
        // missing modules (torch) are the user's to install: the harness's message says how.
        (outcome, sanitizer_log, unauthenticated) = run_verified(&harness::python_with_numpy(notify)?)?;
    }
    let evaluation = assembler.finish(outcome, unauthenticated)?;
    Ok(match sanitizer_log {
        Some(log) => gpu_checks::sanitizer_verdict(evaluation, log.as_deref().map_err(Clone::clone)),
        None => evaluation,
    })
}
