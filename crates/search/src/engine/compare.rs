//! "Faster than" between two measured candidates: the one rule the whole engine decides with
//! (docs/engine.md, "Comparing candidates").
//!
//! The paired rule ([`CompareRule::Paired`], every run started since it exists) compares the two
//! candidates' own times on the same workloads: per workload the ratio of their medians, and the
//! geometric mean of those ratios is the gain. The reference's time plays no part, so a reference
//! that timed 31 ms in one evaluation and 46 ms in another cannot make a faster kernel look
//! slower (or a slower one faster). The noise allowed is the mean over the paired workloads of
//! the larger relative IQR (IQR / median) of the two, and at least [`MIN_NOISE`]: `a` is faster
//! than `b` when the gain exceeds `1 + noise`, slower when it is below `1 / (1 + noise)`, and
//! otherwise the two are within the noise of each other (neither beats the other). Workloads
//! are paired by uuid; when none pair (a summary without per-workload times), the speedups over
//! the reference are compared instead, with the larger relative noise of the two.
//!
//! The legacy rule ([`CompareRule::Speedup`]) is what runs recorded before the paired rule used,
//! kept so that their event logs replay to the same decisions: speedups over the reference, the
//! larger relative noise (worst workload) of the two, no floor.

use super::protocol::EvalSummary;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The smallest relative difference the paired rule ever calls a difference: 1%.
pub const MIN_NOISE: f64 = 0.01;

/// How the engine decides "faster than" (`EngineConfig::compare`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompareRule {
    /// Speedups over the reference, beyond the larger worst-workload noise of the two: the rule
    /// of runs recorded before `paired` (a `started` event without the field means this).
    Speedup,
    /// The candidates' own per-workload times, paired by workload (the module docs).
    #[default]
    Paired,
}

impl CompareRule {
    /// What a `started` event without the field means: the rule those runs were made with.
    pub fn recorded_before_paired() -> CompareRule {
        CompareRule::Speedup
    }

    /// The spelling of the `started` event and the settings: `speedup`, `paired`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareRule::Speedup => "speedup",
            CompareRule::Paired => "paired",
        }
    }
}

/// Which way a comparison came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// `a` is faster than `b` beyond the noise.
    Faster,
    /// `a` is slower than `b` beyond the noise.
    Slower,
    /// Within the noise of each other.
    Within,
}

/// `a` measured against `b`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Comparison {
    /// How many times faster `a` is than `b` (above 1: `a` is faster): the geometric mean over
    /// the paired workloads of `b`'s median / `a`'s median, or the ratio of the speedups.
    pub gain: f64,
    /// The relative difference the noise allows (0.03: a gain must exceed 1.03).
    pub noise: f64,
    /// Workloads paired; 0 when the speedups were compared.
    pub paired: usize,
    /// The verdict: `gain` beyond the noise either way, or within it.
    pub order: Order,
}

impl Comparison {
    /// `a` beats `b` beyond the noise.
    pub fn faster(&self) -> bool {
        self.order == Order::Faster
    }

    /// One of the two beats the other beyond the noise.
    pub fn significant(&self) -> bool {
        self.order != Order::Within
    }

    /// `1.48x faster than candidate 4 (4 workloads paired, noise 3.1%)`, or `within the noise
    /// of ...`.
    pub fn describe(&self, other: &str) -> String {
        let basis = if self.paired > 0 {
            format!(
                "{} workload{} paired, noise {:.1}%",
                self.paired,
                if self.paired == 1 { "" } else { "s" },
                self.noise * 100.0
            )
        } else {
            format!("by speedup, noise {:.1}%", self.noise * 100.0)
        };
        match self.order {
            Order::Faster => format!("{:.2}x faster than {other} ({basis})", self.gain),
            Order::Slower => format!("{:.2}x slower than {other} ({basis})", 1.0 / self.gain),
            Order::Within => format!("within the noise of {other}: {:.3}x ({basis})", self.gain),
        }
    }
}

/// `a` against `b` by `rule`; `None` unless both passed (a suspicious timing did not pass).
pub fn compare(rule: CompareRule, a: &EvalSummary, b: &EvalSummary) -> Option<Comparison> {
    if !a.passed() || !b.passed() {
        return None;
    }
    match rule {
        CompareRule::Speedup => by_speedup(a, b, 0.0),
        CompareRule::Paired => paired(a, b).or_else(|| by_speedup(a, b, MIN_NOISE)),
    }
}

