//! Re-measuring a noisy best: a candidate that reads faster than the run's best, held back only
//! by the noise of the best's own measurement, gets the best measured again, and wins when the
//! calmer measurement shows it faster. Capped per candidate, waited for by the final
//! re-measurement, and never asked for by a log recorded before the setting.

mod common;
use common::*;
use ksearch_search::engine::*;
use std::collections::HashMap;

/// The first best: one workload timed with an IQR four times its median.
const NOISY: &str = "n1 TIMES=100,200 IQR=400,4 REF=1000,3000";
/// The same kernel measured again on a quiet device.
const CALM: &str = "n1 TIMES=101,199 IQR=2,4 REF=1000,3000";
/// 1.3x faster on both workloads, with 2% IQRs of its own.
const FAST: &str = "f2 TIMES=77,154 IQR=1.5,3 REF=1000,3000";
/// Slower than the calm measurement, 1.3x faster than nothing.
const EVEN: &str = "e3 TIMES=100,201 IQR=2,4 REF=1000,3000";

fn planner(plan: &PlanKind, _m: &[ksearch_messages::Message], n: usize) -> String {
    scripted_plan(plan, n)
}

/// No seed; the coder answers `NOISY`, then `answers` in turn (the last one repeated). The first
/// best measures noisy until it has been measured `noisy_times`, calm after.
fn run(config: EngineConfig, answers: &'static [&'static str], noisy_times: usize) -> (Engine, Vec<Event>) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    drive_with(
        false,
        config,
        planner,
        |_, k| {
            code(if k == 1 {
                NOISY
            } else {
                answers[(k - 2).min(answers.len() - 1)]
            })
        },
        move |s: &[Source]| {
            let text = s[0].content.trim();
            let n = seen.entry(text.to_string()).or_default();
            *n += 1;
            timed(if text == NOISY && *n > noisy_times { CALM } else { text })
        },
        500,
    )
}

fn config(rounds: u32) -> EngineConfig {
    EngineConfig {
        rounds,
        stagnation_window: 3,
        knob_share: 0.0,
        final_top_k: 2,
        ..EngineConfig::default()
    }
}

fn id_of(engine: &Engine, marker: &str) -> i64 {
    engine
        .candidates()
        .iter()
        .find(|c| c.sources[0].content.starts_with(marker))
        .map(|c| c.id)
        .unwrap()
}

/// The candidates each `Evaluate(remeasure)` of the log asked for, in order (replaying the log
/// to see the requests, which the log itself does not hold).
fn remeasure_requests(events: &[Event]) -> Vec<i64> {
    let mut engine = Engine::new();
    let mut out = Vec::new();
    for e in events {
        if let Event::Evaluated { request_id, .. } = e {
            if let Some(Request::Evaluate {
                candidate_id,
                purpose: Purpose::Remeasure,
                ..
            }) = engine.outstanding(request_id)
            {
                out.push(*candidate_id);
            }
        }
        engine.apply(e).unwrap();
    }
    out
}

fn finished_best(engine: &Engine) -> Option<i64> {
    match engine.pending() {
        Some(Request::Finished { best_candidate, .. }) => *best_candidate,
        other => panic!("not finished: {other:?}"),
    }
}

#[test]
fn a_faster_kernel_held_back_by_the_bests_noise_wins_once_the_best_is_measured_again() {
    let (engine, events) = run(config(6), &[FAST, EVEN], 1);
    let (n1, f2) = (id_of(&engine, "n1"), id_of(&engine, "f2"));
    // The best was measured again once, right after the faster-reading candidate.
    assert_eq!(remeasure_requests(&events), vec![n1]);
    let first = engine.candidate(n1).unwrap();
    assert_eq!(first.remeasured.len(), 1);
    // The calmer measurement is the one the engine decides with now.
    let noise = own_noise(first.result.as_ref().unwrap()).unwrap();
    assert!(noise < 0.05, "{noise}");
    // Its search evaluation, the noisy one, is still in view (the re-measurement did not
    // overwrite what was recorded for it).
    let searched = first.search_result().unwrap();
    assert!(own_noise(searched).unwrap() > noise, "{searched:?}");
    assert_eq!(first.superseded.as_ref(), Some(searched));
    assert_ne!(first.search_speedup(), first.speedup());
    // Against it the candidate held back is 1.3x faster beyond the noise: the run's best, the
    // cycle's (so its node's solution) and the answer after the final re-measurement.
    assert_eq!(engine.best().map(|b| b.id), Some(f2));
    let node = engine.world_model().node("a").unwrap();
    assert_eq!(node.solution_ref.as_ref().map(|s| s.candidate_id), Some(f2));
    assert_eq!(finished_best(&engine), Some(f2));
    // A re-measurement is no round: six coder rounds, six candidates of the coder's.
    assert_eq!(engine.candidates().len(), 6);
    // The log replays to the same state.
    let replayed = Engine::replay(&events).unwrap();
    assert_eq!(replayed.candidates(), engine.candidates());
    assert_eq!(replayed.pending(), engine.pending());
}

