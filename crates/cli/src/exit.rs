//! The exit status of the command line, chosen by cause: 0 success, 1 the input was right but
//! the work failed (a candidate that does not pass, a search or run that stopped short, or the
//! machine: no device, no temp dir, no python3 to run the harness, a full disk, a cluster gone),
//! 2 bad input (including a KSEARCH_PYTHON that cannot run the harness) (an unknown task, an
//! unreadable or malformed file, a directory that is not a run, a value out of range). The
//! README promises these; crates/cli/tests/exit_status.rs holds each command to them.

use ksearch_eval::EvalError;
use ksearch_run::executor::ray::RayError;
use ksearch_run::RunError;
use ksearch_store::StoreError;

/// What a command's exit status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitStatus {
    /// 0: done as asked.
    Success = 0,
    /// 1: the input was right, but the candidate, the search or the machine failed.
    Failed = 1,
    /// 2: the input is wrong (the message names what), or a failure not known to be the
    /// machine's or the moment's.
    BadInput = 2,
}

impl ExitStatus {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// The status for a command that ended with `err`, by the first cause in its chain that
    /// says whose failure it is.
    pub(crate) fn of_error(err: &anyhow::Error) -> ExitStatus {
        for cause in err.chain() {
            if let Some(status) = of_cause(cause) {
                return status;
            }
        }
        ExitStatus::BadInput
    }
}

fn of_cause(cause: &(dyn std::error::Error + 'static)) -> Option<ExitStatus> {
    use ExitStatus::{BadInput, Failed};
    if let Some(e) = cause.downcast_ref::<StoreError>() {
        // A full disk is the machine's failure; other store errors (a file that is not a run
        // store, a newer schema) are about what was given.
        return matches!(e, StoreError::DiskFull { .. }).then_some(Failed);
    }
    if let Some(e) = cause.downcast_ref::<std::io::Error>() {
        return (e.kind() == std::io::ErrorKind::StorageFull).then_some(Failed);
    }
    if let Some(e) = cause.downcast_ref::<RunError>() {
        return Some(match e {
            RunError::Locked { .. } | RunError::DeviceAbsent { .. } | RunError::Diverged(_) => Failed,
            RunError::TaskChanged { .. } | RunError::Exists { .. } => BadInput,
        });
    }
    if let Some(e) = cause.downcast_ref::<EvalError>() {
        return Some(match e {
            // Python, the harness or a temp dir could not be set up: the machine's.
            EvalError::Setup(_) => Failed,
            // KSEARCH_PYTHON names an interpreter that cannot run the harness: a setting to fix.
            EvalError::Interpreter(_)
            | EvalError::Options(_)
            | EvalError::Task(_)
            | EvalError::UnsupportedDevice { .. } => BadInput,
        });
    }
    if let Some(e) = cause.downcast_ref::<RayError>() {
        return Some(match e {
            // The cluster is not there (or cannot run this ksearch), or Python did not start.
            RayError::Connect { .. } | RayError::Spawn(_) => Failed,
            RayError::NoAddress | RayError::Task(_) => BadInput,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_deep_in_the_chain_decide() {
        let setup = anyhow::Error::from(EvalError::Setup("cannot start the harness".into())).context("eval");
        assert_eq!(ExitStatus::of_error(&setup), ExitStatus::Failed);
        let chosen = anyhow::Error::from(EvalError::Interpreter("KSEARCH_PYTHON=x lacks numpy".into()));
        assert_eq!(ExitStatus::of_error(&chosen), ExitStatus::BadInput);
        let device = anyhow::Error::from(EvalError::UnsupportedDevice {
            backend: "c",
            device: "cuda:0".into(),
            expected: "cpu",
        });
        assert_eq!(ExitStatus::of_error(&device), ExitStatus::BadInput);
        let gone = anyhow::Error::from(RayError::Connect {
            address: "h:1".into(),
            why: "nothing answers".into(),
        });
        assert_eq!(ExitStatus::of_error(&gone), ExitStatus::Failed);
        assert_eq!(
            ExitStatus::of_error(&anyhow::Error::from(RayError::NoAddress)),
            ExitStatus::BadInput
        );
        let full = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::StorageFull)).context("writing");
        assert_eq!(ExitStatus::of_error(&full), ExitStatus::Failed);
        assert_eq!(
            ExitStatus::of_error(&anyhow::anyhow!("--rounds must be at least 1")),
            ExitStatus::BadInput
        );
        assert_eq!(
            (
                ExitStatus::Success.code(),
                ExitStatus::Failed.code(),
                ExitStatus::BadInput.code()
            ),
            (0, 1, 2)
        );
    }
}
