//! `ksearch eval TASK [SOLUTION]`: evaluates one solution (the task's seed kernel when none is
//! given) outside any search — compiles it, checks it against the task's reference on every
//! workload and times both (or only builds it, or profiles it too) — and prints a table or the
//! JSON record; FlashInfer-Bench traces with `--fib-traces`.

use crate::format::{duration_ns, error};
use crate::{EXIT_BAD_INPUT, EXIT_FAILED};
use anyhow::Context;
use ksearch_eval::profile::{Profile, ProfileOptions, ProfileStatus};
use ksearch_eval::{evaluate, CudaGraph, EvalError, EvalOptions, Evaluation, Status};
use ksearch_spec::{Language, RunsOn, Solution, Task};
use std::path::PathBuf;
use std::time::Duration;

/// The arguments of `ksearch eval`.
#[derive(clap::Args)]
pub(crate) struct EvalArgs {
    /// A built-in task name (see `ksearch tasks`) or a task folder.
    task: String,
    /// A Solution JSON or a single source file; the task's seed kernel when left out.
    #[arg(conflicts_with = "baseline")]
    solution: Option<PathBuf>,
    /// Evaluate the task's native baseline NAME (a `[[baselines]]` entry of task.toml) instead:
    /// the task author's own code, so the static checks are skipped.
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,
    /// Print one JSON object (status, workloads, raw samples) instead of a table.
    #[arg(long)]
    json: bool,
    /// Correctness trials per workload, each on fresh inputs (default: the task's, usually 3).
    #[arg(long)]
    trials: Option<u32>,
    /// Seed of the input generator (default: a fresh one, printed so the run can be repeated).
    #[arg(long)]
    seed: Option<u64>,
    /// Wall-clock limit of the whole evaluation in seconds (default: the task's, usually 60).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Address-space limit of the evaluation process in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 8192)]
    memory_limit: u64,
    /// Stop at the first workload that does not pass.
    #[arg(long)]
    fail_fast: bool,
    /// GPU backends: run the correctness checks under compute-sanitizer memcheck (nothing is
    /// timed); memory errors it finds fail the workload with its report.
    #[arg(long)]
    sanitize: bool,
    /// GPU backends: time with CUDA graphs `on`, `off`, or `auto` (for calls under ~30 us).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "on", "off"])]
    cuda_graph: String,
    /// The device to run on: `cuda:N` for GPU backends (default cuda:0), `cpu`.
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Backend cuda: nvcc's -arch (e.g. sm_90a, sm_100a; default: the device's).
    #[arg(long, value_name = "ARCH")]
    arch: Option<String>,
    /// Only compile (and for CUDA, check what the kernel imports and report ptxas's registers,
    /// spills and shared memory): no device, no reference, nothing run or timed. Works without
    /// a GPU; CUDA needs --arch.
    #[arg(long, conflicts_with_all = ["sanitize", "baseline"])]
    build_only: bool,
    /// GPU backends: after the evaluation, profile the candidate with Nsight Compute (ncu) on
    /// one workload (the largest, or --profile-workload) and add its metrics to the record as
    /// `profile` (docs/protocol.md, Profiling). Without ncu, the record says so; the evaluation
    /// itself is unaffected.
    #[arg(long, conflicts_with_all = ["sanitize", "build_only"])]
    profile: bool,
    /// The workload (uuid) to profile instead of the largest.
    #[arg(long, value_name = "UUID", requires = "profile")]
    profile_workload: Option<String>,
    /// Candidate calls profiled, after one unwatched warm-up call.
    #[arg(long, value_name = "N", requires = "profile", default_value_t = ksearch_eval::profile::DEFAULT_CALLS,
          value_parser = clap::value_parser!(u32).range(1..=10))]
    profile_calls: u32,
    /// Also append the evaluation to FILE as FlashInfer-Bench traces, one JSON line a workload
    /// (docs/task-format.md, "FlashInfer-Bench datasets and solutions").
    #[arg(long, value_name = "FILE", conflicts_with = "build_only")]
    fib_traces: Option<std::path::PathBuf>,
    /// Evaluate the solution N times in this one process, printing one JSON line each (the
    /// first pays the harness's start-up; the later ones show what a warm server saves:
    /// bench/eval_cost_gpu.sh). Each uses the same seed.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "json",
          conflicts_with_all = ["profile", "build_only"], value_parser = clap::value_parser!(u32).range(1..=50))]
    repeat: u32,
}

