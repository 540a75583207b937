use std::time::Duration;

/// What can go wrong finding devices or leasing one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// A `--devices` value that cannot be read.
    #[error("--devices '{spec}': {reason}")]
    Spec { spec: String, reason: String },
    /// `nvidia-smi` exists but did not answer usefully.
    #[error("nvidia-smi: {reason}")]
    NvidiaSmi { reason: String },
    /// A line of `nvidia-smi --query-gpu` output that is not `index, name, uuid, memory`.
    #[error("nvidia-smi output line {line} ('{text}'): {reason}")]
    Parse { line: usize, text: String, reason: String },
    /// A GPU asked for by `--devices` that is not among the visible ones.
    #[error("--devices: GPU {selector} is not visible (visible: {visible})")]
    NotVisible { selector: String, visible: String },
    /// A pool needs at least one device.
    #[error("no device to evaluate on: {reason}")]
    NoDevices { reason: String },
    /// A device's cross-process lock file cannot be used (see [`crate::DeviceLocks`]).
    #[error("cannot lock {device} against other processes ({path}): {reason}")]
    Lock {
        device: String,
        path: String,
        reason: String,
    },
    /// [`crate::DevicePool::lease_timeout`] waited this long without a device coming free.
    #[error("no device came free within {waited:?} ({busy} of {total} busy)")]
    Timeout {
        waited: Duration,
        busy: usize,
        total: usize,
    },
}