#[test]
fn a_best_that_stays_noisy_is_measured_again_at_most_the_configured_times() {
    let (engine, events) = run(config(8), &[FAST], usize::MAX);
    let n1 = id_of(&engine, "n1");
    // Every later candidate reads faster and is held back, but the best is re-measured twice
    // (the default share) and then no more; its first measurement stays (none was calmer).
    assert_eq!(remeasure_requests(&events), vec![n1, n1]);
    let first = engine.candidate(n1).unwrap();
    assert_eq!(first.remeasured.len(), 2);
    assert_eq!(first.result.as_ref().map(|r| r.workloads[0].iqr_ns), Some(Some(400e3)));
    assert_eq!(engine.best().map(|b| b.id), Some(n1));
    // With the setting at 1, once.
    let (_, events) = run(
        EngineConfig {
            remeasure: 1,
            ..config(8)
        },
        &[FAST],
        usize::MAX,
    );
    assert_eq!(remeasure_requests(&events), vec![n1]);
}

#[test]
fn the_final_re_measurement_waits_for_a_re_measurement_that_is_out() {
    // Two rounds: the second candidate's evaluation spends the budget and asks for the best to
    // be measured again in the same step; the finalists are taken after it is in.
    let (engine, events) = run(config(2), &[FAST], 1);
    let (n1, f2) = (id_of(&engine, "n1"), id_of(&engine, "f2"));
    assert_eq!(remeasure_requests(&events), vec![n1]);
    assert_eq!(engine.best().map(|b| b.id), Some(f2));
    assert_eq!(finished_best(&engine), Some(f2));
    // Both finalists were re-measured at the end, the new best among them.
    for id in [n1, f2] {
        assert!(engine.candidate(id).unwrap().final_result.is_some(), "candidate {id}");
    }
    // The order of the log: the re-measurement's answer comes before any final one.
    let replayed_purposes: Vec<Purpose> = {
        let mut e = Engine::new();
        let mut out = Vec::new();
        for ev in &events {
            if let Event::Evaluated { request_id, .. } = ev {
                if let Some(Request::Evaluate { purpose, .. }) = e.outstanding(request_id) {
                    out.push(*purpose);
                }
            }
            e.apply(ev).unwrap();
        }
        out
    };
    let remeasured_at = replayed_purposes.iter().position(|p| *p == Purpose::Remeasure).unwrap();
    let first_final = replayed_purposes.iter().position(|p| *p == Purpose::Final).unwrap();
    assert!(remeasured_at < first_final, "{replayed_purposes:?}");
}

#[test]
fn a_log_recorded_before_the_setting_never_asks_for_one() {
    let (engine, events) = run(config(6), &[FAST, EVEN], 1);
    // The same `started` event without the field: the engine of then, which kept the noisy best.
    let mut old = serde_json::to_value(&events[0]).unwrap();
    old["config"].as_object_mut().unwrap().remove("remeasure");
    let old: Event = serde_json::from_value(old).unwrap();
    let Event::Started { config, .. } = &old else { panic!() };
    assert_eq!(config.remeasure, 0);
    let (then, then_events) = run(config.clone(), &[FAST, EVEN], 1);
    assert!(remeasure_requests(&then_events).is_empty());
    assert_eq!(then.best().map(|b| b.id), Some(id_of(&then, "n1")));
    // New runs re-measure.
    assert_eq!(EngineConfig::default().remeasure, 2);
    assert_ne!(engine.best().map(|b| b.id), then.best().map(|b| b.id));
}