/// Evaluates the solution (or only builds or profiles it) and prints the result as a table or
/// JSON; returns the exit status (bad input is 2, a solution that does not pass is 1).
pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<u8> {
    let task = match Task::load(&args.task) {
        Ok(t) => t,
        Err(e) => return bad_input(&e.to_string()),
    };
    let solution = match (&args.solution, &args.baseline) {
        (_, Some(name)) => match task.baseline(name) {
            Ok(s) => s.clone(),
            Err(e) => return bad_input(&e.to_string()),
        },
        (Some(path), None) => match Solution::load(path, &task) {
            Ok(s) => s,
            Err(e) => return bad_input(&e.to_string()),
        },
        (None, None) => {
            let Some(seed) = task.seed.clone() else {
                return bad_input(&format!(
                    "{}: kernel.seed: the task has no seed kernel, so name a SOLUTION to evaluate",
                    task.file("task.toml")
                ));
            };
            if !args.json {
                eprintln!(
                    "No solution given: evaluating the task's seed kernel {}.",
                    task.file(&seed.path)
                );
            }
            match Solution::from_source(&task.file(&seed.path), &seed.path, seed.content, &task) {
                Ok(s) => s,
                Err(e) => return bad_input(&e.to_string()),
            }
        }
    };
    if let Some(t) = args.timeout {
        if !(t > 0.0 && t <= ksearch_spec::MAX_TIMEOUT_S) {
            return bad_input(&format!(
                "--timeout: must be a number of seconds between 0 and {}, got {t}",
                ksearch_spec::MAX_TIMEOUT_S
            ));
        }
    }
    if let Some(uuid) = &args.profile_workload {
        if let Err(e) = ksearch_eval::profile::choose_workload(&task, Some(uuid)) {
            return bad_input(&format!("--profile-workload: {e}"));
        }
    }
    if args.memory_limit < MIN_MEMORY_MIB {
        return bad_input(&format!(
            "--memory-limit: {} MiB is too little to start Python and NumPy; use at least {MIN_MEMORY_MIB}",
            args.memory_limit
        ));
    }
    let mut opts = EvalOptions::new(args.seed.unwrap_or_else(ksearch_run::fresh_seed));
    opts.trials = args.trials;
    opts.timeout = args.timeout.and_then(|t| Duration::try_from_secs_f64(t).ok());
    opts.memory_bytes = Some(args.memory_limit.saturating_mul(1 << 20));
    opts.fail_fast = args.fail_fast;
    opts.sanitize = args.sanitize;
    opts.trusted = args.baseline.is_some();
    opts.device = args.device.clone();
    opts.arch = args.arch.clone();
    opts.build_only = args.build_only;
    opts.cuda_graph = match args.cuda_graph.as_str() {
        "on" => CudaGraph::On,
        "off" => CudaGraph::Off,
        _ => CudaGraph::Auto,
    };
    let notify = |msg: &str| eprintln!("ksearch: {msg}");
    // Held while it evaluates: a run (or another eval) timing on the same device meanwhile
    // would spoil both numbers.
    // (A build times nothing.)
    let _lease = match args.build_only {
        true => None,
        false => lock_device(solution.spec.language, &mut opts, &notify)?,
    };
    // --repeat: the evaluations before the last, one JSON line each (the last is printed below).
    for _ in 1..args.repeat {
        let evaluation = evaluate(&task, &solution, &opts, &notify).context("the evaluation could not run")?;
        println!(
            "{}",
            serde_json::to_value(&evaluation).context("cannot encode the evaluation as JSON")?
        );
    }
    let mut evaluation = match evaluate(&task, &solution, &opts, &notify) {
        Ok(e) => e,
        Err(EvalError::Task(problem)) => {
            return bad_input(&format!(
                "{problem}\n(the task cannot be used as it is; this is for its author to fix)"
            ))
        }
        Err(e @ EvalError::UnsupportedDevice { .. }) => return bad_input(&e.to_string()),
        Err(e) => return Err(e).context("the evaluation could not run"),
    };
    if args.profile {
        let popts = ProfileOptions {
            workload: args.profile_workload.clone(),
            calls: args.profile_calls,
        };
        let profile = profile_of(&evaluation, &task, &solution, &opts, &popts, &notify);
        if profile.status != ProfileStatus::Profiled {
            eprintln!("ksearch: profile: {}", profile.note.as_deref().unwrap_or("none"));
        }
        evaluation.profile = Some(profile);
    }
    if let Some(path) = &args.fib_traces {
        append_traces(path, &task, &solution.name, &evaluation)?;
    }
    if args.json {
        let mut json = serde_json::to_value(&evaluation).context("cannot encode the evaluation as JSON")?;
        if args.build_only {
            json["build_only"] = serde_json::json!(true);
            // Nothing ran, so nothing passed: a script reading `status` must not take a build
            // for a correct kernel.
            if evaluation.passed() {
                json["status"] = serde_json::json!("built");
            }
        }
        println!("{json}");
    } else if args.build_only {
        print_build(&evaluation);
    } else {
        print_table(&evaluation);
    }
    Ok(if evaluation.passed() { 0 } else { EXIT_FAILED })
}

