use serde::{Deserialize, Serialize};
use std::fmt;

/// The outcome of evaluating a candidate (EVALUATION.md's vocabulary, plus `not_run` for
/// workloads an earlier failure kept from running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    CompileError,
    RuntimeError,
    Timeout,
    IncorrectShape,
    IncorrectDtype,
    IncorrectNumerical,
    Rejected,
    HarnessError,
    NotRun,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::CompileError => "compile_error",
            Status::RuntimeError => "runtime_error",
            Status::Timeout => "timeout",
            Status::IncorrectShape => "incorrect_shape",
            Status::IncorrectDtype => "incorrect_dtype",
            Status::IncorrectNumerical => "incorrect_numerical",
            Status::Rejected => "rejected",
            Status::HarnessError => "harness_error",
            Status::NotRun => "not_run",
        }
    }

    /// Statuses the harness itself may report for a workload.
    pub(crate) fn from_harness(s: &str) -> Option<Status> {
        Some(match s {
            "passed" => Status::Passed,
            "runtime_error" => Status::RuntimeError,
            "incorrect_shape" => Status::IncorrectShape,
            "incorrect_dtype" => Status::IncorrectDtype,
            "incorrect_numerical" => Status::IncorrectNumerical,
            _ => return None,
        })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
