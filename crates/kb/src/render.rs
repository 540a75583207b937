//! Markdown renderings of a device: the compact spec prompts get, and the sourced listing
//! `ksearch kb show` prints.

use crate::hardware::{Basis, Figure, HardwareSpec, FIGURE_META};
use crate::kinds::{DeviceKind, TargetKind};
use std::fmt::Write as _;

impl HardwareSpec {
    /// The device's spec as compact markdown, for prompts. Deterministic.
    pub fn to_markdown(&self) -> String {
        let f = &self.figures;
        let mut out = String::new();
        let _ = writeln!(out, "## Target hardware: {} (`{}`)", self.display_name, self.name);
        let targets: Vec<&str> = self.targets.iter().map(|t| t.as_str()).collect();
        let _ = writeln!(
            out,
            "- {} {}, arch {}; kernels in: {}",
            self.vendor,
            self.kind,
            self.arch,
            targets.join(", ")
        );

        let mut memory = Vec::new();
        if let Some(size) = &f.memory_gb {
            let kind = self.memory_type.as_deref().map(|t| format!(" {t}")).unwrap_or_default();
            memory.push(format!("{}{}", value_unit(size, "GB"), kind) + tag(size));
        }
        if let Some(bw) = &f.memory_bandwidth_gbs {
            memory.push(format!("bandwidth {}{}", value_unit(bw, "GB/s"), tag(bw)));
        }
        if !memory.is_empty() {
            let _ = writeln!(out, "- memory: {}", memory.join(", "));
        }

        let mut compute = Vec::new();
        if let Some(x) = &f.fp32_tflops {
            compute.push(format!("FP32 {}{}", value_unit(x, "TFLOP/s"), tag(x)));
        }
        let tensor: Vec<(&str, &Figure)> = [
            ("TF32", &f.tensor_tf32_tflops),
            ("FP16/BF16", &f.tensor_fp16_bf16_tflops),
            ("FP8", &f.tensor_fp8_tflops),
        ]
        .into_iter()
        .filter_map(|(l, x)| x.as_ref().map(|x| (l, x)))
        .collect();
        if !tensor.is_empty() {
            compute.push(format!("tensor dense {}", group(&tensor, "TFLOP/s")));
        }
        if !compute.is_empty() {
            let _ = writeln!(out, "- compute: {}", compute.join("; "));
        }
        if let Some(m) = &self.matrix_units {
            let _ = writeln!(out, "- matrix units: {}", m.trim());
        }

        if let Some(bw) = &f.memory_bandwidth_gbs {
            let ridges: Vec<String> = [
                ("FP32", &f.fp32_tflops),
                ("tensor FP16/BF16", &f.tensor_fp16_bf16_tflops),
            ]
            .into_iter()
            .filter_map(|(l, x)| x.as_ref().map(|x| format!("{l} {}", ridge(x.value, bw.value))))
            .collect();
            if !ridges.is_empty() {
                let _ = writeln!(out, "- ridge point (peak FLOP per DRAM byte): {}", ridges.join(", "));
            }
        }

        if !self.measured.is_empty() {
            let items: Vec<String> = self
                .measured
                .iter()
                .map(|m| format!("{} ~{} {}", m.what, num(m.value), m.unit))
                .collect();
            let _ = writeln!(out, "- measured on this device: {}", items.join("; "));
        }

        let unit = &self.compute_unit;
        let mut par = Vec::new();
        if let Some(n) = &f.compute_units {
            let plural = if n.value == 1.0 { "" } else { "s" };
            par.push(format!("{}{} {unit}{plural}{}", prefix(n), num(n.value), tag(n)));
        }
        if let Some(w) = &f.simd_width {
            par.push(match self.kind {
                DeviceKind::Gpu => format!("warp/SIMD-group {} threads{}", num(w.value), tag(w)),
                DeviceKind::Cpu => format!("{} fp32 lanes per vector{}", num(w.value), tag(w)),
            });
        }
        if let Some(v) = &f.vector_bits {
            par.push(format!("vector registers {}-bit{}", num(v.value), tag(v)));
        }
        let threads: Vec<String> = [
            (&f.max_threads_per_block, "block".to_string()),
            (&f.max_threads_per_unit, unit.clone()),
        ]
        .into_iter()
        .filter_map(|(x, per)| x.as_ref().map(|x| format!("{}/{per}{}", num(x.value), tag(x))))
        .collect();
        if !threads.is_empty() {
            par.push(format!("max threads {}", threads.join(", ")));
        }
        let regs: Vec<String> = [
            (&f.registers_per_thread_max, "thread".to_string()),
            (&f.registers_per_unit, unit.clone()),
        ]
        .into_iter()
        .filter_map(|(x, per)| x.as_ref().map(|x| format!("{}/{per}{}", num(x.value), tag(x))))
        .collect();
        if !regs.is_empty() {
            par.push(format!("32-bit registers {}", regs.join(", ")));
        }
        if !par.is_empty() {
            let _ = writeln!(out, "- {}", par.join("; "));
        }

        let mut mem = Vec::new();
        let shared_name = if self.targets.contains(&TargetKind::Metal) {
            "threadgroup memory"
        } else {
            "shared memory"
        };
        // Default and maximum per block are one figure when there is no opt-in (Apple GPUs).
        let no_opt_in = matches!((&f.shared_mem_per_block_kb, &f.shared_mem_per_block_max_kb),
            (Some(d), Some(m)) if d.value == m.value);
        let (default_label, max) = if no_opt_in {
            ("/block (no opt-in)", &None)
        } else {
            ("/block default", &f.shared_mem_per_block_max_kb)
        };
        let shared: Vec<String> = [
            (&f.shared_mem_per_block_kb, default_label.to_string()),
            (max, "/block max (opt-in)".to_string()),
            (&f.shared_mem_per_unit_kb, format!("/{unit}")),
        ]
        .into_iter()
        .filter_map(|(x, per)| x.as_ref().map(|x| format!("{}{per}{}", value_unit(x, "KB"), tag(x))))
        .collect();
        if !shared.is_empty() {
            mem.push(format!("{shared_name} {}", shared.join(", ")));
        }
        if let Some(x) = &f.l1_kb {
            mem.push(format!("L1d {}/{unit}{}", value_unit(x, "KB"), tag(x)));
        }
        if let Some(x) = &f.l2_per_core_kb {
            mem.push(format!("L2 {}/{unit}{}", value_unit(x, "KB"), tag(x)));
        }
        if let Some(x) = &f.l2_mb {
            mem.push(format!("L2 {}{}", value_unit(x, "MB"), tag(x)));
        }
        if let Some(x) = &f.l3_mb {
            mem.push(format!("L3 {} shared{}", value_unit(x, "MB"), tag(x)));
        }
        if let Some(x) = &f.cache_line_bytes {
            mem.push(format!("cache line {}{}", value_unit(x, "B"), tag(x)));
        }
        if !mem.is_empty() {
            let _ = writeln!(out, "- {}", mem.join("; "));
        }
        for note in &self.notes {
            let _ = writeln!(out, "- {}", note.trim());
        }
        out
    }

