//! The roofline sanity bound (docs/protocol.md, roofline bound): a candidate that moves more bytes or
//! computes more flops per second than the evaluated device can measured something other than
//! its own work, and its timing is flagged (`Timing.suspicious`), not trusted.
//!
//! The bound is the device's own: its peak memory bandwidth and FLOP rate from the knowledge
//! base's hardware entry (kb/hardware/*.toml), found by the name the harness reported in
//! `done.environment.device.name` (`NVIDIA H200` from CUDA's device properties, `Apple M2 Max`
//! from MLX's device_info), with a margin of [`MARGIN`]. Only a device the knowledge base does
//! not know (or a figure its entry lacks) gets a generic bound, and the flag says which bound it
//! was measured against.

use ksearch_kb::{DeviceKind, HardwareSpec, Kb};
use std::sync::OnceLock;

/// How far above the device's peak a rate may be before it is flagged. The peaks are the
/// vendor's theoretical figures, which honest kernels do not reach (the H200 copies at 4.3 TB/s
/// of its 4.8, bench/results/gpu-suite.md); the 10% covers what could still push an honest
/// median over them: the datasheet's rounding (4.8 TB/s for HBM3e that some list at 4.9), and the
/// timer's resolution, about 0.5 us for CUDA events (docs/protocol.md), which is 5% of a 10 us
/// kernel, and shorter kernels cannot stream near peak from memory anyway (launch and DRAM
/// latency dominate them). The byte bound holds on a GPU because the harness flushes the
/// last-level cache before every timed call (a buffer of twice the L2 read and written, 256 MiB
/// on MLX): inputs come from memory, and the flush leaves the cache full of dirty lines, so
/// every line the candidate writes evicts one that goes back to memory inside the timed call.
pub(crate) const MARGIN: f64 = 1.1;

/// No GPU streams 10 TB/s from its memory (H200: 4.8, B200: 8) or computes 10 PFLOP/s dense
/// (B200 FP8: 4.5); for a GPU the knowledge base does not know.
const GENERIC_GPU_BYTES: f64 = 1e13;
const GENERIC_GPU_FLOPS: f64 = 1e16;
/// No CPU sustains 50 TFLOP/s of fp32; caches make a byte bound meaningless on a CPU (the
/// harness flushes no CPU cache), so a CPU has none.
const GENERIC_CPU_FLOPS: f64 = 5e13;

/// One limit and what it is, in words, for the flag.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limit {
    /// Per second, the margin included.
    pub value: f64,
    pub what: String,
}

/// The limits an evaluation's rates are checked against.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Bound {
    pub bytes_per_s: Option<Limit>,
    pub flops_per_s: Option<Limit>,
}

impl Bound {
    /// Why a rate (bytes/s, flop/s at the candidate's median) cannot be trusted, if it cannot.
    pub(crate) fn check(&self, bytes_per_s: Option<f64>, flops_per_s: Option<f64>) -> Option<String> {
        if let (Some(b), Some(l)) = (bytes_per_s, &self.bytes_per_s) {
            if b > l.value {
                return Some(format!(
                    "moves {:.0} GB/s, above {:.0} GB/s ({}): the timing cannot be trusted",
                    b / 1e9,
                    l.value / 1e9,
                    l.what
                ));
            }
        }
        if let (Some(f), Some(l)) = (flops_per_s, &self.flops_per_s) {
            if f > l.value {
                return Some(format!(
                    "computes {:.0} GFLOP/s, above {:.0} GFLOP/s ({}): the timing cannot be trusted",
                    f / 1e9,
                    l.value / 1e9,
                    l.what
                ));
            }
        }
        None
    }
}

