//! Statistics over raw timing samples. Computed here, never by code that shares a process
//! with the candidate.

use serde::{Deserialize, Serialize};

/// Order statistics of one list of timing samples, in nanoseconds. Quantiles interpolate
/// linearly between order statistics (NumPy's default method).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampleStats {
    /// Number of samples.
    pub n: usize,
    /// The median: the figure speedups are computed from.
    pub median_ns: f64,
    /// First quartile.
    pub q1_ns: f64,
    /// Third quartile.
    pub q3_ns: f64,
    /// Interquartile range, `q3_ns - q1_ns`: the spread, robust to the outliers a busy machine
    /// adds.
    pub iqr_ns: f64,
    /// The fastest sample.
    pub min_ns: f64,
}

/// Quantile `q` in [0, 1] of sorted samples, interpolating linearly between order statistics.
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl SampleStats {
    /// `None` when there are no samples or any is not a finite non-negative number.
    pub fn of(samples: &[f64]) -> Option<SampleStats> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let q1 = quantile_sorted(&sorted, 0.25);
        let q3 = quantile_sorted(&sorted, 0.75);
        Some(SampleStats {
            n: sorted.len(),
            median_ns: quantile_sorted(&sorted, 0.5),
            q1_ns: q1,
            q3_ns: q3,
            iqr_ns: q3 - q1,
            min_ns: sorted[0],
        })
    }
}

/// The median of finite values of any sign (differences between clocks, which [`SampleStats`]
/// refuses as samples); `None` when there are none or one is not finite.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(quantile_sorted(&sorted, 0.5))
}

/// Geometric mean of positive ratios (the arithmetic mean of ratios is biased upwards).
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan() || *v <= 0.0 || v.is_infinite()) {
        return None;
    }
    let log_sum: f64 = values.iter().map(|v| v.ln()).sum();
    Some((log_sum / values.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_iqr() {
        let s = SampleStats::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.median_ns, s.q1_ns, s.q3_ns, s.iqr_ns, s.min_ns),
            (3.0, 2.0, 4.0, 2.0, 1.0)
        );
        let even = SampleStats::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(even.median_ns, 2.5);
        assert_eq!((even.q1_ns, even.q3_ns), (1.75, 3.25));
        assert!(SampleStats::of(&[]).is_none());
        assert!(SampleStats::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn geomean() {
        assert!((geometric_mean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((geometric_mean(&[0.5, 2.0]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[1.0, 0.0]), None);
        assert_eq!(geometric_mean(&[]), None);
    }
}