/// The profile of a candidate that passed (the lease on its device still held); a failed one is
/// not profiled.
fn profile_of(
    evaluation: &Evaluation,
    task: &Task,
    solution: &Solution,
    opts: &EvalOptions,
    popts: &ProfileOptions,
    notify: &dyn Fn(&str),
) -> Profile {
    if !evaluation.passed() {
        return Profile::unavailable("not profiled: the candidate did not pass its evaluation");
    }
    ksearch_eval::profile::profile(task, solution, opts, popts, notify)
}

/// What `--build-only` found: built (with the resources) or why not.
fn print_build(e: &Evaluation) {
    let compile = e.compile.as_ref();
    let arch = compile
        .and_then(|c| c.arch.as_deref())
        .map(|a| format!(" for {a}"))
        .unwrap_or_default();
    let seconds = compile.and_then(|c| c.seconds).unwrap_or(e.wall_seconds);
    if e.passed() {
        let cached = if compile.is_some_and(|c| c.cached) {
            " (from the build cache)"
        } else {
            ""
        };
        // MLX compiles a kernel itself at its first call: here the candidate is only checked.
        let mlx = Language::of_backend(&e.provenance.backend) == Some(Language::Mlx);
        let done = if mlx { "checked" } else { "built" };
        println!("{} / {}: {done}{arch} in {seconds:.1} s{cached}", e.task, e.solution);
        if let Some(log) = compile.map(|c| c.log.trim()).filter(|l| mlx && !l.is_empty()) {
            println!("  {}", log.replace('\n', "\n  "));
        }
        let resources = resources_text(e);
        if !resources.is_empty() {
            println!("\n{resources}");
        }
        if compile.and_then(|c| c.import_check.as_deref()) == Some("off") {
            println!("\nwarning: built with KSEARCH_IMPORT_CHECK=off: what the kernel imports was not checked");
        }
        println!("\nnothing was run: evaluate it on a GPU without --build-only");
    } else {
        println!(
            "{} / {}: not built{arch}: {}: {}",
            e.task,
            e.solution,
            e.status,
            e.reason.as_deref().unwrap_or("")
        );
    }
}

