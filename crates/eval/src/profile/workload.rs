//! Which workload of the task is profiled.

use super::ProfileError;
use ksearch_spec::{DType, Task};

/// Bytes of one copy of a workload's inputs and outputs (sub-byte types rounded up per tensor).
fn footprint(task: &Task, index: usize) -> u128 {
    let def = &task.definition;
    let axes = task.workloads[index].all_axes(def);
    def.inputs
        .values()
        .chain(def.outputs.values())
        .map(|t| {
            let elements: u128 = t
                .dims()
                .iter()
                .map(|d| axes.get(d).map_or(1, |v| (*v).max(0) as u128))
                .product();
            (elements * bits(t.dtype)).div_ceil(8)
        })
        .sum()
}

fn bits(dtype: DType) -> u128 {
    match dtype {
        DType::Float64 | DType::Int64 => 64,
        DType::Float32 | DType::Int32 => 32,
        DType::Float16 | DType::Bfloat16 | DType::Int16 => 16,
        DType::Float8E4m3 | DType::Float8E5m2 | DType::Int8 | DType::Uint8 | DType::Bool => 8,
        DType::Float4E2m1 => 4,
    }
}

/// The workload to profile: the one named, else the largest by bytes of inputs and outputs (the
/// first of equals): where a kernel spends most, and least distorted by launch overhead.
/// Returns its index and why it was chosen.
pub fn choose_workload(task: &Task, wanted: Option<&str>) -> Result<(usize, String), ProfileError> {
    if let Some(uuid) = wanted {
        return match task.workloads.iter().position(|w| w.uuid == uuid) {
            Some(i) => Ok((i, "named by --profile-workload".to_string())),
            None => Err(ProfileError::UnknownWorkload(uuid.to_string())),
        };
    }
    let (index, bytes) = (0..task.workloads.len())
        .map(|i| (i, footprint(task, i)))
        .fold(None, |best: Option<(usize, u128)>, (i, b)| match best {
            Some((_, top)) if top >= b => best,
            _ => Some((i, b)),
        })
        .ok_or(ProfileError::NoWorkloads)?;
    Ok((
        index,
        format!("the largest workload ({} of inputs and outputs)", size(bytes)),
    ))
}

fn size(bytes: u128) -> String {
    let b = bytes as f64;
    match bytes {
        n if n >= 1 << 30 => format!("{:.2} GiB", b / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", b / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", b / 1024.0),
        n => format!("{n} bytes"),
    }
}
