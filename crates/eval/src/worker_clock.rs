//! The cross-check of a worker's clock (backend c on Linux, docs/protocol.md "The worker").
//!
//! The candidate's time is measured inside its own process, around the call, because a round
//! trip between processes costs more than a small kernel. That clock lives where the candidate
//! runs, so a candidate can lie about it; the harness therefore also reports its own round trip
//! of every timed call (an upper bound of the call's true time plus messaging) and of a few
//! empty calls (the messaging alone). A candidate whose fastest round trip, less the fastest
//! empty one, exceeds twice its claimed time by more than the slack ([`slack_ns`]) did work its
//! clock did not show. Minima, not medians: scheduling delays on a loaded machine only ever add
//! to a round trip (medians of honest microsecond calls were seen at 107 us against 21 us empty
//! round trips with three test processes on two cores), while no forgery can make the fastest
//! round trip of a call shorter than the call's real work.

use crate::stats::SampleStats;

/// Scheduling noise between two processes on an idle machine: a round trip of an empty call
/// takes 10-20 us on the 2-core development machine, with spikes of tens of microseconds.
pub(crate) const SLACK_NS: f64 = 50_000.0;

/// How much of the fastest empty round trip is added to the slack. A machine so loaded that
/// even its fastest empty round trip is slow delays a call's round trip by as much again, and
/// more: a call wakes the worker, touches the arrays and answers with its time, each a point
/// where the harness or the worker can lose the core. On CI's 2-core machine, with the test
/// binaries' evaluations sharing it, honest calls of 3.8 us had a fastest round trip of 165 us
/// against 82 us empty (and 18.5 us calls 120 us against 22 us), over the fixed slack alone.
const LOAD_FACTOR: f64 = 2.0;

/// The slack for one workload's cross-check: the fixed scheduling noise plus a multiple of its
/// fastest empty round trip, the measure of how loaded the machine was.
pub(crate) fn slack_ns(pings: &SampleStats) -> f64 {
    SLACK_NS + LOAD_FACTOR * pings.min_ns
}

pub(crate) fn forged_clock(
    claimed: &SampleStats,
    outer: Option<&SampleStats>,
    pings: Option<&SampleStats>,
) -> Option<String> {
    let (outer, pings) = (outer?, pings?);
    let shown = outer.min_ns - pings.min_ns;
    if shown > 2.0 * claimed.median_ns + slack_ns(pings) {
        return Some(format!(
            "the worker's clock says {:.1} us per call, but the harness's fastest round trip of the \
             same calls takes {:.1} us (fastest empty round trip {:.1} us): the candidate's process \
             reported less time than its calls took, so the timing cannot be trusted",
            claimed.median_ns / 1e3,
            outer.min_ns / 1e3,
            pings.min_ns / 1e3
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(v: &[f64]) -> SampleStats {
        SampleStats::of(v).unwrap()
    }

    #[test]
    fn an_honest_call_passes_and_a_forged_clock_is_flagged() {
        let pings = stats(&[14e3, 15e3, 13e3]);
        // Honest: 38 us claimed, 58 us round trip.
        assert_eq!(
            forged_clock(&stats(&[38e3; 3]), Some(&stats(&[58e3; 3])), Some(&pings)),
            None
        );
        // Honest and slow: 2 ms claimed, 2.03 ms round trip.
        assert_eq!(
            forged_clock(&stats(&[2e6; 3]), Some(&stats(&[2.03e6; 3])), Some(&pings)),
            None
        );
        // Honest on a loaded machine: 2.5 us claimed; most round trips delayed by scheduling
        // (median 107 us against 21 us empty), the fastest ones not.
        let loaded_pings = stats(&[13e3, 20.8e3, 45e3]);
        assert_eq!(
            forged_clock(
                &stats(&[2.5e3; 5]),
                Some(&stats(&[26e3, 90e3, 107e3, 130e3, 150e3])),
                Some(&loaded_pings)
            ),
            None
        );
        // Honest on CI's loaded 2-core machine (both seen there, flagged by the fixed slack):
        // even the fastest empty round trip was slow, and the calls' more so.
        for (claimed, outer, ping) in [(3.8e3, 165.3e3, 81.7e3), (18.5e3, 119.5e3, 21.6e3)] {
            assert_eq!(
                forged_clock(
                    &stats(&[claimed; 5]),
                    Some(&stats(&[outer, outer * 1.5, outer * 2.0])),
                    Some(&stats(&[ping, ping * 1.2, ping * 3.0]))
                ),
                None,
                "{claimed} claimed, {outer} round trip, {ping} empty"
            );
        }
        // Forged: 1 us claimed for calls whose round trip is 500 us, on an idle machine and on
        // one as loaded as CI's.
        let why = forged_clock(&stats(&[1e3; 3]), Some(&stats(&[500e3; 3])), Some(&pings)).unwrap();
        assert!(why.starts_with("the worker's clock says 1.0 us per call"), "{why}");
        let loaded = stats(&[81.7e3, 90e3, 120e3]);
        assert!(forged_clock(&stats(&[1e3; 3]), Some(&stats(&[500e3; 3])), Some(&loaded)).is_some());
        // No round trips reported (in-process backends): nothing to check.
        assert_eq!(forged_clock(&stats(&[1e3; 3]), None, None), None);
    }
}