/// The best, o1, measured by harness 0.2.0, whose calls carried 30 us of the host's work; then
/// candidates s2 of the same speed measured by 0.3.0, which does not (o1 too, measured again).
/// Re-measuring for noise is off (a run recorded before that setting).
const OLD_BEST: &str = "o1 TIMES=130,260 IQR=1,2 REF=1000,3000";
const NEW_BEST: &str = "o1 TIMES=100,200 IQR=1,2 REF=1000,3000";
const SAME: &str = "s2 TIMES=100,201 IQR=1,2 REF=1000,3000";

fn harness_change_run() -> (Engine, Vec<Event>) {
    let mut seen = 0;
    drive_with(
        false,
        EngineConfig {
            remeasure: 0,
            ..config(3)
        },
        planner,
        |_, k| code(if k == 1 { OLD_BEST } else { SAME }),
        move |s: &[Source]| {
            let text = s[0].content.trim();
            let (times, version) = if text == OLD_BEST {
                seen += 1;
                if seen == 1 {
                    (OLD_BEST, "0.2.0")
                } else {
                    (NEW_BEST, "0.3.0")
                }
            } else {
                (text, "0.3.0")
            };
            EvalSummary {
                harness: Some(version.into()),
                ..timed(times)
            }
        },
        500,
    )
}

#[test]
fn a_candidate_measured_by_another_harness_version_waits_for_the_best_to_be_measured_by_it() {
    // The best was measured by harness 0.2.0, whose calls carried 30 us of the host's work; the
    // run resumes with 0.3.0, which does not. The next candidate is the same speed, so only the
    // harness change makes it read 1.3x faster. Even with re-measuring for noise turned off (a
    // run recorded before that setting), the best is measured again by 0.3.0 first, and the
    // candidate then does not displace it.
    let (engine, events) = harness_change_run();
    let o1 = id_of(&engine, "o1");
    assert_eq!(
        remeasure_requests(&events),
        vec![o1],
        "measured again once, for the version"
    );
    let best = engine.candidate(o1).unwrap();
    assert_eq!(best.result.as_ref().and_then(|r| r.harness.as_deref()), Some("0.3.0"));
    assert_eq!(engine.best().map(|b| b.id), Some(o1));
    assert_eq!(finished_best(&engine), Some(o1));
    // Without the rule (both measured by one version), the old times would have made the
    // candidate the best: the comparison it was spared.
    let first = timed(OLD_BEST);
    let challenger = timed(SAME);
    assert!(beats_by(CompareRule::Paired, &challenger, Some(&first)));
}

#[test]
fn candidates_measured_by_different_harness_versions_are_described_as_not_compared() {
    // As above: o1 measured by harness 0.2.0 (30 us of host work in every call), s2 by 0.3.0.
    // Between s2's evaluation and o1's re-measurement by 0.3.0, what the planner reads of s2
    // against o1 must not be a ratio of the two versions' times (it would read 1.30x faster);
    // once o1 has a 0.3.0 measurement, the two are compared on it.
    let (engine, events) = harness_change_run();
    let (o1, s2) = (id_of(&engine, "o1"), id_of(&engine, "s2"));
    let mut replay = Engine::new();
    let mut before_remeasure = None;
    for e in &events {
        replay.apply(e).unwrap();
        let o1_remeasured = replay.candidate(o1).is_some_and(|c| !c.remeasured.is_empty());
        if !o1_remeasured && replay.candidate(s2).is_some_and(|c| c.passed()) {
            before_remeasure.get_or_insert_with(|| replay.describe_against(s2, o1));
        }
    }
    let text = before_remeasure
        .flatten()
        .expect("s2 was evaluated before o1 was measured again");
    assert_eq!(
        text,
        format!(
            "not compared with candidate {o1}: it was measured by harness 0.2.0, this by 0.3.0 \
             (times of different harness versions are not compared)"
        )
    );
    assert!(replay.compare_candidates(s2, o1).is_some());
    let after = engine.describe_against(s2, o1).unwrap();
    assert!(
        after.contains(&format!("candidate {o1}")) && !after.starts_with("not compared"),
        "{after}"
    );
    assert!(!after.contains("faster"), "{after}"); // 100 vs 100 us: within the noise
}
