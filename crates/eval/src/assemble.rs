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
                    return Err(EvalError::Task(Problem::new(
                        self.task.file("definition.json"),
                        field,
                        message,
                    )));
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
        self.roofline_flags();
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
                let name = signal_name(*sig);
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

    /// Flags timed workloads faster than the device allows (roofline.rs). Run once every line is
    /// read: the device's name comes with `done`, after the workloads. A roofline flag comes
    /// first; the clocks' cross-checks (set by `take_workload`) follow only without one.
    fn roofline_flags(&mut self) {
        let bound = roofline::bound_for(&self.provenance.device, &self.provenance.environment);
        for w in &mut self.workloads {
            if let Some(t) = w.timing.as_mut() {
                let bytes = t.achieved_gb_per_s.map(|g| g * 1e9);
                let flops = t.achieved_gflop_per_s.map(|g| g * 1e9);
                if let Some(why) = bound.check(bytes, flops) {
                    t.suspicious = Some(why);
                }
            }
        }
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
            let host = |samples: &[f64]| {
                if samples.is_empty() {
                    None
                } else {
                    SampleStats::of(samples)
                }
            };
            let (cand_host, ref_host) = (host(&raw.candidate_host_ns), host(&raw.reference_host_ns));
            if !raw.candidate_host_ns.is_empty() && (cand_host.is_none() || ref_host.is_none()) {
                return Err(format!("workload {} has invalid host-clock samples", w.index));
            }
            // The roofline bound comes later (`roofline_flags`): the device's name is in `done`.
            let suspicious = gpu_checks::hidden_work(&cand, &refr, cand_host.as_ref(), ref_host.as_ref());
            let outer = host(&raw.worker_outer_ns);
            let pings = host(&raw.worker_ping_ns);
            if !raw.worker_outer_ns.is_empty() && (outer.is_none() || pings.is_none()) {
                return Err(format!("workload {} has invalid worker round-trip samples", w.index));
            }
            let suspicious = suspicious.or_else(|| worker_clock::forged_clock(&cand, outer.as_ref(), pings.as_ref()));
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
                cuda_graph: raw.cuda_graph,
                cuda_graph_note: raw.cuda_graph_note,
                worker_outer_ns: raw.worker_outer_ns,
                worker_ping_ns: raw.worker_ping_ns,
            });
        }
        slot.status = status;
        Ok(())
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
