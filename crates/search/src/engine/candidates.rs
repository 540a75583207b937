//! Candidates as the engine knows them, the noise-aware "better than", and the performance
//! summary the planner and coder read.

use super::compare::{beats_by, CompareRule};
use super::protocol::{EvalSummary, Source};
use super::resources::resource_lines;
use serde::{Deserialize, Serialize};

/// A kernel the engine has: the seed, a coder's answer or a knob sweep's variant, with its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The engine's id, assigned in order from 1 (what the store's candidate rows carry).
    pub id: i64,
    /// The candidate it was derived from; `None` for the seed or a kernel written from scratch.
    pub parent: Option<i64>,
    /// The world-model node it implements (`root` under `refine` and `evolve`, which use no tree).
    pub node_id: String,
    /// The round it was made in.
    pub round: u32,
    /// The cycle it was made in (a cycle works on one node).
    pub cycle: u32,
    /// Its source files.
    pub sources: Vec<Source>,
    /// The measurement the search decides with (None until evaluated): its search evaluation,
    /// or a re-measurement of it that passed with less noise (see `remeasured`).
    pub result: Option<EvalSummary>,
    /// Its re-measurements during the search (`Purpose::Remeasure`), in the order taken: the run's
    /// best measured again because its own noise kept a faster-reading candidate from beating it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remeasured: Vec<EvalSummary>,
    /// Its search evaluation, kept here when a re-measurement replaced it as `result`: what was
    /// recorded for it is never lost from the view, only no longer decided with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<EvalSummary>,
    /// The final re-measurement, for the top candidates.
    pub final_result: Option<EvalSummary>,
    /// What the engine has to say about it, shown in the report and, on the cycle's best, to the
    /// coder's next improve round: for a knob sweep's variant, how it was made (`knob sweep of
    /// candidate 3: BLOCK=64`); for a coder's kernel whose knob annotations are malformed, the
    /// problems found in them (the kernel itself was measured as written). None otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Candidate {
    /// Whether its search evaluation passed (false until evaluated).
    pub fn passed(&self) -> bool {
        self.result.as_ref().is_some_and(|r| r.passed())
    }

    /// Its speedup over the reference as the search decides with it (`result`), if that passed.
    pub fn speedup(&self) -> Option<f64> {
        self.result.as_ref().filter(|r| r.passed()).and_then(|r| r.speedup)
    }

    /// Its passing measurement by harness version `harness` (the one decided with, else a
    /// re-measurement), for comparing with a kernel that version measured: times of different
    /// versions are not compared (docs/engine.md, "Re-measuring a noisy best").
    pub fn measured_by(&self, harness: Option<&str>) -> Option<&EvalSummary> {
        let by = |r: &&EvalSummary| r.passed() && r.harness.as_deref() == harness;
        self.result
            .as_ref()
            .filter(by)
            .or_else(|| self.remeasured.iter().rev().find(by))
    }

    /// Its search evaluation: the one it was measured by in its round, whether or not a
    /// re-measurement has since replaced it as `result`.
    pub fn search_result(&self) -> Option<&EvalSummary> {
        self.superseded.as_ref().or(self.result.as_ref())
    }

    /// The speedup its search evaluation read, if that passed.
    pub fn search_speedup(&self) -> Option<f64> {
        self.search_result().filter(|r| r.passed()).and_then(|r| r.speedup)
    }
}

/// Whether `a` is better than `b` by the legacy rule ([`CompareRule::Speedup`]): both passed,
/// and `a`'s speedup exceeds `b`'s by more than the larger relative IQR of the two (a 3% noise
/// level needs a >3% gain). Anything beats nothing; nothing beats anything. The engine decides
/// with its run's rule ([`super::Engine::beats`]); this is that rule for runs recorded before the
/// paired one.
pub fn beats(a: &EvalSummary, b: Option<&EvalSummary>) -> bool {
    beats_by(CompareRule::Speedup, a, b)
}

