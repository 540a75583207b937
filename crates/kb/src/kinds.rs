//! The small vocabularies the data files use: device kinds, kernel targets, regimes, and the
//! prompt-context levels of the published three-configuration comparison.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    /// A host processor (x86-64, Arm cores).
    Cpu,
    /// A GPU (NVIDIA, Apple).
    Gpu,
}

impl DeviceKind {
    /// The spelling the data files use: `cpu`, `gpu`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Gpu => "gpu",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kernel dialect a pattern applies to, and that a device runs. An MLX custom kernel is
/// written in `metal` (mx.fast.metal_kernel, macOS) or `cuda` (mx.fast.cuda_kernel, Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// C compiled for the host CPU.
    Cpu,
    /// CUDA C++.
    Cuda,
    /// Triton (Python DSL, NVIDIA GPUs here).
    Triton,
    /// Metal Shading Language (Apple GPUs).
    Metal,
}

impl TargetKind {
    /// Every target, in declaration order (what [`FromStr`] searches and errors list).
    pub const ALL: [TargetKind; 4] = [TargetKind::Cpu, TargetKind::Cuda, TargetKind::Triton, TargetKind::Metal];

    /// The spelling the data files and task.toml use: `cpu`, `cuda`, `triton`, `metal`.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Cpu => "cpu",
            TargetKind::Cuda => "cuda",
            TargetKind::Triton => "triton",
            TargetKind::Metal => "metal",
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TargetKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TargetKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown target kind '{s}'; expected one of cpu, cuda, triton, metal"))
    }
}

/// What limits a kernel: the regimes a pattern's priors are given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Regime {
    /// Limited by DRAM bandwidth: bytes moved, not arithmetic, set the time.
    MemoryBound,
    /// Limited by arithmetic throughput (FP32 or tensor units).
    ComputeBound,
    /// Limited by launch overhead, synchronisation or too little parallel work.
    LatencyBound,
}

impl Regime {
    /// Every regime in the fixed order memory, compute, latency (the order renderings use).
    pub const ALL: [Regime; 3] = [Regime::MemoryBound, Regime::ComputeBound, Regime::LatencyBound];

    /// The kebab-case spelling the data files use: `memory-bound`, `compute-bound`, `latency-bound`.
    pub fn as_str(self) -> &'static str {
        match self {
            Regime::MemoryBound => "memory-bound",
            Regime::ComputeBound => "compute-bound",
            Regime::LatencyBound => "latency-bound",
        }
    }

    /// One letter, as used in the compact prompt rendering (`M`, `C`, `L`).
    pub fn letter(self) -> char {
        match self {
            Regime::MemoryBound => 'M',
            Regime::ComputeBound => 'C',
            Regime::LatencyBound => 'L',
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Regime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase().replace('_', "-");
        Regime::ALL
            .into_iter()
            .find(|r| r.as_str() == s || r.as_str().trim_end_matches("-bound") == s)
            .ok_or_else(|| format!("unknown regime '{s}'; expected memory-bound, compute-bound or latency-bound"))
    }
}

/// How much knowledge a prompt gets (the published three-configuration comparison):
/// nothing, the device's figures, or the figures plus the optimisation patterns, the
/// translation layers into the task's target, the properties every candidate must keep and the
/// task's expertise (see [`crate::Kb::task_context`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Context {
    /// No knowledge at all: the slice is empty.
    None,
    /// The device's spec only, as compact markdown.
    Hardware,
    /// Everything: spec, patterns, translation layers, properties and expertise (the default).
    #[default]
    Full,
}

impl Context {
    /// The three levels, from least to most.
    pub const ALL: [Context; 3] = [Context::None, Context::Hardware, Context::Full];

    /// The kebab-case spelling, as serialized: `none`, `hardware`, `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Context::None => "none",
            Context::Hardware => "hardware",
            Context::Full => "full",
        }
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Context {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Context::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown context level '{}'; expected none, hardware or full", s.trim()))
    }
}
