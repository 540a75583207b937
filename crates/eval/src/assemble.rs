//! Turns what the harness process said and how it ended into an [`Evaluation`]. Everything
//! the harness wrote is treated as untrusted: malformed lines, impossible indices and missing
//! samples become `harness_error`s, and a process that died says where it died.

use crate::record::{CompileReport, Evaluation, Event, Provenance, Timing, WorkloadEvent, WorkloadResult};
use crate::static_check::Rejection;
use crate::stats::{geometric_mean, SampleStats};
use crate::status::Status;
use crate::supervisor::{Exit, Outcome};
use crate::{gpu_checks, roofline, worker_clock, EvalError};
use indexmap::IndexMap;
use ksearch_spec::{eval_formula, Problem, Solution, Task};
use std::time::Duration;

/// Stages during which candidate code runs (loading runs its constructors): a death there is
/// the candidate's, not the harness's.
const CANDIDATE_STAGES: [&str; 3] = ["load", "correctness", "timing"];

pub(crate) struct Assembler<'a> {
    task: &'a Task,
    solution: &'a Solution,
    provenance: Provenance,
    timeout: Duration,
    /// False under compute-sanitizer, where nothing is timed.
    timing_required: bool,
    workloads: Vec<WorkloadResult>,
    stage_seconds: IndexMap<String, f64>,
}

/// Protocol lines that failed authentication (auth.rs), and how many passed it.
pub(crate) struct Unauthenticated {
    pub lines: Vec<String>,
    pub authenticated: usize,
}

struct Progress {
    stage: String,
    workload: Option<usize>,
    trial: Option<u32>,
}

impl<'a> Assembler<'a> {
    pub(crate) fn new(
        task: &'a Task,
        solution: &'a Solution,
        provenance: Provenance,
        timeout: Duration,
        timing_required: bool,
    ) -> Self {
        let workloads = task
            .workloads
            .iter()
            .map(|w| WorkloadResult {
                uuid: w.uuid.clone(),
                axes: w.all_axes(&task.definition),
                status: Status::NotRun,
                reason: None,
                correctness: None,
                timing: None,
            })
            .collect();
        Assembler {
            task,
            solution,
            provenance,
            timeout,
            timing_required,
            workloads,
            stage_seconds: IndexMap::new(),
        }
    }

    fn evaluation(
        self,
        status: Status,
        reason: Option<String>,
        compile: Option<CompileReport>,
        wall: f64,
        log: String,
    ) -> Evaluation {
        let speedup = if status == Status::Passed {
            let speedups: Vec<f64> = self
                .workloads
                .iter()
                .filter_map(|w| w.timing.as_ref().map(|t| t.speedup))
                .collect();
            geometric_mean(&speedups)
        } else {
            None
        };
        Evaluation {
            task: self.task.definition.name.clone(),
            solution: self.solution.name.clone(),
            status,
            reason,
            speedup,
            workloads: self.workloads,
            compile,
            provenance: self.provenance,
            wall_seconds: wall,
            stage_seconds: self.stage_seconds,
            log,
            profile: None,
        }
    }

    pub(crate) fn rejected(self, r: &Rejection) -> Evaluation {
        let reason = format!("static check: {r}");
        self.evaluation(Status::Rejected, Some(reason), None, 0.0, String::new())
    }