/// Whether `a` beats `b` by `rule`: `a` passed and is faster beyond the noise. Anything that
/// passed beats nothing (or a failure); nothing beats anything.
pub fn beats_by(rule: CompareRule, a: &EvalSummary, b: Option<&EvalSummary>) -> bool {
    if !a.passed() {
        return false;
    }
    match b.filter(|b| b.passed()) {
        None => true,
        Some(b) => compare(rule, a, b).is_some_and(|c| c.faster()),
    }
}

/// The speedup rule (also the paired rule's fallback, with a floor).
fn by_speedup(a: &EvalSummary, b: &EvalSummary, floor: f64) -> Option<Comparison> {
    let (sa, sb) = (a.speedup?, b.speedup?);
    if !(sa > 0.0 && sb > 0.0) {
        return None;
    }
    let noise = a
        .relative_noise
        .unwrap_or(0.0)
        .max(b.relative_noise.unwrap_or(0.0))
        .max(floor);
    let gain = sa / sb;
    Some(Comparison {
        gain,
        noise,
        paired: 0,
        order: order(gain, noise),
    })
}

fn order(gain: f64, noise: f64) -> Order {
    if gain > 1.0 + noise {
        Order::Faster
    } else if gain * (1.0 + noise) < 1.0 {
        Order::Slower
    } else {
        Order::Within
    }
}

/// Per workload uuid: the median and the relative IQR, of the workloads with a usable median.
fn times(s: &EvalSummary) -> HashMap<String, (f64, f64)> {
    s.workloads
        .iter()
        .filter_map(|w| {
            let m = w.median_ns.filter(|m| m.is_finite() && *m > 0.0)?;
            let iqr = w.iqr_ns.filter(|i| i.is_finite() && *i >= 0.0).unwrap_or(0.0);
            Some((w.uuid.clone(), (m, iqr / m)))
        })
        .collect()
}

/// The workloads both measured, in `a`'s order, each uuid once: (a's median, a's relative IQR,
/// b's median, b's relative IQR).
fn pairs(a: &EvalSummary, b: &EvalSummary) -> Vec<(f64, f64, f64, f64)> {
    let (at, bt) = (times(a), times(b));
    let mut seen = std::collections::HashSet::new();
    a.workloads
        .iter()
        .filter(|w| seen.insert(w.uuid.as_str()))
        .filter_map(|w| {
            let (&(ma, na), &(mb, nb)) = (at.get(&w.uuid)?, bt.get(&w.uuid)?);
            Some((ma, na, mb, nb))
        })
        .collect()
}

/// `exp(mean ln(1 + x)) - 1`, at least [`MIN_NOISE`]: how the paired rule averages relative IQRs.
fn mean_noise(relative_iqrs: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = relative_iqrs.fold((0.0, 0usize), |(s, n), x| (s + (1.0 + x).ln(), n + 1));
    (n > 0).then(|| ((sum / n as f64).exp() - 1.0).max(MIN_NOISE))
}

/// The paired rule over the workloads both measured; `None` when none pair.
fn paired(a: &EvalSummary, b: &EvalSummary) -> Option<Comparison> {
    let pairs = pairs(a, b);
    let n = pairs.len();
    let gain = (pairs.iter().map(|(ma, _, mb, _)| (mb / ma).ln()).sum::<f64>() / n.max(1) as f64).exp();
    let noise = mean_noise(pairs.iter().map(|(_, na, _, nb)| na.max(*nb)))?;
    Some(Comparison {
        gain,
        noise,
        paired: n,
        order: order(gain, noise),
    })
}

/// How noisy a measurement is by itself: its relative IQRs averaged over its workloads as the
/// paired rule averages them (at least [`MIN_NOISE`]); `None` without per-workload times.
pub fn own_noise(s: &EvalSummary) -> Option<f64> {
    mean_noise(times(s).into_values().map(|(_, noise)| noise))
}

