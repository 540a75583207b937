//! The devices evaluations run on, and the pool that hands them out.
//!
//! - [`Device`]: a GPU found by `nvidia-smi` (filtered by `CUDA_VISIBLE_DEVICES`), or a CPU slot.
//! - [`DeviceSpec`]: the user's choice (`--devices 0,1`, `--devices cpu:2`), parsed and checked.
//! - [`DevicePool`]: one evaluation per device at a time. [`DevicePool::lease`] blocks until a
//!   device is free, first come first served, and returns a [`Lease`] that names the device and
//!   the environment a child process needs to run on it; dropping the lease (also while a
//!   panic unwinds) frees the device.
//!
//! Nothing here evaluates anything: the caller passes [`Lease::env`] to the evaluation's child
//! process. Timing two kernels on one GPU at once would make both numbers worthless, which is
//! why a device is never leased twice.

mod device;
mod error;
mod pool;

pub use device::{
    apply_cuda_visible_devices, cpu_slots, discover_gpus, parse_nvidia_smi, select, Device, DeviceKind, DeviceSpec,
    GpuSelector, NVIDIA_SMI_QUERY,
};
pub use error::DeviceError;
pub use pool::{DevicePool, Lease};