    /// Every figure with its basis and source, as markdown (for `ksearch kb show`, not prompts).
    pub fn sources_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "## Sources: {} (`{}`)", self.display_name, self.name);
        for meta in FIGURE_META {
            if let Some(f) = self.figures.get(meta.key) {
                let unit = if meta.unit.is_empty() {
                    String::new()
                } else {
                    format!(" {}", meta.unit)
                };
                let largest = if f.up_to { ", largest configuration" } else { "" };
                let _ = write!(
                    out,
                    "- {}: {}{unit} ({}{largest}): {}",
                    meta.label,
                    num(f.value),
                    f.basis.as_str(),
                    f.source.trim()
                );
                if let Some(note) = &f.note {
                    let _ = write!(out, "; note: {}", note.trim());
                }
                out.push('\n');
            }
        }
        for m in &self.measured {
            let _ = writeln!(
                out,
                "- measured {}: {} {}: {}",
                m.what,
                num(m.value),
                m.unit,
                m.source.trim()
            );
        }
        let missing: Vec<&str> = FIGURE_META
            .iter()
            .filter(|m| self.figures.get(m.key).is_none())
            .map(|m| m.key)
            .collect();
        if !missing.is_empty() {
            let _ = writeln!(
                out,
                "- not recorded (no reliable source, or not applicable): {}",
                missing.join(", ")
            );
        }
        out
    }
}

/// Numbers as the data wrote them: `4800`, `494.5`, `0.55` (shortest round-trip form).
pub(crate) fn num(v: f64) -> String {
    format!("{v}")
}

fn value_unit(f: &Figure, unit: &str) -> String {
    format!("{}{} {unit}", prefix(f), num(f.value))
}

fn prefix(f: &Figure) -> &'static str {
    if f.up_to {
        "up to "
    } else if f.basis == Basis::Typical {
        "~"
    } else {
        ""
    }
}

fn tag(f: &Figure) -> &'static str {
    match f.basis {
        Basis::VendorPeak => " (peak)",
        Basis::Typical => " (typical)",
        Basis::Derived => " (derived)",
        Basis::VendorSpec | Basis::Measured => "",
    }
}

/// `TF32 494.5, FP16/BF16 989.5 TFLOP/s (peak)`: one unit and, when all share it, one tag.
fn group(items: &[(&str, &Figure)], unit: &str) -> String {
    let same = items.windows(2).all(|w| w[0].1.basis == w[1].1.basis);
    let parts: Vec<String> = items
        .iter()
        .map(|(label, f)| {
            let t = if same { "" } else { tag(f) };
            format!("{label} {}{t}", num(f.value))
        })
        .collect();
    let t = if same { tag(items[0].1) } else { "" };
    format!("{} {unit}{t}", parts.join(", "))
}

/// FLOP per byte at which a kernel stops being memory-bound: TFLOP/s over GB/s.
fn ridge(tflops: f64, gbs: f64) -> String {
    let r = tflops * 1000.0 / gbs;
    if r >= 10.0 {
        format!("{}", r.round())
    } else {
        format!("{:.1}", r)
    }
}
