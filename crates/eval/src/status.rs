use serde::{Deserialize, Serialize};
use std::fmt;

/// The outcome of evaluating a candidate (docs/protocol.md's vocabulary, plus `not_run` for
/// workloads an earlier failure kept from running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Compiled, matched the reference on every trial and every timing call, and was timed
    /// (under compute-sanitizer nothing is timed).
    Passed,
    /// The build failed (the compiler's log is the reason).
    CompileError,
    /// The candidate failed while it ran: an exception (its own, or the reference's or the
    /// harness's once it had run in the process), its process crashing or exiting, a device
    /// error, a missing symbol, compute-sanitizer errors, or protocol lines forged once its code
    /// had run.
    RuntimeError,
    /// The wall-clock limit or the CPU-time limit was reached.
    Timeout,
    /// Returned outputs of the wrong number or shape (backends whose kernels return outputs).
    IncorrectShape,
    /// A returned output of the wrong dtype, or not a tensor.
    IncorrectDtype,
    /// Outputs out of tolerance in a trial or a timing call, or an input the candidate modified.
    IncorrectNumerical,
    /// Refused before it ran: a static check on the source, or backend cuda's import check on
    /// the compiled objects.
    Rejected,
    /// The harness failed, not (as far as can be told) the candidate: a harness exception, a
    /// death before candidate code ran, a broken protocol, no authenticated line at all or forged
    /// lines before candidate code ran, a workload never reported, an unknown sanitizer verdict.
    HarnessError,
    /// Not evaluated: the evaluation ended before this workload was reported (fail-fast, a
    /// crash, a rejection), or its record was voided.
    NotRun,
}

impl Status {
    /// The snake_case name used in the serialised record (and, for the statuses the harness
    /// reports, in the protocol).
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
