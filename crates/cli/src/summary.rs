//! The evaluation as the search sees it: status, speedup, noise, per-workload figures, the
//! end of the log.

use ksearch_eval::{Evaluation, Status};
use ksearch_search::engine::{EvalSummary, WorkloadSummary};

const LOG_LINES: usize = 30;

pub(crate) fn summarize(e: &Evaluation) -> EvalSummary {
    let noise = e
        .workloads
        .iter()
        .filter_map(|w| w.timing.as_ref())
        .filter(|t| t.candidate.median_ns > 0.0)
        .map(|t| t.candidate.iqr_ns / t.candidate.median_ns)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let suspicious = e
        .workloads
        .iter()
        .find_map(|w| w.timing.as_ref().and_then(|t| t.suspicious.clone()));
    let log = match (&e.compile, e.status) {
        (Some(c), Status::CompileError) => c.log.clone(),
        _ => e.log.clone(),
    };
    EvalSummary {
        status: e.status.to_string(),
        reason: e.reason.clone(),
        speedup: e.speedup,
        relative_noise: noise,
        workloads: e
            .workloads
            .iter()
            .map(|w| WorkloadSummary {
                uuid: w.uuid.clone(),
                status: w.status.to_string(),
                speedup: w.timing.as_ref().map(|t| t.speedup),
                median_ns: w.timing.as_ref().map(|t| t.candidate.median_ns),
                iqr_ns: w.timing.as_ref().map(|t| t.candidate.iqr_ns),
                reference_median_ns: w.timing.as_ref().map(|t| t.reference.median_ns),
            })
            .collect(),
        log_tail: tail(&log, LOG_LINES),
        suspicious,
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
