//! Hardware specs: one TOML file per device under `kb/hardware/`.
//!
//! Every figure carries its provenance (`basis` and `source`), so a prompt or a report can say
//! whether a number is a vendor's peak, a published limit, a typical value, or something we
//! measured ourselves. A figure nobody could source is left out, never guessed.

use crate::error::{Problem, Problems};
use crate::kinds::{DeviceKind, TargetKind};
use crate::render::num;
use serde::{Deserialize, Serialize};

/// The data format version this crate reads.
pub const SCHEMA_VERSION: u32 = 1;

/// One device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareSpec {
    /// Data format version; must be [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Canonical name; equals the file name without `.toml` (`h200`, `apple-m4-max`).
    pub name: String,
    /// Human name (`NVIDIA H200 SXM`).
    pub display_name: String,
    /// Who makes it, lower case as the files write it (`nvidia`, `apple`).
    pub vendor: String,
    /// CPU or GPU.
    pub kind: DeviceKind,
    /// Compiler target or feature family (`sm_90a`, `apple9`, `x86-64`).
    pub arch: String,
    /// Other names that find this device (matched after [`normalize_name`]).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Kernel dialects this device runs; the first is the default for prompts.
    pub targets: Vec<TargetKind>,
    /// What one compute unit is called (`SM`, `GPU core`, `core`).
    pub compute_unit: String,
    /// Memory technology (`HBM3e`, `unified`), if known.
    #[serde(default)]
    pub memory_type: Option<String>,
    /// The matrix (tensor) units and how kernels reach them, in one line (`simdgroup_matrix
    /// 8x8 ...`, `4th-gen tensor cores: wgmma ...`); rendered in prompts.
    #[serde(default)]
    pub matrix_units: Option<String>,
    /// Design-relevant facts, one sentence or two each; they go into prompts verbatim.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The device's numbers, each with its provenance; absent ones were not sourced.
    #[serde(default)]
    pub figures: Figures,
    /// Our own measurements on this device (kept apart from the vendor's figures).
    #[serde(default)]
    pub measured: Vec<Measurement>,
}

/// Where a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// A published limit or count (SM count, shared memory per block, cache line).
    VendorSpec,
    /// A vendor's theoretical peak (bandwidth, TFLOP/s); real kernels reach less.
    VendorPeak,
    /// Measured or queried by us; the source must say where and when (a YYYY-MM-DD date).
    Measured,
    /// Typical of the class of device, approximate (generic CPU caches).
    Typical,
    /// Computed from other published figures (two dies of a documented chip, ALUs x clock);
    /// the source must say from what.
    Derived,
}

impl Basis {
    /// How renderings name the basis (`vendor peak`, `typical, approximate`).
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::VendorSpec => "vendor spec",
            Basis::VendorPeak => "vendor peak",
            Basis::Measured => "measured",
            Basis::Typical => "typical, approximate",
            Basis::Derived => "derived from published figures",
        }
    }
}

/// One number with its provenance. The unit is fixed by the field's name (see [`FIGURE_META`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// The number, in the unit its field's [`FigureMeta`] gives.
    pub value: f64,
    /// What kind of number it is: a datasheet limit, a peak, a measurement.
    pub basis: Basis,
    /// Where the number comes from: a datasheet, a guide, or "measured on ... on YYYY-MM-DD".
    pub source: String,
    /// The value is the largest configuration sold (Apple's "up to 128 GB"); rendered "up to".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub up_to: bool,
    /// Caveats (other bins, other variants); shown in the sourced rendering, not in prompts.
    #[serde(default)]
    pub note: Option<String>,
}

/// A measurement of our own, e.g. achieved copy bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// What was measured (`device-to-device copy`).
    pub what: String,
    /// The number, in `unit`.
    pub value: f64,
    /// `GB/s`, `TFLOP/s`, `ms`, ...
    pub unit: String,
    /// Where, when (YYYY-MM-DD) and how.
    pub source: String,
}

