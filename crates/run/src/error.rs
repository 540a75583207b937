//! The failures of this crate that a caller must tell apart (to choose an exit status, or to
//! say what to do next). Everything else travels as `anyhow::Error` with its context; these
//! are found in it with `downcast_ref::<RunError>()`.

use std::path::PathBuf;

/// A failure the CLI maps to its own exit status or advice (`ksearch-cli`'s `main`).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Another process drives, evaluates or answers this run right now.
    #[error("{dir}: the run is in use by {holder}; wait for it to end (or stop it) and try again")]
    Locked {
        /// The run directory.
        dir: PathBuf,
        /// Who holds the lock, as its holder wrote it (`ksearch run (process N on HOST, since
        /// TIME)`), or `another ksearch process` when it wrote nothing.
        holder: String,
    },
    /// The run directory's task snapshot no longer matches the hash recorded at the start.
    #[error(
        "{dir}: the task changed since the run started (task/ hashes to {now}, the run recorded {recorded}); \
         a run is evaluated with the task it started with: restore task/ or start a new run"
    )]
    TaskChanged {
        /// The run directory.
        dir: PathBuf,
        /// The first 12 hex digits of the SHA-256 recorded in `task_snapshot` at the start.
        recorded: String,
        /// The first 12 hex digits of the SHA-256 of the snapshot as it is now.
        now: String,
    },
    /// The machine lacks the device the task's kernels run on.
    #[error("{dir}: {what}; nothing was evaluated or recorded. Evaluate it on a machine with {need}")]
    DeviceAbsent {
        /// The run directory.
        dir: PathBuf,
        /// What is missing, in words.
        what: String,
        /// The device a machine needs to evaluate the run, in words.
        need: String,
    },
    /// Two copies of a run were continued apart ([`crate::sync::fast_forward`]); the message
    /// names both and the first difference.
    #[error("{0}")]
    Diverged(String),
    /// The directory already holds a run, or is being made into one.
    #[error("{dir}: {why}")]
    Exists {
        /// The run directory.
        dir: PathBuf,
        /// What is there, and what to do instead.
        why: String,
    },
}
