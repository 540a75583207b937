//! Human-readable numbers.

/// A duration given in nanoseconds, with a unit that keeps 3 significant digits.
pub(crate) fn duration_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.3} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// An error magnitude, compact: `3.1e-06`, or `-` when absent.
pub(crate) fn error(value: Option<f64>) -> String {
    match value {
        Some(v) => format!("{v:.1e}"),
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_ns(812.0), "812 ns");
        assert_eq!(duration_ns(41_234.0), "41.234 us");
        assert_eq!(duration_ns(3_100_000.0), "3.100 ms");
        assert_eq!(duration_ns(1.2e9), "1.200 s");
    }
}