/// Appends the evaluation's FlashInfer-Bench traces to `path` (created if absent).
fn append_traces(path: &std::path::Path, task: &Task, solution: &str, evaluation: &Evaluation) -> anyhow::Result<()> {
    use std::io::Write;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (traces, left_out) = crate::fib_trace::traces(task, solution, evaluation, now);
    let mut text = String::new();
    for t in &traces {
        text.push_str(&t.to_string());
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    if left_out > 0 {
        eprintln!(
            "ksearch: --fib-traces: {left_out} workload(s) left out of {}: FlashInfer-Bench has no status for them \
             (not run, or a failure of ksearch's harness rather than of the solution)",
            path.display()
        );
    }
    Ok(())
}

/// The harness needs about this much address space for Python, NumPy and OpenBLAS.
const MIN_MEMORY_MIB: u64 = 512;

fn bad_input(message: &str) -> anyhow::Result<u8> {
    eprintln!("error: {message}");
    Ok(EXIT_BAD_INPUT)
}

fn print_table(e: &Evaluation) {
    let p = &e.provenance;
    println!(
        "{} / {}  ({} on {}, seed {}, {} trial{} per workload)",
        e.task,
        e.solution,
        p.backend,
        p.device,
        p.seed,
        p.trials,
        if p.trials == 1 { "" } else { "s" }
    );
    println!();
    let uuid_w = e.workloads.iter().map(|w| w.uuid.len()).max().unwrap_or(8).max(8);
    println!(
        "  {:<uuid_w$}  {:<19}  {:>8}  {:>8}  {:>22}  {:>22}  {:>8}",
        "workload", "status", "max abs", "max rel", "candidate (IQR)", "reference (IQR)", "speedup"
    );
    for w in &e.workloads {
        let (abs, rel) = w
            .correctness
            .as_ref()
            .map(|c| (c.max_abs_error, c.max_rel_error))
            .unwrap_or((None, None));
        let (cand, refr, speed) = match &w.timing {
            Some(t) => (
                format!(
                    "{} ({})",
                    duration_ns(t.candidate.median_ns),
                    duration_ns(t.candidate.iqr_ns)
                ),
                format!(
                    "{} ({})",
                    duration_ns(t.reference.median_ns),
                    duration_ns(t.reference.iqr_ns)
                ),
                format!("{:.2}x", t.speedup),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "  {:<uuid_w$}  {:<19}  {:>8}  {:>8}  {:>22}  {:>22}  {:>8}",
            w.uuid,
            w.status.as_str(),
            error(abs),
            error(rel),
            cand,
            refr,
            speed
        );
        if let Some(flag) = w.timing.as_ref().and_then(|t| t.suspicious.as_ref()) {
            println!("  {:<uuid_w$}  warning: {flag}", "");
        }
    }
    println!();
    let resources = resources_text(e);
    if !resources.is_empty() {
        println!("{resources}\n");
    }
    if let Some(profile) = &e.profile {
        println!("{}\n", ksearch_eval::profile::summary(profile));
    }
    let total = e.workloads.len();
    let passed = e.workloads.iter().filter(|w| w.status == Status::Passed).count();
    if e.passed() {
        let speedup = e
            .speedup
            .map(|s| format!(", {s:.2}x the reference's speed (geometric mean)"))
            .unwrap_or_default();
        println!(
            "passed: {passed}/{total} workloads{speedup}; evaluated in {:.2} s",
            e.wall_seconds
        );
    } else {
        let reason = e.reason.as_deref().unwrap_or("");
        println!("failed: {} ({passed}/{total} workloads passed): {reason}", e.status);
        if e.status != Status::CompileError && !e.log.trim().is_empty() {
            println!("\nlog of the evaluation process (last lines):");
            for line in tail_lines(&e.log, 15) {
                println!("  {line}");
            }
        }
    }
}

/// The compiler's resources per kernel (CUDA builds), as the planner and coder read them;
/// empty when the build reported none.
fn resources_text(e: &Evaluation) -> String {
    let kernels = e.compile.as_ref().map(|c| c.resources.as_slice()).unwrap_or_default();
    ksearch_search::engine::resource_lines(kernels)
}

fn tail_lines(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// The device this evaluation times on, locked against other ksearch processes as the run
/// driver locks its devices (docs/engine.md), and the evaluation pointed at it as the driver
/// does (a GPU seen alone, as `cuda:0`): the GPU named by `--device` (`cuda`, `cuda:N`; the
/// default for the GPU languages and for MLX off its CPU device), else the CPU (slot 0). Where
/// `nvidia-smi` lists no such GPU (an Apple GPU, no driver tools), CPU slot 0 is locked, as a
/// run falls back to it.
fn lock_device(
    language: Language,
    opts: &mut EvalOptions,
    notify: &dyn Fn(&str),
) -> anyhow::Result<Option<ksearch_devices::Lease>> {
    let device = opts.device.clone();
    let device = device.as_deref();
    // MLX's GPU is CUDA device 0 on Linux (`mlx:gpu`, `mlx`, or no device named).
    let gpu = match (language.default_device(), device) {
        (_, Some(d)) if d.starts_with("cuda") => Some(d),
        (RunsOn::CudaGpu, None) => Some("cuda:0"),
        (RunsOn::MlxGpu, d) if d != Some("mlx:cpu") => Some("cuda:0"),
        _ => None,
    };
    let chosen = match gpu {
        Some(name) => {
            let index: usize = name.strip_prefix("cuda:").and_then(|i| i.parse().ok()).unwrap_or(0);
            match ksearch_devices::discover_gpus() {
                Ok(gpus) if index < gpus.len() => gpus[index].clone(),
                _ => ksearch_devices::cpu_slots(1)[0].clone(),
            }
        }
        None => ksearch_devices::cpu_slots(1)[0].clone(),
    };
    let pool = ksearch_devices::DevicePool::new(vec![chosen])?;
    let lease = pool.lease_locked(&ksearch_devices::DeviceLocks::from_env(), notify)?;
    let (placed, env) = ksearch_run::placement(lease.device(), language);
    if placed.is_some() {
        opts.device = placed;
    }
    opts.env = env;
    Ok(Some(lease))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_run::summary::fixtures::{evaluation, softmax_kernel};

    #[test]
    fn the_compilers_resources_follow_the_table() {
        assert_eq!(
            resources_text(&evaluation(Some(softmax_kernel()))),
            "Compiler resources per kernel (ptxas, sm_90a; static shared memory only, not the dynamic size set at \
             launch):\n\
             - softmax_rows: 30 registers, 1 KiB static shared memory, spills 8 B stored and 4 B loaded per thread, \
             16 B stack frame"
        );
        assert_eq!(resources_text(&evaluation(None)), "");
        assert_eq!(resources_text(&evaluation(Some(serde_json::json!([])))), "");
    }
}