    pub(crate) fn finish(
        mut self,
        outcome: Outcome,
        unauthenticated: Unauthenticated,
    ) -> Result<Evaluation, EvalError> {
        let mut compile: Option<CompileReport> = None;
        let mut progress: Option<Progress> = None;
        // Whether candidate code may have run: the stage of some progress line was its.
        let mut candidate_ran = false;
        let mut harness_error: Option<String> = None;
        let mut protocol_errors: Vec<String> = Vec::new();
        let mut done = false;
        for line in &outcome.lines {
            if done {
                protocol_errors.push("the harness wrote lines after `done`".to_string());
                break;
            }
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    protocol_errors.push(e.clone());
                    continue;
                }
            };
            let event: Event = match serde_json::from_str(line) {
                Ok(e) => e,
                Err(e) => {
                    let shown: String = line.chars().take(120).collect();
                    protocol_errors.push(format!("unreadable protocol line ({e}): {shown}"));
                    continue;
                }
            };
            match event {
                Event::Progress { stage, workload, trial } => {
                    candidate_ran |= CANDIDATE_STAGES.contains(&stage.as_str());
                    progress = Some(Progress { stage, workload, trial })
                }
                Event::Compile {
                    ok,
                    seconds,
                    command,
                    log,
                    resources,
                    cached,
                    arch,
                    refused,
                    import_check,
                } => {
                    compile = Some(CompileReport {
                        ok,
                        seconds,
                        command,
                        log,
                        resources,
                        cached,
                        arch,
                        refused,
                        import_check,
                    })
                }
                Event::Workload(w) => {
                    if let Err(e) = self.take_workload(*w) {
                        protocol_errors.push(e);
                    }
                }
                Event::TaskError { field, message } => {
                    let field = if field.is_empty() {
                        "reference".to_string()
                    } else {
                        field
                    };
                    // `workloads[N].…` is about line N+1 of workloads.jsonl, not the definition.
                    let workload_line = field
                        .strip_prefix("workloads[")
                        .and_then(|rest| rest.split_once(']'))
                        .and_then(|(n, rest)| n.parse::<usize>().ok().map(|n| (n, rest.trim_start_matches('.'))));
                    let (file, field) = match workload_line {
                        Some((n, rest)) => (
                            format!("{}:{}", self.task.file("workloads.jsonl"), n + 1),
                            if rest.is_empty() {
                                "workload".to_string()
                            } else {
                                rest.to_string()
                            },
                        ),
                        None => (self.task.file("definition.json"), field),
                    };
                    return Err(EvalError::Task(Problem::new(file, field, message)));
                }
                Event::HarnessError { message, .. } => harness_error = Some(message),
                Event::Done {
                    environment,
                    harness_version,
                    stages,
                } => {
                    self.stage_seconds = stages.into_iter().filter(|(_, v)| v.is_finite() && *v >= 0.0).collect();
                    self.provenance.environment = environment;
                    self.provenance.harness_version = Some(harness_version);
                    done = true;
                }
            }
        }
        protocol_errors.extend(self.check_timings(done));
        let wall = outcome.elapsed.as_secs_f64();
        let log = outcome.log;

        // Lines the harness did not write void the whole record, whatever it says.
        if let Some(first) = unauthenticated.lines.first() {
            let n = unauthenticated.lines.len();
            let (status, reason) = if unauthenticated.authenticated == 0 {
                (
                    Status::HarnessError,
                    format!("the harness wrote no authenticated protocol line ({n} line(s) without a valid code; is KSEARCH_HARNESS_DIR an older harness?); first: {first}"),
                )
            } else {
                let status = if candidate_ran {
                    Status::RuntimeError
                } else {
                    Status::HarnessError
                };
                (
                    status,
                    format!("the protocol stream carried {n} line(s) that fail authentication (not written by the harness, or out of order): something in the evaluation{} tried to forge the harness's record, so none of it is believed; first: {first}", if candidate_ran { ", most likely the candidate," } else { "" }),
                )
            };
            for w in &mut self.workloads {
                w.status = Status::NotRun;
                w.reason = None;
                w.correctness = None;
                w.timing = None;
            }
            return Ok(self.evaluation(status, Some(reason), compile, wall, log));
        }

        if let Some(c) = compile.as_ref().filter(|c| !c.ok) {
            let (status, reason) = match &c.refused {
                Some(why) => (Status::Rejected, format!("refused after compiling: {why}")),
                None => (
                    Status::CompileError,
                    format!("compilation failed:\n{}", c.log.trim_end()),
                ),
            };
            for w in &mut self.workloads {
                w.status = status;
            }
            return Ok(self.evaluation(status, Some(reason), compile, wall, log));
        }

        let where_ = progress.as_ref().map(|p| self.describe(p));
        let candidate_running = progress
            .as_ref()
            .is_some_and(|p| CANDIDATE_STAGES.contains(&p.stage.as_str()));
        let died = match &outcome.exit {
            Exit::TimedOut => Some((
                Status::Timeout,
                format!(
                    "the evaluation exceeded its {:.0} s limit{}; the process group was killed",
                    self.timeout.as_secs_f64(),
                    where_.as_deref().map(|w| format!(" during {w}")).unwrap_or_default()
                ),
            )),
            Exit::Signal(sig) if !done => {
                let name = match (*sig, outcome.oom_kills) {
                    (libc::SIGKILL, Some(0)) if candidate_running => {
                        "SIGKILL, not from the out-of-memory killer: most likely the candidate's own code, which runs in \
                         this process"
                    }
                    (libc::SIGKILL, Some(0)) => "SIGKILL, not from the out-of-memory killer",
                    (libc::SIGKILL, Some(_)) => "SIGKILL from the out-of-memory killer",
                    _ => signal_name(*sig),
                };
                if *sig == libc::SIGXCPU {
                    Some((
                        Status::Timeout,
                        format!("the evaluation used up its CPU-time limit ({name}){}", at(&where_)),
                    ))
                } else if candidate_running {
                    Some((
                        Status::RuntimeError,
                        format!("the process was killed by signal {sig} ({name}){}", at(&where_)),
                    ))
                } else {
                    Some((
                        Status::HarnessError,
                        format!("the harness was killed by signal {sig} ({name}){}", at(&where_)),
                    ))
                }
            }
            Exit::Code(code) if !done => {
                let status = if candidate_running {
                    Status::RuntimeError
                } else {
                    Status::HarnessError
                };
                Some((
                    status,
                    format!(
                        "the process exited with code {code} before finishing{}{}",
                        at(&where_),
                        log_hint(&log)
                    ),
                ))
            }
            _ => None,
        };
        if let Some((status, reason)) = died {
            if let Some(i) = progress
                .as_ref()
                .and_then(|p| p.workload)
                .filter(|i| *i < self.workloads.len())
            {
                if self.workloads[i].status == Status::NotRun {
                    self.workloads[i].status = status;
                    self.workloads[i].reason = Some(reason.clone());
                }
            }
            return Ok(self.evaluation(status, Some(reason), compile, wall, log));
        }
        if let Some(message) = harness_error {
            return Ok(self.evaluation(
                Status::HarnessError,
                Some(format!("harness error: {message}")),
                compile,
                wall,
                log,
            ));
        }
        if let Some(first) = protocol_errors.first() {
            let reason = format!(
                "the harness broke the protocol ({} problem(s)); first: {first}",
                protocol_errors.len()
            );
            return Ok(self.evaluation(Status::HarnessError, Some(reason), compile, wall, log));
        }
        let failed = self
            .workloads
            .iter()
            .enumerate()
            .find(|(_, w)| w.status != Status::Passed && w.status != Status::NotRun);
        let (status, reason) = match failed {
            Some((i, w)) => (
                w.status,
                Some(format!(
                    "workload {} ({}): {}",
                    i,
                    w.uuid,
                    w.reason.clone().unwrap_or_else(|| w.status.to_string())
                )),
            ),
            None if self.workloads.iter().any(|w| w.status == Status::NotRun) => (
                Status::HarnessError,
                Some("the harness finished without reporting every workload".to_string()),
            ),
            None => (Status::Passed, None),
        };
        Ok(self.evaluation(status, reason, compile, wall, log))
    }

    /// The checks of timed workloads that need `done` (read once every line is): the worker
    /// clock's cross-check, required where `done.environment.sandbox.worker` says the candidate
    /// ran in the worker (its clock is then in the candidate's process), and the roofline bound
    /// of the device `done` names (roofline.rs). A roofline flag comes first, then the host
    /// clock's (set by `take_workload`), then the worker clock's. Returns protocol errors.
    fn check_timings(&mut self, done: bool) -> Vec<String> {
        let mut errors = Vec::new();
        let worker = self
            .provenance
            .environment
            .pointer("/sandbox/worker")
            .and_then(|v| v.as_bool());
        let timed = self.workloads.iter().any(|w| w.timing.is_some());
        // Backend c runs its candidate in the worker where the platform allows it; only the
        // harness knows whether it did.
        let in_worker = ksearch_spec::Language::of_backend(&self.provenance.backend)
            .is_some_and(|l| crate::backend::of(l).runs_in_worker());
        if done && timed && worker.is_none() && in_worker {
            errors.push(
                "the harness's `done` does not say whether the candidate ran in the worker \
                 (environment.sandbox.worker), so its times cannot be matched with the worker clock's \
                 cross-check"
                    .to_string(),
            );
        }
        let bound = roofline::bound_for(&self.provenance.device, &self.provenance.environment);
        for (i, w) in self.workloads.iter_mut().enumerate() {
            let Some(t) = w.timing.as_mut() else { continue };
            let (outer, pings) = (nonempty(&t.worker_outer_ns), nonempty(&t.worker_ping_ns));
            if worker == Some(true) && (t.worker_outer_ns.is_empty() || t.worker_ping_ns.is_empty()) {
                errors.push(format!(
                    "workload {i} was timed by the worker's clock (the candidate ran in the worker) without \
                     the harness's round trips of its cross-check (worker_outer_ns, worker_ping_ns), so a \
                     forged clock cannot be ruled out"
                ));
                continue;
            }
            if !t.worker_outer_ns.is_empty() && t.worker_outer_ns.len() != t.candidate_ns.len() {
                errors.push(format!(
                    "workload {i} has {} worker-clock samples but {} round trips (worker_outer_ns): one per \
                     timed call",
                    t.candidate_ns.len(),
                    t.worker_outer_ns.len()
                ));
                continue;
            }
            let any_worker = !t.worker_outer_ns.is_empty() || !t.worker_ping_ns.is_empty();
            if any_worker && (outer.is_none() || pings.is_none()) {
                errors.push(format!("workload {i} has invalid worker round-trip samples"));
                continue;
            }
            let forged = worker_clock::forged_clock(&t.candidate, outer.as_ref(), pings.as_ref());
            let bytes = t.achieved_gb_per_s.map(|g| g * 1e9);
            let flops = t.achieved_gflop_per_s.map(|g| g * 1e9);
            t.suspicious = bound.check(bytes, flops).or(t.suspicious.take()).or(forged);
        }
        errors
    }

    fn describe(&self, p: &Progress) -> String {
        let mut s = p.stage.clone();
        if let Some(i) = p.workload {
            match self.workloads.get(i) {
                Some(w) => s.push_str(&format!(" of workload {i} ({})", w.uuid)),
                None => s.push_str(&format!(" of workload {i}")),
            }
        }
        if let Some(t) = p.trial {
            s.push_str(&format!(", trial {t}"));
        }
        s
    }

    fn take_workload(&mut self, w: WorkloadEvent) -> Result<(), String> {
        let n = self.workloads.len();
        let slot = self
            .workloads
            .get_mut(w.index)
            .ok_or_else(|| format!("workload index {} out of range (0..{n})", w.index))?;
        if slot.status != Status::NotRun {
            return Err(format!("workload {} was reported twice", w.index));
        }
        if slot.uuid != w.uuid {
            return Err(format!(
                "workload {} reported as '{}' but it is '{}'",
                w.index, w.uuid, slot.uuid
            ));
        }
        let status =
            Status::from_harness(&w.status).ok_or_else(|| format!("unknown workload status '{}'", w.status))?;
        slot.reason = w.reason;
        slot.correctness = w.correctness;
        if status == Status::Passed && (self.timing_required || w.timing.is_some()) {
            let raw = w
                .timing
                .ok_or_else(|| format!("workload {} passed without timing samples", w.index))?;
            let (Some(cand), Some(refr)) = (SampleStats::of(&raw.candidate_ns), SampleStats::of(&raw.reference_ns))
            else {
                return Err(format!("workload {} has empty or invalid timing samples", w.index));
            };
            if cand.median_ns <= 0.0 {
                return Err(format!("workload {} has a zero candidate median", w.index));
            }
            let w_def = &self.task.workloads[w.index];
            let axes = w_def.all_axes(&self.task.definition);
            let seconds = cand.median_ns * 1e-9;
            let roof = self.task.config.roofline.as_ref();
            let rate = |expr: Option<&String>| expr.and_then(|e| eval_formula(e, &axes).ok()).map(|v| v / seconds);
            let bytes_per_s = rate(roof.and_then(|r| r.bytes.as_ref()));
            let flops_per_s = rate(roof.and_then(|r| r.flops.as_ref()));
            // A CUDA device is timed by CUDA events, and CUDA events are cross-checked by the host
            // clock: a record without the host samples would skip the check for work on another
            // stream or thread, so it is refused, not passed unchecked.
            let on_cuda = self.provenance.device == "cuda" || self.provenance.device.starts_with("cuda:");
            if on_cuda && raw.clock != CUDA_EVENT {
                return Err(format!(
                    "workload {} on {} was timed by clock '{}', not by CUDA events ({CUDA_EVENT})",
                    w.index, self.provenance.device, raw.clock
                ));
            }
            if raw.clock == CUDA_EVENT {
                if raw.candidate_host_ns.is_empty() || raw.reference_host_ns.is_empty() {
                    return Err(format!(
                        "workload {} was timed by CUDA events without the host-clock samples of its \
                         cross-check (candidate_host_ns, reference_host_ns), so work the events do not \
                         see cannot be ruled out",
                        w.index
                    ));
                }
                if raw.candidate_host_ns.len() != raw.candidate_ns.len()
                    || raw.reference_host_ns.len() != raw.reference_ns.len()
                {
                    return Err(format!(
                        "workload {} has {} and {} CUDA-event samples but {} and {} host-clock samples \
                         (candidate, reference): one of each per timed call",
                        w.index,
                        raw.candidate_ns.len(),
                        raw.reference_ns.len(),
                        raw.candidate_host_ns.len(),
                        raw.reference_host_ns.len()
                    ));
                }
            }
            let (cand_host, ref_host) = (nonempty(&raw.candidate_host_ns), nonempty(&raw.reference_host_ns));
            let any_host = !raw.candidate_host_ns.is_empty() || !raw.reference_host_ns.is_empty();
            if any_host && (cand_host.is_none() || ref_host.is_none()) {
                return Err(format!("workload {} has invalid host-clock samples", w.index));
            }
            // The worker clock's cross-check and the roofline bound come later (`check_timings`):
            // whether the candidate ran in the worker, and the device's name, are in `done`.
            let suspicious = gpu_checks::hidden_work(&cand, &refr, cand_host.as_ref(), ref_host.as_ref())
                .or_else(|| gpu_checks::work_after_the_call(&raw));
            slot.timing = Some(Timing {
                clock: raw.clock,
                speedup: refr.median_ns / cand.median_ns,
                candidate: cand,
                reference: refr,
                achieved_gb_per_s: bytes_per_s.map(|b| b / 1e9),
                achieved_gflop_per_s: flops_per_s.map(|f| f / 1e9),
                suspicious,
                candidate_ns: raw.candidate_ns,
                reference_ns: raw.reference_ns,
                candidate_host: cand_host,
                reference_host: ref_host,
                candidate_host_ns: raw.candidate_host_ns,
                reference_host_ns: raw.reference_host_ns,
                candidate_enqueue_ns: raw.candidate_enqueue_ns,
                reference_enqueue_ns: raw.reference_enqueue_ns,
                cuda_graph: raw.cuda_graph,
                cuda_graph_note: raw.cuda_graph_note,
                gate: raw.gate,
                event_overhead_ns: raw.event_overhead_ns,
                worker_outer_ns: raw.worker_outer_ns,
                worker_ping_ns: raw.worker_ping_ns,
            });
        }
        slot.status = status;
        Ok(())
    }
}

/// The primary clock of the GPU backends (docs/protocol.md, "Timing on a GPU").
const CUDA_EVENT: &str = "cuda_event";

/// Statistics of a list of samples that may be absent (empty); `None` also for invalid ones.
fn nonempty(samples: &[f64]) -> Option<SampleStats> {
    if samples.is_empty() {
        None
    } else {
        SampleStats::of(samples)
    }
}

fn at(where_: &Option<String>) -> String {
    where_.as_deref().map(|w| format!(" during {w}")).unwrap_or_default()
}

fn log_hint(log: &str) -> String {
    match log.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(last) => format!("; last log line: {}", last.trim()),
        None => String::new(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV, invalid memory access",
        libc::SIGBUS => "SIGBUS, misaligned or unmapped memory",
        libc::SIGFPE => "SIGFPE, arithmetic fault",
        libc::SIGILL => "SIGILL, illegal instruction",
        libc::SIGABRT => "SIGABRT, aborted",
        libc::SIGKILL => "SIGKILL, possibly out of memory",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ, file size limit",
        _ => "signal",
    }
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