/// Whether only `b`'s noise keeps `a` from beating it, under the paired rule: both passed, the
/// two are within the noise of each other, and `a`'s gain over `b` exceeds the noise of `a`'s
/// own times on the paired workloads. Measuring `b` again may then settle it; measuring `a`
/// again would not.
pub fn held_back_by_noise_of(a: &EvalSummary, b: &EvalSummary) -> bool {
    let Some(c) = compare(CompareRule::Paired, a, b) else {
        return false;
    };
    if c.order != Order::Within || c.paired == 0 {
        return false;
    }
    let pairs = pairs(a, b);
    mean_noise(pairs.iter().map(|(_, na, _, _)| *na)).is_some_and(|own| c.gain > 1.0 + own)
}

/// A key that orders passing results fastest first by `rule`'s point estimate: the log gain of
/// `c` over `anchor` (the speedup's log for the legacy rule, whose order needs no anchor).
/// Higher is faster; `None` for a result that did not pass.
pub fn rank_key(rule: CompareRule, c: &EvalSummary, anchor: Option<&EvalSummary>) -> Option<f64> {
    if !c.passed() {
        return None;
    }
    match (rule, anchor) {
        (CompareRule::Paired, Some(anchor)) => compare(rule, c, anchor).map(|x| x.gain.ln()),
        _ => c.speedup.filter(|s| *s > 0.0).map(f64::ln),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::protocol::WorkloadSummary;

    /// A passing summary: per workload (median us, iqr us, reference median us).
    fn measured(w: &[(f64, f64, f64)]) -> EvalSummary {
        let workloads: Vec<WorkloadSummary> = w
            .iter()
            .enumerate()
            .map(|(i, &(m, iqr, r))| WorkloadSummary {
                uuid: format!("w{i}"),
                status: "passed".into(),
                speedup: Some(r / m),
                median_ns: Some(m * 1e3),
                iqr_ns: Some(iqr * 1e3),
                reference_median_ns: Some(r * 1e3),
            })
            .collect();
        let speedup = (workloads.iter().map(|w| w.speedup.unwrap().ln()).sum::<f64>() / w.len() as f64).exp();
        let noise = w.iter().map(|&(m, iqr, _)| iqr / m).fold(0.0, f64::max);
        EvalSummary {
            status: "passed".into(),
            reason: None,
            speedup: Some(speedup),
            relative_noise: Some(noise),
            workloads,
            log_tail: String::new(),
            suspicious: None,
            resources: vec![],
            profile: None,
            harness: None,
        }
    }

    /// issue 15's ssm_scan: candidate 5 faster than candidate 4 on every workload, while the
    /// reference timed faster in candidate 5's evaluation, so the speedups barely moved.
    fn ssm_scan() -> (EvalSummary, EvalSummary) {
        // Candidate 4: a noisy small workload (its IQR 20% of its median).
        let c4 = measured(&[
            (18.8, 3.8, 800.0),
            (254.0, 6.0, 11_000.0),
            (282.0, 7.0, 12_100.0),
            (1000.0, 30.0, 46_000.0),
        ]);
        // Candidate 5: the reference drifted down by a third in its evaluation.
        let c5 = measured(&[
            (12.1, 0.4, 560.0),
            (165.0, 4.0, 7_700.0),
            (187.0, 5.0, 8_700.0),
            (748.0, 20.0, 31_000.0),
        ]);
        (c4, c5)
    }

    #[test]
    fn a_kernel_faster_on_every_workload_wins_whatever_the_reference_did() {
        let (c4, c5) = ssm_scan();
        let s4 = c4.speedup.unwrap();
        let s5 = c5.speedup.unwrap();
        assert!(s5 / s4 < 1.0 + 0.2, "the speedups barely moved: {s4} -> {s5}");
        // The legacy rule (speedups, worst-workload noise) calls it no gain: the defect.
        assert!(!beats_by(CompareRule::Speedup, &c5, Some(&c4)));
        let c = compare(CompareRule::Paired, &c5, &c4).unwrap();
        assert_eq!(c.order, Order::Faster, "{c:?}");
        assert_eq!(c.paired, 4);
        assert!((c.gain - 1.48).abs() < 0.02, "{}", c.gain);
        assert!(beats_by(CompareRule::Paired, &c5, Some(&c4)));
        assert!(!beats_by(CompareRule::Paired, &c4, Some(&c5)));
        assert_eq!(compare(CompareRule::Paired, &c4, &c5).unwrap().order, Order::Slower);
        assert!(rank_key(CompareRule::Paired, &c5, Some(&c4)) > rank_key(CompareRule::Paired, &c4, Some(&c4)));
    }

    #[test]
    fn differences_within_the_noise_are_no_difference() {
        // The same kernel timed twice: each workload moves within its 5% IQR, both ways, and
        // the reference drifted by 30%.
        let a = measured(&[(100.0, 5.0, 1000.0), (200.0, 10.0, 3000.0), (50.0, 2.5, 400.0)]);
        let b = measured(&[(103.0, 5.0, 700.0), (196.0, 9.0, 2100.0), (51.0, 2.5, 300.0)]);
        for (x, y) in [(&a, &b), (&b, &a)] {
            let c = compare(CompareRule::Paired, x, y).unwrap();
            assert_eq!(c.order, Order::Within, "{c:?}");
            assert!(!beats_by(CompareRule::Paired, x, Some(y)));
        }
        // Below the floor even noiseless timings are no difference.
        let q = measured(&[(100.0, 0.0, 1000.0)]);
        let r = measured(&[(99.5, 0.0, 1000.0)]);
        assert_eq!(compare(CompareRule::Paired, &r, &q).unwrap().order, Order::Within);
        // A real gain beyond the noise is one.
        let fast = measured(&[(90.0, 4.0, 1000.0), (180.0, 8.0, 3000.0), (45.0, 2.0, 400.0)]);
        assert!(beats_by(CompareRule::Paired, &fast, Some(&a)));
    }

    #[test]
    fn only_the_other_measurements_noise_holds_a_faster_kernel_back() {
        // The best: one workload timed with an IQR four times its median (a stalled device).
        let noisy = measured(&[(100.0, 400.0, 1000.0), (200.0, 4.0, 3000.0)]);
        // 1.3x faster on both, with 2% IQRs of its own: within the best's noise only.
        let fast = measured(&[(77.0, 1.5, 1000.0), (154.0, 3.0, 3000.0)]);
        assert_eq!(
            compare(CompareRule::Paired, &fast, &noisy).unwrap().order,
            Order::Within
        );
        assert!(held_back_by_noise_of(&fast, &noisy));
        // Not the other way round: the slower one is held back by nothing.
        assert!(!held_back_by_noise_of(&noisy, &fast));
        // A challenger as noisy as its gain is held back by its own noise too.
        let shaky = measured(&[(77.0, 30.0, 1000.0), (154.0, 60.0, 3000.0)]);
        assert!(!held_back_by_noise_of(&shaky, &noisy));
        // Beyond the noise, nothing holds it back: it simply wins.
        let calm = measured(&[(100.0, 2.0, 1000.0), (200.0, 4.0, 3000.0)]);
        assert_eq!(compare(CompareRule::Paired, &fast, &calm).unwrap().order, Order::Faster);
        assert!(!held_back_by_noise_of(&fast, &calm));
        // Own noise: the geometric mean of 1 + relative IQR, less one.
        let n = own_noise(&noisy).unwrap();
        assert!((n - ((5.0f64 * 1.02).sqrt() - 1.0)).abs() < 1e-9, "{n}");
        assert_eq!(own_noise(&measured(&[(100.0, 0.0, 1.0)])), Some(MIN_NOISE));
    }

    #[test]
    fn without_paired_workloads_the_speedups_decide_and_failures_never_win() {
        let mut a = measured(&[(100.0, 2.0, 200.0)]);
        let mut b = measured(&[(100.0, 2.0, 100.0)]);
        b.workloads[0].uuid = "other".into();
        let c = compare(CompareRule::Paired, &a, &b).unwrap();
        assert_eq!((c.paired, c.order), (0, Order::Faster));
        assert!(beats_by(CompareRule::Paired, &a, None));
        let failed = EvalSummary::failure("compile_error", "x".into());
        assert!(beats_by(CompareRule::Paired, &a, Some(&failed)));
        assert!(!beats_by(CompareRule::Paired, &failed, Some(&a)));
        assert!(!beats_by(CompareRule::Paired, &failed, None));
        a.suspicious = Some("faster than the device".into());
        assert!(!beats_by(CompareRule::Paired, &a, Some(&b)));
        assert!(compare(CompareRule::Paired, &a, &b).is_none());
    }
}
