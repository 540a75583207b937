//! The devices evaluations run on, and the pool that hands them out.
//!
//! - [`Device`]: a GPU found by `nvidia-smi` (filtered by `CUDA_VISIBLE_DEVICES`), or a CPU slot.
//! - [`DeviceSpec`]: the user's choice (`--devices 0,1`, `--devices cpu:2`), parsed and checked.
//! - [`DevicePool`]: one evaluation per device at a time. [`DevicePool::lease`] blocks until a
//!   device is free, first come first served, and returns a [`Lease`] that names the device;
//!   dropping the lease (also while a panic unwinds) frees the device.
//! - [`DeviceLocks`]: the same guarantee across processes. [`DevicePool::lease_locked`] also
//!   takes the device's advisory file lock (`flock`, keyed by the GPU's UUID or the CPU slot), so
//!   two ksearch processes never evaluate on one device at once; a waiter is told who holds it,
//!   and a lock whose holder died (even by SIGKILL) is free, because the kernel drops it.
//!
//! Nothing here evaluates anything. A caller names the leased device to the evaluation in one
//! of two ways, and must not mix them: [`Lease::env`] (`CUDA_VISIBLE_DEVICES=<uuid>`) for a
//! child whose environment the caller sets, in which the GPU is then `cuda:0` (what the `ksearch`
//! driver does); or [`Lease::cuda_device`] (`cuda:K`, the GPU as this process numbers it) for a
//! child that inherits this process's environment. Timing two kernels on one GPU at once would make both numbers
//! worthless, which is why a device is never leased twice.

#![warn(missing_docs)]

mod device;
mod error;
mod lock;
mod pool;

pub use device::{
    apply_cuda_visible_devices, cpu_slots, discover_gpus, parse_nvidia_smi, select, Device, DeviceKind, DeviceSpec,
    GpuSelector, NVIDIA_SMI_QUERY,
};
pub use error::DeviceError;
pub use lock::{lock_key, DeviceLock, DeviceLocks, LOCK_DIR_ENV};
pub use pool::{DevicePool, Lease};
