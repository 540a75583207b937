//! Checks of GPU evaluations made here, from what the harness reported: the host-clock
//! cross-check of CUDA-event times, and compute-sanitizer's verdict.

use crate::record::Evaluation;
use crate::stats::SampleStats;
use crate::status::Status;

/// Event time this far below the host time (beyond the reference's own gap) means work the
/// events did not see: another stream or thread (docs/protocol.md, timing on a GPU). Measured on an H200
/// (bench/results/gpu-backends.md): an honest CUDA kernel called through ctypes shows a gap of
/// about 35-50 us between the clocks (events, launch, a device-wide synchronise), the float64
/// torch reference about 50-60 us, a PyTorch candidate 30-65 us; so a gap must exceed the
/// reference's by 50 us before it is called hidden work.
pub(crate) const HOST_GAP_SLACK_NS: f64 = 50_000.0;

/// The GPU cross-check: a candidate whose CUDA-event median is under half its host-clock median,
/// with a gap beyond the reference's own gap plus [`HOST_GAP_SLACK_NS`], did work the events on
/// the default stream did not measure (another stream, another thread).
pub(crate) fn hidden_work(
    cand: &SampleStats,
    refr: &SampleStats,
    cand_host: Option<&SampleStats>,
    ref_host: Option<&SampleStats>,
) -> Option<String> {
    let (cand_host, ref_host) = (cand_host?, ref_host?);
    let gap = cand_host.median_ns - cand.median_ns;
    let ref_gap = (ref_host.median_ns - refr.median_ns).max(0.0);
    if cand_host.median_ns > 2.0 * cand.median_ns && gap > ref_gap + HOST_GAP_SLACK_NS {
        return Some(format!(
            "its CUDA-event median ({:.1} us) is far below its host-clock median with a device-wide \
             synchronise ({:.1} us; the reference's gap is {:.1} us): work on another stream or thread \
             is not measured by the events, so the timing cannot be trusted",
            cand.median_ns / 1e3,
            cand_host.median_ns / 1e3,
            ref_gap / 1e3
        ));
    }
    None
}

/// The cross-check net of the launch path: per timed call, what the host waited for after the
/// call returned and the device could run it (`host - enqueue`), less the call's own event time.
/// For an honest call that is the device-wide synchronise's latency, the same for candidate and
/// reference; work on another stream or thread that outlasts the events adds to it. Unlike
/// [`hidden_work`] it does not hold the reference's launch path in its margin (with the gate, a
/// call's host gap includes its launch path, about 250 us for rmsnorm_llm's reference), so the
/// slack is the same 50 us over the reference's synchronise. Work hidden inside a call's own
/// launch path (the host stalling while another stream runs) is left to [`hidden_work`]. `None`
/// without the lists (records of harnesses before them, CPU backends), or when they do not
/// line up with the event samples.
pub(crate) fn work_after_the_call(raw: &crate::record::RawTiming) -> Option<String> {
    let after = |events: &[f64], host: &[f64], enqueue: &[f64]| -> Option<f64> {
        if events.is_empty() || events.len() != host.len() || events.len() != enqueue.len() {
            return None;
        }
        let gaps: Vec<f64> = (0..events.len()).map(|i| host[i] - enqueue[i] - events[i]).collect();
        crate::stats::median(&gaps)
    };
    let cand = after(&raw.candidate_ns, &raw.candidate_host_ns, &raw.candidate_enqueue_ns)?;
    let refr = after(&raw.reference_ns, &raw.reference_host_ns, &raw.reference_enqueue_ns)?;
    if cand > refr.max(0.0) + HOST_GAP_SLACK_NS {
        return Some(format!(
            "after its call returned, the host waited {:.1} us beyond the call's CUDA-event time for a \
             device-wide synchronise (median per call; the reference's: {:.1} us): work on another stream \
             or thread is not measured by the events, so the timing cannot be trusted",
            cand / 1e3,
            refr / 1e3
        ));
    }
    None
}

/// The evaluation once compute-sanitizer's log is read (`Err`: it could not be, and why): errors
/// it counted fail an evaluation that otherwise passed (the harness attributes what it sees to
/// workloads as it goes; this catches what it could not), and the report's first lines join the
/// log. A log without its "ERROR SUMMARY" line (missing, unreadable, cut short, or with a count
/// that does not parse) means the sanitizer did not finish its check: it crashed, was killed, or
/// something in the evaluation removed its log. Its verdict is then unknown, so an evaluation
/// that otherwise passed becomes a `harness_error` saying so; one that failed keeps its status
/// (a timeout or a crash ends the sanitizer before its summary), with a note in the log.
pub(crate) fn sanitizer_verdict(mut evaluation: Evaluation, log: Result<&str, String>) -> Evaluation {
    let summary = log.as_ref().ok().and_then(|l| crate::sanitizer::summary(l));
    let Some((errors, lines)) = summary else {
        let why = match &log {
            Err(e) => format!("its log could not be read ({e})"),
            Ok(l) if l.trim().is_empty() => "its log is empty".to_string(),
            Ok(_) => "its log has no readable \"ERROR SUMMARY: N errors\" line".to_string(),
        };
        let what = format!(
            "compute-sanitizer (memcheck) produced no error summary: {why}; it did not finish its check \
             (it crashed or was killed, or its log was removed), so its verdict is unknown"
        );
        evaluation.log.push_str("\n--- compute-sanitizer ---\n");
        evaluation.log.push_str(&what);
        if evaluation.status == Status::Passed {
            evaluation.status = Status::HarnessError;
            evaluation.speedup = None;
            evaluation.reason = Some(format!("{what} and the evaluation cannot pass"));
        }
        return evaluation;
    };
    if !lines.is_empty() {
        evaluation.log.push_str("\n--- compute-sanitizer ---\n");
        evaluation.log.push_str(&lines.join("\n"));
    }
    if errors > 0 && evaluation.status == Status::Passed {
        evaluation.status = Status::RuntimeError;
        evaluation.speedup = None;
        evaluation.reason = Some(format!(
            "compute-sanitizer (memcheck) reported {errors} error(s): {}",
            lines.iter().take(4).cloned().collect::<Vec<_>>().join(" | ")
        ));
    }
    evaluation
}
