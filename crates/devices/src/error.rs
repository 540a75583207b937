use std::time::Duration;

/// What can go wrong finding devices or leasing one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// A `--devices` value that cannot be read.
    #[error("--devices '{spec}': {reason}")]
    Spec {
        /// The value as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `nvidia-smi` exists but did not answer usefully.
    #[error("nvidia-smi: {reason}")]
    NvidiaSmi {
        /// What went wrong: the exit status, stderr, a timeout.
        reason: String,
    },
    /// A line of `nvidia-smi --query-gpu` output that is not `index, name, uuid, memory`.
    #[error("nvidia-smi output line {line} ('{text}'): {reason}")]
    Parse {
        /// The line's number in the output, from 1.
        line: usize,
        /// The line as printed.
        text: String,
        /// Which field could not be read, and why.
        reason: String,
    },
    /// A GPU asked for by `--devices` that is not among the visible ones.
    #[error("--devices: GPU {selector} is not visible (visible: {visible})")]
    NotVisible {
        /// The GPU as `--devices` named it (index or UUID prefix).
        selector: String,
        /// The visible GPUs, listed for the message.
        visible: String,
    },
    /// A pool needs at least one device.
    #[error("no device to evaluate on: {reason}")]
    NoDevices {
        /// Why the list came out empty (no GPU visible, zero CPU slots).
        reason: String,
    },
    /// A device's cross-process lock file cannot be used (see [`crate::DeviceLocks`]).
    #[error("cannot lock {device} against other processes ({path}): {reason}")]
    Lock {
        /// The device's label, e.g. `cuda:0`.
        device: String,
        /// The lock file (or directory) that failed.
        path: String,
        /// The I/O error or refusal (e.g. the file is a symbolic link).
        reason: String,
    },
    /// [`crate::DevicePool::lease_timeout`] waited this long without a device coming free.
    #[error("no device came free within {waited:?} ({busy} of {total} busy)")]
    Timeout {
        /// How long the caller waited.
        waited: Duration,
        /// How many of the pool's devices were leased when it gave up.
        busy: usize,
        /// The pool's size.
        total: usize,
    },
}