/// Static facts about a figure field: its label, unit and the range a valid value lies in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FigureMeta {
    /// The field's name in [`Figures`] and in the TOML (`memory_bandwidth_gbs`).
    pub key: &'static str,
    /// How renderings name it (`memory bandwidth`).
    pub label: &'static str,
    /// The value's unit (`GB/s`, `KB`); empty for counts.
    pub unit: &'static str,
    /// Counts must be whole numbers.
    pub integer: bool,
    /// The smallest valid value; validation rejects a figure outside `min..=max`.
    pub min: f64,
    /// The largest valid value.
    pub max: f64,
}

macro_rules! figures {
    ($( $(#[$doc:meta])* $field:ident: $label:literal, $unit:literal, $integer:literal, $min:literal ..= $max:literal; )*) => {
        /// The numbers of a device. All optional: a figure without a reliable source is left out.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Figures {
            $( $(#[$doc])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $field: Option<Figure>, )*
        }

        /// Label, unit and valid range of every field of [`Figures`], in declaration order.
        pub const FIGURE_META: &[FigureMeta] = &[
            $( FigureMeta { key: stringify!($field), label: $label, unit: $unit, integer: $integer, min: $min, max: $max }, )*
        ];

        impl Figures {
            /// The figure stored under a field name of [`FIGURE_META`].
            pub fn get(&self, key: &str) -> Option<&Figure> {
                match key {
                    $( stringify!($field) => self.$field.as_ref(), )*
                    _ => None,
                }
            }
        }
    };
}

figures! {
    /// DRAM (HBM, unified memory) bandwidth.
    memory_bandwidth_gbs: "memory bandwidth", "GB/s", false, 1.0..=100000.0;
    /// DRAM size (for Apple, the largest configuration sold: `up_to`).
    memory_gb: "memory size", "GB", false, 0.001..=100000.0;
    /// Non-tensor (vector/SIMT) FP32.
    fp32_tflops: "FP32 (non-tensor)", "TFLOP/s", false, 0.001..=100000.0;
    /// Tensor/matrix units, dense (no structured sparsity).
    tensor_tf32_tflops: "tensor TF32 dense", "TFLOP/s", false, 0.001..=100000.0;
    /// Tensor/matrix units, FP16 and BF16 inputs, dense.
    tensor_fp16_bf16_tflops: "tensor FP16/BF16 dense", "TFLOP/s", false, 0.001..=100000.0;
    /// Tensor/matrix units, FP8 inputs, dense.
    tensor_fp8_tflops: "tensor FP8 dense", "TFLOP/s", false, 0.001..=100000.0;
    /// SMs, GPU cores or CPU cores (named by `compute_unit`).
    compute_units: "compute units", "", true, 1.0..=100000.0;
    /// Shared (CUDA) or threadgroup (Metal) memory one block may use without opting in.
    shared_mem_per_block_kb: "shared memory per block (default)", "KB", false, 1.0..=4096.0;
    /// The most shared memory one block may use after opting in.
    shared_mem_per_block_max_kb: "shared memory per block (opt-in max)", "KB", false, 1.0..=4096.0;
    /// Shared (threadgroup) memory of one compute unit, all resident blocks together.
    shared_mem_per_unit_kb: "shared memory per compute unit", "KB", false, 1.0..=4096.0;
    /// The most 32-bit registers one thread may use.
    registers_per_thread_max: "registers per thread (max)", "", true, 1.0..=4096.0;
    /// 32-bit registers per compute unit.
    registers_per_unit: "32-bit registers per compute unit", "", true, 1.0..=16777216.0;
    /// The most threads one block (threadgroup) may have.
    max_threads_per_block: "threads per block (max)", "", true, 1.0..=65536.0;
    /// The most threads resident on one compute unit at once (occupancy's ceiling).
    max_threads_per_unit: "resident threads per compute unit (max)", "", true, 1.0..=1048576.0;
    /// Threads per warp / SIMD-group, or fp32 lanes of a CPU vector register.
    simd_width: "SIMD width", "", true, 1.0..=1024.0;
    /// CPU vector register width.
    vector_bits: "vector register width", "bit", true, 64.0..=4096.0;
    /// L1 data cache per core (CPU) or per SM.
    l1_kb: "L1 data cache per core", "KB", false, 1.0..=65536.0;
    /// A CPU's private L2 cache per core.
    l2_per_core_kb: "L2 cache per core", "KB", false, 1.0..=1048576.0;
    /// L2 shared by the whole device.
    l2_mb: "L2 cache (device)", "MB", false, 0.01..=65536.0;
    /// A CPU's last-level cache, shared by several cores (the size of one instance).
    l3_mb: "L3 cache (shared)", "MB", false, 0.01..=65536.0;
    /// Cache line size.
    cache_line_bytes: "cache line", "B", true, 8.0..=4096.0;
}

/// The form names are compared in: lower case, runs of spaces, `_` and `-` as one `-`.
/// `"NVIDIA H200"`, `"nvidia_h200"` and `"nvidia-h200"` are the same name.
pub fn normalize_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.trim().chars() {
        let c = c.to_ascii_lowercase();
        if c.is_whitespace() || c == '_' || c == '-' {
            if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c);
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

pub(crate) fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// True when `s` contains a date written YYYY-MM-DD.
pub(crate) fn has_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.windows(10).any(|w| {
        w.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
    })
}

const MAX_NOTE_CHARS: usize = 400;
const MAX_MATRIX_UNITS_CHARS: usize = 200;
const MAX_NOTES: usize = 8;

impl HardwareSpec {
    /// Checks ranges and required fields; `stem` is the file name without `.toml`.
    pub(crate) fn validate(&self, file: &str, stem: &str) -> Vec<Problem> {
        let mut p = Problems::new(file);
        if self.schema != SCHEMA_VERSION {
            p.push(
                "schema",
                format!(
                    "unsupported version {}; this ksearch reads {SCHEMA_VERSION}",
                    self.schema
                ),
            );
        }
        if !valid_id(&self.name) {
            p.push(
                "name",
                format!("'{}' must be lower case letters, digits and single dashes", self.name),
            );
        } else if self.name != stem {
            p.push(
                "name",
                format!("'{}' must equal the file name ('{stem}.toml')", self.name),
            );
        }
        for (field, value) in [
            ("display_name", &self.display_name),
            ("vendor", &self.vendor),
            ("arch", &self.arch),
            ("compute_unit", &self.compute_unit),
        ] {
            if value.trim().is_empty() {
                p.push(field, "must not be empty");
            }
        }
        if let Some(m) = &self.memory_type {
            if m.trim().is_empty() {
                p.push("memory_type", "must not be empty when given");
            }
        }
        if let Some(m) = &self.matrix_units {
            let n = m.chars().count();
            if m.trim().is_empty() {
                p.push("matrix_units", "must not be empty when given");
            } else if n > MAX_MATRIX_UNITS_CHARS {
                p.push(
                    "matrix_units",
                    format!("{n} characters; at most {MAX_MATRIX_UNITS_CHARS} (it goes into prompts)"),
                );
            }
        }
        for (i, alias) in self.aliases.iter().enumerate() {
            let n = normalize_name(alias);
            if n.is_empty() {
                p.push(format!("aliases[{i}]"), "must not be empty");
            } else if n == self.name {
                p.push(format!("aliases[{i}]"), format!("'{alias}' is the name itself"));
            } else if self.aliases[..i].iter().any(|a| normalize_name(a) == n) {
                p.push(format!("aliases[{i}]"), format!("'{alias}' repeats an earlier alias"));
            }
        }
        if self.targets.is_empty() {
            p.push("targets", "must name at least one of cpu, cuda, triton, metal");
        }
        for (i, t) in self.targets.iter().enumerate() {
            let fits = match self.kind {
                DeviceKind::Cpu => *t == TargetKind::Cpu,
                DeviceKind::Gpu => *t != TargetKind::Cpu,
            };
            if !fits {
                p.push(
                    format!("targets[{i}]"),
                    format!("a {} device cannot run '{t}' kernels", self.kind),
                );
            }
            if self.targets[..i].contains(t) {
                p.push(format!("targets[{i}]"), format!("'{t}' is listed twice"));
            }
        }
        if self.notes.len() > MAX_NOTES {
            p.push(
                "notes",
                format!(
                    "at most {MAX_NOTES} notes (they go into prompts), got {}",
                    self.notes.len()
                ),
            );
        }
        for (i, note) in self.notes.iter().enumerate() {
            let n = note.chars().count();
            if note.trim().is_empty() {
                p.push(format!("notes[{i}]"), "must not be empty");
            } else if n > MAX_NOTE_CHARS {
                p.push(
                    format!("notes[{i}]"),
                    format!("{n} characters; at most {MAX_NOTE_CHARS} (notes go into prompts)"),
                );
            }
        }
        for meta in FIGURE_META {
            if let Some(f) = self.figures.get(meta.key) {
                validate_figure(&mut p, &format!("figures.{}", meta.key), meta, f);
            }
        }
        let f = &self.figures;
        let kb = |x: &Option<Figure>| x.as_ref().map(|f| f.value);
        if let (Some(d), Some(m)) = (kb(&f.shared_mem_per_block_kb), kb(&f.shared_mem_per_block_max_kb)) {
            if d > m {
                p.push(
                    "figures.shared_mem_per_block_kb",
                    format!("default ({d} KB) exceeds the opt-in maximum ({m} KB)"),
                );
            }
        }
        if let (Some(m), Some(u)) = (kb(&f.shared_mem_per_block_max_kb), kb(&f.shared_mem_per_unit_kb)) {
            if m > u {
                p.push(
                    "figures.shared_mem_per_block_max_kb",
                    format!("per block ({m} KB) exceeds per compute unit ({u} KB)"),
                );
            }
        }
        if let (Some(b), Some(u)) = (kb(&f.max_threads_per_block), kb(&f.max_threads_per_unit)) {
            if b > u {
                p.push(
                    "figures.max_threads_per_block",
                    format!("per block ({b}) exceeds per compute unit ({u})"),
                );
            }
        }
        if self.kind == DeviceKind::Cpu {
            for key in [
                "shared_mem_per_block_kb",
                "shared_mem_per_block_max_kb",
                "shared_mem_per_unit_kb",
            ] {
                if self.figures.get(key).is_some() {
                    p.push(format!("figures.{key}"), "a cpu has no shared memory");
                }
            }
        }
        for (i, m) in self.measured.iter().enumerate() {
            let field = format!("measured[{i}]");
            if m.what.trim().is_empty() {
                p.push(format!("{field}.what"), "must not be empty");
            }
            if m.unit.trim().is_empty() {
                p.push(format!("{field}.unit"), "must not be empty");
            }
            if !(m.value.is_finite() && m.value > 0.0) {
                p.push(
                    format!("{field}.value"),
                    format!("must be a positive number, got {}", m.value),
                );
            }
            if !has_date(&m.source) {
                p.push(
                    format!("{field}.source"),
                    "must say where and when it was measured (a YYYY-MM-DD date)",
                );
            }
        }
        p.into_list()
    }

    /// True when `query` names this device (its name or an alias, after [`normalize_name`]).
    pub fn answers_to(&self, query: &str) -> bool {
        let q = normalize_name(query);
        self.name == q || self.aliases.iter().any(|a| normalize_name(a) == q)
    }
}

fn validate_figure(p: &mut Problems, field: &str, meta: &FigureMeta, f: &Figure) {
    let v = f.value;
    if !v.is_finite() {
        p.push(format!("{field}.value"), "must be a finite number");
    } else if v < meta.min || v > meta.max {
        p.push(
            format!("{field}.value"),
            format!(
                "{v} is outside the plausible range {}..={}",
                num(meta.min),
                num(meta.max)
            ),
        );
    } else if meta.integer && v.fract() != 0.0 {
        p.push(format!("{field}.value"), format!("must be a whole number, got {v}"));
    }
    let power_of_two = matches!(meta.key, "simd_width" | "vector_bits" | "cache_line_bytes");
    if power_of_two && v.is_finite() && v >= 1.0 && v.fract() == 0.0 && !(v as u64).is_power_of_two() {
        p.push(format!("{field}.value"), format!("must be a power of two, got {v}"));
    }
    if f.source.trim().is_empty() {
        p.push(format!("{field}.source"), "must say where the figure comes from");
    } else if f.basis == Basis::Measured && !has_date(&f.source) {
        p.push(
            format!("{field}.source"),
            "a measured figure must say where and when (a YYYY-MM-DD date)",
        );
    }
    if let Some(note) = &f.note {
        if note.trim().is_empty() {
            p.push(format!("{field}.note"), "must not be empty when given");
        }
    }
}
