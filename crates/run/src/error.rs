//! The failures of this crate that a caller must tell apart (to choose an exit status, or to
//! say what to do next). Everything else travels as `anyhow::Error` with its context; these
//! are found in it with `downcast_ref::<RunError>()`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Another process drives, evaluates or answers this run right now.
    #[error("{dir}: the run is in use by {holder}; wait for it to end (or stop it) and try again")]
    Locked { dir: PathBuf, holder: String },
    /// The run directory's task snapshot no longer matches the hash recorded at the start.
    #[error(
        "{dir}: the task changed since the run started (task/ hashes to {now}, the run recorded {recorded}); \
         a run is evaluated with the task it started with: restore task/ or start a new run"
    )]
    TaskChanged {
        dir: PathBuf,
        recorded: String,
        now: String,
    },
    /// The machine lacks the device the task's kernels run on.
    #[error("{dir}: {what}; nothing was evaluated or recorded. Evaluate it on a machine with {need}")]
    DeviceAbsent { dir: PathBuf, what: String, need: String },
    /// Two copies of a run were continued apart.
    #[error("{0}")]
    Diverged(String),
    /// The directory already holds a run, or is being made into one.
    #[error("{dir}: {why}")]
    Exists { dir: PathBuf, why: String },
}
