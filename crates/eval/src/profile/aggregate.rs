//! The launches weighed by duration: every launch together, and the kernels that took the most
//! GPU time.

use super::{KernelMetrics, KernelProfile, Launch, Stall};
use super::{ACHIEVED_OCCUPANCY, COMPUTE_PCT, DRAM_PCT, DURATION, L2_HIT_RATE, MEMORY_PCT, THEORETICAL_OCCUPANCY};
use super::{STALL_PREFIX, STALL_SUFFIX, TENSOR_PREFIX, TENSOR_SUFFIX, TOP_KERNELS, TOP_STALLS};

/// Weighted mean of `value(launch)` over the launches that have it, weighted by duration (by
/// count where no launch has a positive duration).
fn weighted(launches: &[&Launch], value: impl Fn(&Launch) -> Option<f64>) -> Option<f64> {
    let by_time = launches
        .iter()
        .any(|l| l.metrics.get(DURATION).is_some_and(|d| *d > 0.0));
    let (mut sum, mut weight) = (0.0, 0.0);
    for l in launches {
        if let Some(v) = value(l) {
            let w = if by_time {
                l.metrics.get(DURATION).copied().unwrap_or(0.0)
            } else {
                1.0
            };
            sum += v * w;
            weight += w;
        }
    }
    (weight > 0.0).then(|| sum / weight)
}

fn metrics_of(launches: &[&Launch], calls: u32) -> KernelMetrics {
    let get = |name: &'static str| weighted(launches, |l| l.metrics.get(name).copied());
    let tensor = weighted(launches, |l| {
        l.metrics
            .iter()
            .filter(|(k, _)| k.starts_with(TENSOR_PREFIX) && k.ends_with(TENSOR_SUFFIX))
            .map(|(_, v)| *v)
            .reduce(f64::max)
    });
    let mut reasons: Vec<String> = launches
        .iter()
        .flat_map(|l| l.metrics.keys())
        .filter_map(|k| k.strip_prefix(STALL_PREFIX)?.strip_suffix(STALL_SUFFIX))
        .filter(|r| *r != "selected")
        .map(str::to_string)
        .collect();
    reasons.sort();
    reasons.dedup();
    let mut stalls: Vec<Stall> = reasons
        .into_iter()
        .filter_map(|r| {
            let key = format!("{STALL_PREFIX}{r}{STALL_SUFFIX}");
            let v = weighted(launches, |l| l.metrics.get(&key).copied())?;
            Some(Stall {
                reason: r,
                cycles_per_instruction: v,
                share_pct: 0.0,
            })
        })
        .collect();
    let stalled: f64 = stalls.iter().map(|s| s.cycles_per_instruction).sum();
    for s in &mut stalls {
        s.share_pct = if stalled > 0.0 {
            100.0 * s.cycles_per_instruction / stalled
        } else {
            0.0
        };
    }
    stalls.sort_by(|a, b| {
        b.cycles_per_instruction
            .total_cmp(&a.cycles_per_instruction)
            .then(a.reason.cmp(&b.reason))
    });
    stalls.retain(|s| s.cycles_per_instruction > 0.0);
    stalls.truncate(TOP_STALLS);
    let total_ns: f64 = launches.iter().filter_map(|l| l.metrics.get(DURATION)).sum();
    KernelMetrics {
        duration_ns: total_ns / f64::from(calls.max(1)),
        memory_throughput_pct: get(MEMORY_PCT),
        dram_throughput_pct: DRAM_PCT.iter().find_map(|m| get(m)),
        compute_throughput_pct: get(COMPUTE_PCT),
        achieved_occupancy_pct: get(ACHIEVED_OCCUPANCY),
        theoretical_occupancy_pct: get(THEORETICAL_OCCUPANCY),
        l2_hit_rate_pct: get(L2_HIT_RATE),
        tensor_pipe_pct: tensor,
        stalls,
    }
}

/// Every launch together (duration-weighted), the top kernels by total duration, and the number
/// of distinct kernels; `None` for no launch. Durations are per candidate call (`calls`).
pub fn aggregate(launches: &[Launch], calls: u32) -> Option<(KernelMetrics, Vec<KernelProfile>, usize)> {
    if launches.is_empty() {
        return None;
    }
    let all: Vec<&Launch> = launches.iter().collect();
    let total = metrics_of(&all, calls);
    let mut names: Vec<&str> = Vec::new();
    for l in launches {
        if !names.contains(&l.name.as_str()) {
            names.push(&l.name);
        }
    }
    let mut kernels: Vec<KernelProfile> = names
        .iter()
        .map(|name| {
            let mine: Vec<&Launch> = launches.iter().filter(|l| l.name == *name).collect();
            let metrics = metrics_of(&mine, calls);
            KernelProfile {
                name: name.to_string(),
                launches: mine.len(),
                share_pct: if total.duration_ns > 0.0 {
                    100.0 * metrics.duration_ns / total.duration_ns
                } else {
                    0.0
                },
                metrics,
            }
        })
        .collect();
    kernels.sort_by(|a, b| b.metrics.duration_ns.total_cmp(&a.metrics.duration_ns));
    let count = kernels.len();
    kernels.truncate(TOP_KERNELS);
    Some((total, kernels, count))
}