fn builtin_kb() -> Result<&'static Kb, &'static str> {
    static KB: OnceLock<Result<Kb, String>> = OnceLock::new();
    KB.get_or_init(|| Kb::builtin().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(String::as_str)
}

/// The bound for `device` (the evaluation's device string: `cpu`, `cuda:N`, `mlx:gpu`,
/// `mlx:cpu`), whose name the harness reported in `environment` (the `done` event's).
pub(crate) fn bound_for(device: &str, environment: &serde_json::Value) -> Bound {
    let on_gpu = device == "cuda" || device.starts_with("cuda:") || device == "mlx:gpu";
    if !on_gpu {
        if device == "cpu" || device == "mlx:cpu" {
            return Bound {
                bytes_per_s: None,
                flops_per_s: Some(Limit {
                    value: GENERIC_CPU_FLOPS,
                    what: "the generic bound for a CPU".to_string(),
                }),
            };
        }
        return Bound::default();
    }
    let name = environment
        .pointer("/device/name")
        .and_then(|n| n.as_str())
        .map(str::trim)
        .filter(|n| !n.is_empty());
    let spec = match (name, builtin_kb()) {
        (Some(n), Ok(kb)) => kb.hardware(n).ok().filter(|s| s.kind == DeviceKind::Gpu),
        _ => None,
    };
    match spec {
        Some(spec) => gpu_bound(spec),
        None => {
            let why = match (name, builtin_kb()) {
                (None, _) => "the harness reported no device name".to_string(),
                (Some(n), Ok(_)) => format!("the knowledge base has no entry for '{n}'"),
                (Some(n), Err(e)) => format!("'{n}': the knowledge base did not load: {e}"),
            };
            generic_gpu(&why)
        }
    }
}

fn generic_gpu(why: &str) -> Bound {
    Bound {
        bytes_per_s: Some(Limit {
            value: GENERIC_GPU_BYTES,
            what: format!("the generic bound for any GPU, as {why}"),
        }),
        flops_per_s: Some(Limit {
            value: GENERIC_GPU_FLOPS,
            what: format!("the generic bound for any GPU, as {why}"),
        }),
    }
}

/// The device's peaks times [`MARGIN`]. The FLOP peak is the highest dense rate the entry
/// lists (FP32, or its tensor units at TF32, FP16/BF16, FP8): the task's flop count does not say
/// which units a candidate may use, and a bound must hold for all of them.
pub(crate) fn gpu_bound(spec: &HardwareSpec) -> Bound {
    let entry = format!("{}, knowledge-base entry {}", spec.display_name, spec.name);
    let f = &spec.figures;
    let bytes_per_s = match &f.memory_bandwidth_gbs {
        Some(bw) => Limit {
            value: bw.value * 1e9 * MARGIN,
            what: format!(
                "{MARGIN}x the {:.0} GB/s peak memory bandwidth of the {entry}",
                bw.value
            ),
        },
        None => Limit {
            value: GENERIC_GPU_BYTES,
            what: format!("the generic bound for any GPU, as the {entry} has no memory bandwidth"),
        },
    };
    let peak = [
        ("FP32", &f.fp32_tflops),
        ("tensor TF32 dense", &f.tensor_tf32_tflops),
        ("tensor FP16/BF16 dense", &f.tensor_fp16_bf16_tflops),
        ("tensor FP8 dense", &f.tensor_fp8_tflops),
    ]
    .into_iter()
    .filter_map(|(label, fig)| fig.as_ref().map(|fig| (label, fig.value)))
    .max_by(|a, b| a.1.total_cmp(&b.1));
    let flops_per_s = match peak {
        Some((label, tflops)) => Limit {
            value: tflops * 1e12 * MARGIN,
            what: format!("{MARGIN}x the {tflops} TFLOP/s peak ({label}) of the {entry}"),
        },
        None => Limit {
            value: GENERIC_GPU_FLOPS,
            what: format!("the generic bound for any GPU, as the {entry} has no FLOP rate"),
        },
    };
    Bound {
        bytes_per_s: Some(bytes_per_s),
        flops_per_s: Some(flops_per_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named(name: &str) -> serde_json::Value {
        json!({"device": {"name": name}})
    }

    #[test]
    fn gpus_are_bounded_by_their_own_entry() {
        let h200 = bound_for("cuda:0", &named("NVIDIA H200"));
        let bytes = h200.bytes_per_s.clone().unwrap();
        assert!((bytes.value - 4800e9 * MARGIN).abs() < 1.0, "{bytes:?}");
        assert!(
            bytes
                .what
                .contains("4800 GB/s peak memory bandwidth of the NVIDIA H200"),
            "{}",
            bytes.what
        );
        // The highest dense rate: FP8 on the tensor cores.
        let flops = h200.flops_per_s.unwrap();
        assert!((flops.value - 1979e12 * MARGIN).abs() < 1e3, "{flops:?}");
        assert!(flops.what.contains("tensor FP8 dense"), "{}", flops.what);
        // H100 as PyTorch names it; an A100 (no FP8) by its FP16 tensor rate.
        let h100 = bound_for("cuda:1", &named("NVIDIA H100 80GB HBM3"));
        assert!(h100.bytes_per_s.unwrap().what.contains("h100-sxm"));
        let a100 = bound_for("cuda", &named("NVIDIA A100-SXM4-80GB"));
        assert!(a100.flops_per_s.unwrap().what.contains("tensor FP16/BF16 dense"));
        // MLX's name of an Apple GPU; Apple publishes no FLOP rate, so that bound is generic.
        let m2 = bound_for("mlx:gpu", &named("Apple M2 Max"));
        assert!((m2.bytes_per_s.unwrap().value - 400e9 * MARGIN).abs() < 1.0);
        let flops = m2.flops_per_s.unwrap();
        assert_eq!(flops.value, GENERIC_GPU_FLOPS);
        assert!(flops.what.contains("has no FLOP rate"), "{}", flops.what);
    }

    #[test]
    fn unknown_devices_get_the_generic_bound_and_say_so() {
        let pcie = bound_for("cuda:0", &named("NVIDIA H100 PCIe"));
        let bytes = pcie.bytes_per_s.unwrap();
        assert_eq!(bytes.value, GENERIC_GPU_BYTES);
        assert!(bytes.what.contains("no entry for 'NVIDIA H100 PCIe'"), "{}", bytes.what);
        let nameless = bound_for("mlx:gpu", &json!({"device": {"name": null}}));
        assert!(nameless.bytes_per_s.unwrap().what.contains("reported no device name"));
        // A CPU: no byte bound (caches), a generic FLOP bound; whatever it is called.
        let cpu = bound_for("cpu", &named("NVIDIA H200"));
        assert_eq!(cpu.bytes_per_s, None);
        assert_eq!(cpu.flops_per_s.unwrap().value, GENERIC_CPU_FLOPS);
        assert_eq!(bound_for("mlx:cpu", &serde_json::Value::Null).bytes_per_s, None);
    }

    #[test]
    fn the_flag_names_the_rate_and_the_bound() {
        let h200 = bound_for("cuda:0", &named("NVIDIA H200"));
        assert_eq!(h200.check(Some(3e12), Some(1e12)), None);
        let why = h200.check(Some(7e12), None).unwrap();
        assert!(
            why.starts_with("moves 7000 GB/s, above 5280 GB/s (1.1x the 4800 GB/s"),
            "{why}"
        );
        let why = h200.check(None, Some(3e15)).unwrap();
        assert!(
            why.starts_with("computes 3000000 GFLOP/s, above 2176900 GFLOP/s"),
            "{why}"
        );
    }
}