/// One line per workload: `uuid: 1.42x (312.0 us +/- 4.1 us; reference 443.1 us)`.
pub fn workload_lines(summary: &EvalSummary) -> String {
    summary
        .workloads
        .iter()
        .map(|w| match (w.speedup, w.median_ns, w.iqr_ns, w.reference_median_ns) {
            (Some(s), Some(m), Some(iqr), Some(r)) => format!(
                "- {}: {:.2}x ({} +/- {}; reference {})",
                w.uuid,
                s,
                micros(m),
                micros(iqr),
                micros(r)
            ),
            _ => format!("- {}: {}", w.uuid, w.status),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a prompt shows of a measured candidate: `workload_lines`, then the compiler's resource
/// report per kernel (registers, spills, shared memory) when the build made one.
pub fn measurement_lines(summary: &EvalSummary) -> String {
    let resources = resource_lines(&summary.resources);
    match (summary.workloads.is_empty(), resources.is_empty()) {
        (_, true) => workload_lines(summary),
        (true, false) => resources,
        (false, false) => format!("{}\n{resources}", workload_lines(summary)),
    }
}

/// Microseconds to three significant digits (`312 us`, `12.1 us`, `0.500 us`).
fn micros(ns: f64) -> String {
    format!("{} us", super::evidence::sig3(ns / 1e3))
}

/// A one-line verdict of an evaluation for tables and prompts.
pub fn verdict(summary: &EvalSummary) -> String {
    if let Some(flag) = &summary.suspicious {
        return format!("suspicious timing, not trusted ({flag})");
    }
    match (summary.passed(), summary.speedup) {
        (true, Some(s)) => {
            let noise = summary
                .relative_noise
                .map(|n| format!(", noise {:.1}%", n * 100.0))
                .unwrap_or_default();
            format!("passed, {s:.2}x the reference{noise}")
        }
        _ => match &summary.reason {
            Some(r) => format!("{}: {}", summary.status, first_line(r)),
            None => summary.status.clone(),
        },
    }
}

/// The first line of an error with text; a label ending in `:` (`compilation failed:`) takes
/// the next line with it, so a one-line verdict says what failed. At most 300 characters.
fn first_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let line = match lines.next() {
        Some(next) if first.ends_with(':') => format!("{first} {next}"),
        _ => first.to_string(),
    };
    match line.char_indices().nth(300) {
        Some((i, _)) => line[..i].to_string(),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(speedup: Option<f64>, noise: f64) -> EvalSummary {
        EvalSummary {
            status: if speedup.is_some() {
                "passed"
            } else {
                "incorrect_numerical"
            }
            .into(),
            reason: None,
            speedup,
            relative_noise: Some(noise),
            workloads: vec![],
            log_tail: String::new(),
            suspicious: None,
            resources: vec![],
            profile: None,
            harness: None,
        }
    }

    #[test]
    fn better_means_better_than_the_noise() {
        assert!(beats(&s(Some(1.10), 0.02), Some(&s(Some(1.0), 0.02))));
        assert!(
            !beats(&s(Some(1.03), 0.05), Some(&s(Some(1.0), 0.02))),
            "a 3% gain inside 5% noise is not a gain"
        );
        assert!(beats(&s(Some(0.5), 0.0), None));
        assert!(beats(&s(Some(0.5), 0.0), Some(&s(None, 0.0))));
        assert!(!beats(&s(None, 0.0), None));
        let mut flagged = s(Some(50.0), 0.0);
        flagged.suspicious = Some("faster than the device".into());
        assert!(
            !beats(&flagged, Some(&s(Some(1.0), 0.0))),
            "a suspicious result never wins"
        );
    }

    #[test]
    fn a_compile_error_verdict_says_what_failed() {
        let mut failed = s(None, 0.0);
        failed.status = "compile_error".into();
        failed.reason = Some("compilation failed:\nkernel.c:3:5: error: expected ';'\n1 error generated.".into());
        assert_eq!(
            verdict(&failed),
            "compile_error: compilation failed: kernel.c:3:5: error: expected ';'"
        );
    }
}
