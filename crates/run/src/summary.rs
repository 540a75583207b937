//! The evaluation as the search sees it: status, speedup, noise, per-workload figures, the
//! end of the log, the compiler's resources per kernel.

use ksearch_eval::{Evaluation, Status};
use ksearch_search::engine::{EvalSummary, WorkloadSummary};

const LOG_LINES: usize = 30;

/// The summary of `e` that the engine records and the prompts show: `relative_noise` is the
/// largest IQR/median of the candidate's timings over the workloads, the log is the compiler's
/// on a compile error (else the harness's), cut to its last 30 lines, and only a profile that
/// was taken is kept.
pub fn summarize(e: &Evaluation) -> EvalSummary {
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
        resources: e.compile.as_ref().map(|c| c.resources.clone()).unwrap_or_default(),
        // Only a profile that was taken reaches the prompts; why one was not is in the record.
        profile: e
            .profile
            .as_ref()
            .filter(|p| p.status == ksearch_eval::profile::ProfileStatus::Profiled)
            .map(ksearch_eval::profile::summary),
        harness: e.provenance.harness_version.clone(),
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Evaluation records for tests of this crate and of the CLI.
#[doc(hidden)]
pub mod fixtures {
    use ksearch_eval::Evaluation;
    use serde_json::json;

    /// A passing CUDA evaluation whose build reported `resources` (a JSON array, as the record
    /// has it), or a CPU one (no compile report) for `None`.
    pub fn evaluation(resources: Option<serde_json::Value>) -> Evaluation {
        let compile = resources.map(|r| json!({"ok": true, "seconds": 2.0, "command": [], "log": "", "resources": r}));
        serde_json::from_value(json!({
            "task": "softmax", "solution": "candidate", "status": "passed", "reason": null, "speedup": 1.5,
            "workloads": [], "compile": compile, "wall_seconds": 1.0, "stage_seconds": {}, "log": "",
            "provenance": {"device": "cuda:0", "backend": "cuda", "seed": 1, "harness_version": null,
                           "environment": null, "trials": 3},
        }))
        .expect("a valid evaluation record")
    }

    pub fn softmax_kernel() -> serde_json::Value {
        json!([{"name": "_Z12softmax_rowsPKfPfl", "arch": "sm_90a", "registers": 30, "spill_store_bytes": 8,
                "spill_load_bytes": 4, "stack_frame_bytes": 16, "shared_bytes": 1024, "constant_bytes": null,
                "barriers": 1}])
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{evaluation, softmax_kernel};
    use super::*;

    #[test]
    fn the_compilers_resources_reach_the_summary() {
        let s = summarize(&evaluation(Some(softmax_kernel())));
        assert_eq!(
            s.resources,
            vec![ksearch_search::engine::KernelResources {
                name: "_Z12softmax_rowsPKfPfl".into(),
                arch: "sm_90a".into(),
                registers: 30,
                spill_store_bytes: Some(8),
                spill_load_bytes: Some(4),
                stack_frame_bytes: Some(16),
                shared_bytes: 1024,
                constant_bytes: None,
                barriers: Some(1),
            }]
        );
        // CPU backends have no compile report with resources: nothing, and nothing serialised.
        let cpu = summarize(&evaluation(None));
        assert!(cpu.resources.is_empty());
        assert!(serde_json::to_value(&cpu).unwrap().get("resources").is_none());
    }
}
