//! A profile in a few lines for the planner's prompt.

use super::{Profile, ProfileStatus, Stall};

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "n/a".to_string())
}

fn duration(ns: f64) -> String {
    match ns {
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.1} us", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}

fn stall_text(stalls: &[Stall], n: usize) -> String {
    stalls
        .iter()
        .take(n)
        .map(|s| format!("{} {:.0}%", s.reason, s.share_pct))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A few lines for the planner's prompt: what bounds the kernel (memory or compute throughput,
/// occupancy, stalls, L2, tensor pipes), for the whole call and its top kernels; one line when
/// there is no profile.
pub fn summary(p: &Profile) -> String {
    let Some(total) = p.total.as_ref().filter(|_| p.status == ProfileStatus::Profiled) else {
        let why = p.note.as_deref().unwrap_or("no profile");
        return format!("Profile: none ({})", why.strip_prefix("not profiled: ").unwrap_or(why));
    };
    let tool = p.tool.as_deref().unwrap_or("ncu");
    let workload = p.workload.as_deref().unwrap_or("?");
    let kernels = match p.kernel_count {
        1 => "1 kernel".to_string(),
        n => format!("{n} kernels"),
    };
    let mut out = vec![format!(
        "Profile ({tool}, workload {workload}, {kernels}, {} of GPU time per call under ncu):",
        duration(total.duration_ns)
    )];
    let dram = total
        .dram_throughput_pct
        .map(|d| format!(" (DRAM {d:.0}%)"))
        .unwrap_or_default();
    out.push(format!(
        "- throughput, % of peak: memory {}{dram}, compute (SM) {}; L2 hit rate {}; tensor pipes {}",
        pct(total.memory_throughput_pct),
        pct(total.compute_throughput_pct),
        pct(total.l2_hit_rate_pct),
        pct(total.tensor_pipe_pct),
    ));
    let theoretical = total
        .theoretical_occupancy_pct
        .map(|t| format!(" (theoretical {t:.0}%)"))
        .unwrap_or_default();
    let stalls = match total.stalls.is_empty() {
        true => "n/a".to_string(),
        false => stall_text(&total.stalls, 3),
    };
    out.push(format!(
        "- achieved occupancy {}{theoretical}; top warp stalls (share of stalled cycles): {stalls}",
        pct(total.achieved_occupancy_pct)
    ));
    if p.kernel_count > 1 {
        for k in p.kernels.iter().take(3) {
            out.push(format!(
                "- kernel {} ({}x): {:.0}% of GPU time, memory {}, compute {}, occupancy {}{}",
                k.name,
                k.launches,
                k.share_pct,
                pct(k.metrics.memory_throughput_pct),
                pct(k.metrics.compute_throughput_pct),
                pct(k.metrics.achieved_occupancy_pct),
                match k.metrics.stalls.first() {
                    Some(s) => format!(", mostly stalled on {}", s.reason),
                    None => String::new(),
                }
            ));
        }
    }
    out.join("\n")
}
