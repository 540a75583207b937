//! The profiling run: the harness under ncu, supervised like an evaluation, and what its lines
//! and ncu's report say.

use super::ncu::ncu_version;
use super::{aggregate, choose_workload, find_ncu, ncu_arguments, parse_ncu_csv, MAX_REPORT_BYTES};
use super::{Launch, Profile, ProfileOptions, ProfileStatus};
use crate::{auth, harness, record, request, supervisor, EvalOptions};
use ksearch_spec::{Solution, Task};
use std::path::Path;
use std::time::{Duration, Instant};

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

pub(super) enum Failure {
    /// ncu would not collect a named metric (another chip, another version).
    MetricsRefused(String),
    Other(String),
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
pub(super) fn read_outcome(
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
