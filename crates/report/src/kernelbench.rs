//! KernelBench's fast_p for a run of an imported KernelBench task.
//!
//! KernelBench (Ouyang et al., "KernelBench: Can LLMs Write Efficient GPU Kernels?", 2025)
//! scores a set of problems by fast_p: the share of problems whose generated kernel is correct
//! and more than p times as fast as PyTorch eager on the problem's inputs (fast_0 is the share
//! that is correct). For one run the figure is one indicator per threshold: does its best
//! candidate pass, and is its speedup above p? Over a suite, fast_p is the mean of the runs'
//! indicators. The speedup is ksearch's own over the task's reference, which for an imported
//! KernelBench task is the problem's Model in PyTorch eager mode, KernelBench's baseline too;
//! the final re-measurement is preferred where the run made one.

use std::path::Path;

/// The thresholds `ksearch show` reports (fast_0 = correct; KernelBench's paper plots fast_p
/// over p, with 1 the headline).
pub const THRESHOLDS: [f64; 4] = [0.0, 1.0, 1.5, 2.0];

/// The tag `ksearch import kernelbench` puts on the definitions it writes.
pub const KERNELBENCH_TAG: &str = "source:kernelbench";

/// A run's fast_p indicators.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FastP {
    /// Whether the best candidate passed the checks (fast_0).
    pub correct: bool,
    /// Its speedup over PyTorch eager (the task's reference), when it passed and was timed.
    pub speedup: Option<f64>,
    /// `(p, indicator)` for each of [`THRESHOLDS`].
    pub thresholds: Vec<(f64, bool)>,
}

impl FastP {
    /// The indicators for a best candidate that `correct`ly passed (or did not) with `speedup`.
    /// fast_0 is correctness alone, as KernelBench defines it; a higher p needs a speedup
    /// strictly above p.
    pub fn new(correct: bool, speedup: Option<f64>) -> FastP {
        let speedup = speedup.filter(|_| correct);
        let thresholds = THRESHOLDS
            .iter()
            .map(|&p| {
                let fast = correct && (p == 0.0 || speedup.is_some_and(|s| s > p));
                (p, fast)
            })
            .collect();
        FastP {
            correct,
            speedup,
            thresholds,
        }
    }

    /// One line for `ksearch show`: `KernelBench fast_p: fast_0 yes, fast_1 yes, ... (1.32x
    /// PyTorch eager)`.
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .thresholds
            .iter()
            .map(|(p, fast)| format!("fast_{p} {}", if *fast { "yes" } else { "no" }))
            .collect();
        let how = match (self.correct, self.speedup) {
            (true, Some(s)) => format!("{s:.2}x PyTorch eager"),
            (true, None) => "not timed".to_string(),
            (false, _) => "no candidate passed".to_string(),
        };
        format!("KernelBench fast_p: {} ({how})", parts.join(", "))
    }
}

/// Whether the task snapshot in `task_dir` (a run's `task/`) was imported from KernelBench: its
/// definition carries [`KERNELBENCH_TAG`]. A missing or unreadable definition is not one.
pub fn is_kernelbench_task(task_dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(task_dir.join("definition.json")) else {
        return false;
    };
    let Ok(def) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    def["tags"]
        .as_array()
        .is_some_and(|tags| tags.iter().any(|t| t.as_str() == Some(KERNELBENCH_TAG)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(f: &FastP) -> Vec<bool> {
        f.thresholds.iter().map(|(_, b)| *b).collect()
    }

    #[test]
    fn fast_p_needs_correctness_and_a_speedup_strictly_above_p() {
        assert_eq!(flags(&FastP::new(true, Some(1.32))), [true, true, false, false]);
        assert_eq!(flags(&FastP::new(true, Some(0.7))), [true, false, false, false]);
        // Exactly p is not above p.
        assert_eq!(flags(&FastP::new(true, Some(2.0))), [true, true, true, false]);
        assert_eq!(flags(&FastP::new(true, Some(2.01))), [true, true, true, true]);
        // A failed candidate is fast at no p, whatever speedup it was timed at.
        let failed = FastP::new(false, Some(5.0));
        assert_eq!(flags(&failed), [false, false, false, false]);
        assert_eq!(failed.speedup, None);
        // Correct but untimed: fast_0 only.
        assert_eq!(flags(&FastP::new(true, None)), [true, false, false, false]);
    }

    #[test]
    fn the_line_names_each_threshold_and_the_speedup() {
        assert_eq!(
            FastP::new(true, Some(1.32)).line(),
            "KernelBench fast_p: fast_0 yes, fast_1 yes, fast_1.5 no, fast_2 no (1.32x PyTorch eager)"
        );
        assert_eq!(
            FastP::new(false, None).line(),
            "KernelBench fast_p: fast_0 no, fast_1 no, fast_1.5 no, fast_2 no (no candidate passed)"
        );
    }

    #[test]
    fn a_task_is_kernelbench_by_its_definitions_tag() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_kernelbench_task(dir.path()));
        std::fs::write(
            dir.path().join("definition.json"),
            r#"{"name": "x", "tags": ["source:gpumode"]}"#,
        )
        .unwrap();
        assert!(!is_kernelbench_task(dir.path()));
        std::fs::write(
            dir.path().join("definition.json"),
            r#"{"name": "x", "tags": ["a", "source:kernelbench"]}"#,
        )
        .unwrap();
        assert!(is_kernelbench_task(dir.path()));
        std::fs::write(dir.path().join("definition.json"), "not json").unwrap();
        assert!(!is_kernelbench_task(dir.path()));
    }
}
