//! Several requests in flight (`EngineConfig::parallel` > 1), answered out of order by a
//! scripted server: the log is the truth, so replaying it (or any prefix of it, as after a
//! kill -9) rebuilds the same state and the same outstanding requests, and no request is ever
//! answered twice.

mod common;
use common::*;
use ksearch_search::engine::*;
use serde_json::json;
use std::collections::BTreeSet;

/// The scripted coder: a kernel whose speed and loop count follow from the request id, so an
/// answer does not depend on when it is served. Every 7th request fails.
fn coder_answer(id: &str) -> String {
    let n: usize = id.trim_start_matches('r').parse().unwrap();
    if n.is_multiple_of(7) {
        return code(&format!("k{n} FAIL"));
    }
    let speed = 1.0 + (n * 37 % 23) as f64 / 10.0;
    code(&format!("k{n} SPEED={speed}\n{}", "for (;;) {}\n".repeat(n % 4)))
}

fn planner_answer(plan: &PlanKind) -> String {
    let insert = |id: &str, score: f64| {
        json!({"op": "insert_node", "node": {"node_id": id, "parent_id": "root", "decision": "d", "choice": id,
            "overall_rating": 6, "confidence": 0.5,
            "action": {"title": id, "description": "change it", "rationale": "faster", "difficulty": 2, "score": score}}})
    };
    match plan {
        PlanKind::Init => json!({"ops": [insert("a", 0.9), insert("b", 0.5), insert("c", 0.3)]}).to_string(),
        _ => json!({"ops": []}).to_string(),
    }
}

/// The answer to an outstanding request.
fn answer(request: &Request) -> Event {
    match request.clone() {
        Request::Plan { id, plan, .. } => Event::PlannerAnswered {
            request_id: id,
            text: planner_answer(&plan),
        },
        Request::Code { id, .. } => Event::CoderAnswered {
            text: coder_answer(&id),
            request_id: id,
        },
        Request::Evaluate {
            id,
            candidate_id,
            sources,
            ..
        } => Event::Evaluated {
            request_id: id,
            candidate_id,
            summary: summary(&sources[0].content),
        },
        Request::Finished { .. } => unreachable!(),
    }
}

/// What a run looked like from the driver's side.
struct Trace {
    engine: Engine,
    events: Vec<Event>,
    /// The outstanding request ids after each event (index i: after events[..=i]).
    in_flight: Vec<BTreeSet<String>>,
    /// The request each event after `started` answered.
    answered: Vec<Request>,
    max_in_flight: usize,
}

/// Serves a run, answering at each step the outstanding request that `pick(step, n)` chooses
/// among the n outstanding ones (0 = the oldest), like a driver whose workers finish in any
/// order.
fn serve(config: EngineConfig, seed: bool, mut pick: impl FnMut(usize, usize) -> usize) -> Trace {
    let mut engine = Engine::new();
    let started = Event::Started {
        task: brief(seed),
        config,
    };
    engine.apply(&started).unwrap();
    let mut events = vec![started];
    let mut in_flight = vec![ids(&engine)];
    let mut max_in_flight = 0;
    let mut answered = Vec::new();
    let mut seen = BTreeSet::new();
    for step in 0..10_000 {
        let out = engine.in_flight();
        if out.is_empty() {
            break;
        }
        max_in_flight = max_in_flight.max(out.len());
        assert!(out.len() <= engine.parallel(), "{} requests out", out.len());
        let request = out[pick(step, out.len())].clone();
        assert!(
            seen.insert(request.id().unwrap().to_string()),
            "request {:?} was issued twice",
            request.id()
        );
        let event = answer(&request);
        engine.apply(&event).unwrap();
        // The same answer again is refused: it answers nothing outstanding any more.
        let again = engine.clone().apply(&event).unwrap_err();
        assert!(matches!(again, EngineError::Unexpected { .. }), "{again}");
        events.push(event);
        in_flight.push(ids(&engine));
        answered.push(request);
    }
    assert!(engine.is_finished(), "the run did not finish");
    Trace {
        engine,
        events,
        in_flight,
        answered,
        max_in_flight,
    }
}

fn ids(engine: &Engine) -> BTreeSet<String> {
    engine.in_flight().iter().map(|r| r.id().unwrap().to_string()).collect()
}

/// A deterministic shuffle of answer order (xorshift), different per `seed`.
fn shuffled(seed: u64) -> impl FnMut(usize, usize) -> usize {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move |_, n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    }
}

fn evolve(parallel: u32, rounds: u32) -> EngineConfig {
    EngineConfig {
        strategy: Strategy::Evolve,
        rounds,
        parallel,
        rng_seed: 9,
        migration_interval: 4,
        ..EngineConfig::default()
    }
}

fn assert_replays(trace: &Trace) {
    let again = Engine::replay(&trace.events).unwrap();
    assert_eq!(again.candidates(), trace.engine.candidates());
    assert_eq!(again.pending(), trace.engine.pending());
    assert_eq!(again.round(), trace.engine.round());
    assert_eq!(again.evolve(), trace.engine.evolve());
    assert_eq!(again.world_model().to_json(), trace.engine.world_model().to_json());
    assert_eq!(again.events_applied(), trace.engine.events_applied());
}

#[test]
fn evolve_asks_for_one_round_per_island_at_once() {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(true),
            config: evolve(3, 12),
        })
        .unwrap();
    // The seed is measured alone: every island starts from it.
    assert_eq!(engine.in_flight().len(), 1);
    let seed = engine.pending().cloned().unwrap();
    engine.apply(&answer(&seed)).unwrap();
    let out: Vec<Request> = engine.in_flight().into_iter().cloned().collect();
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out.iter().all(|r| matches!(r, Request::Code { .. })));
    assert_eq!(engine.pending(), Some(&out[0]), "pending() is the oldest");
    let running = engine.evolve().unwrap().running().to_vec();
    assert_eq!(running, vec![(1, 0), (2, 1), (3, 2)]);
    for (r, round) in out.iter().zip(1..) {
        assert_eq!(engine.round_of(r.id().unwrap()), Some(round));
        assert_eq!(engine.outstanding(r.id().unwrap()), Some(r));
    }
    // The last one answers first: its candidate is measured while the others are still out,
    // and the candidate belongs to its own round and island, not the latest round.
    engine.apply(&answer(&out[2])).unwrap();
    let out2 = engine.in_flight();
    assert_eq!(out2.len(), 3);
    let Request::Evaluate { candidate_id, .. } = out2[2] else {
        panic!("{out2:?}")
    };
    assert_eq!(engine.candidate(*candidate_id).unwrap().round, 3);
    // An island never has two rounds out, even with parallel above the island count.
    let mut wide = Engine::new();
    wide.apply(&Event::Started {
        task: brief(false),
        config: EngineConfig {
            islands: 2,
            ..evolve(5, 12)
        },
    })
    .unwrap();
    assert_eq!(wide.in_flight().len(), 2);
}

#[test]
fn out_of_order_answers_replay_to_the_same_state() {
    for seed in 1..=6 {
        let trace = serve(evolve(3, 14), true, shuffled(seed));
        assert_eq!(trace.max_in_flight, 3, "seed {seed}");
        let engine = &trace.engine;
        assert_eq!(engine.round(), 14);
        let codes = trace
            .events
            .iter()
            .filter(|e| matches!(e, Event::CoderAnswered { .. }))
            .count();
        assert_eq!(codes, 14, "exactly the round budget, seed {seed}");
        let ev = engine.evolve().unwrap();
        assert_eq!(ev.steps().len(), 14);
        assert!(ev.running().is_empty());
        let children: usize = ev.islands().iter().map(|i| i.children.len()).sum();
        assert_eq!(children, 14, "every scripted answer carries code: one child per round");
        // Every child lives on the island its step says, and comes from that round.
        for step in ev.steps() {
            if let Some(c) = engine.candidates().iter().find(|c| c.round == step.round) {
                assert!(ev.islands()[step.island].children.contains(&c.id), "{step:?}");
                assert_eq!(c.parent, step.parent);
            }
        }
        // Migration after every 4th finished round.
        let rounds: BTreeSet<u32> = ev.migrations().iter().map(|m| m.round).collect();
        assert_eq!(rounds, [4, 8, 12].into_iter().collect());
        // The final re-measurement of the top 3 went out at once.
        let finals = engine.candidates().iter().filter(|c| c.final_result.is_some()).count();
        assert_eq!(finals, 3);
        assert_replays(&trace);
    }
}

#[test]
fn every_prefix_of_the_log_resumes_with_exactly_the_unanswered_requests() {
    let trace = serve(evolve(3, 10), true, shuffled(3));
    for (k, expected) in trace.in_flight.iter().enumerate() {
        let resumed = Engine::replay(&trace.events[..=k]).unwrap();
        assert_eq!(&ids(&resumed), expected, "after event {k}");
        // Serving the rest of the original log from there reaches the same end.
        let mut e = resumed;
        for event in &trace.events[k + 1..] {
            e.apply(event).unwrap();
        }
        assert_eq!(e.candidates(), trace.engine.candidates(), "resumed after event {k}");
        assert_eq!(e.pending(), trace.engine.pending());
    }
    // Several requests were out at some point of this log, so the check above covered that.
    assert!(trace.in_flight.iter().any(|s| s.len() > 1));
}

#[test]
fn different_answer_orders_are_different_valid_runs() {
    let a = serve(evolve(3, 12), true, shuffled(1));
    let b = serve(evolve(3, 12), true, |_, n| n - 1);
    assert_ne!(a.events, b.events, "the order of answers is part of the run");
    for t in [&a, &b] {
        assert_eq!(t.engine.round(), 12);
        assert_replays(t);
    }
    // Answering the oldest first with parallel 1 is exactly the sequential run, and a config
    // without the field (an older log) means parallel 1.
    let one = serve(evolve(1, 12), true, |_, _| 0);
    assert_eq!(one.max_in_flight, 1);
    let mut old = serde_json::to_value(evolve(1, 12)).unwrap();
    old.as_object_mut().unwrap().remove("parallel");
    let old: EngineConfig = serde_json::from_value(old).unwrap();
    assert_eq!(old.parallel, 1);
    let (seq, events) = drive_oldest_first(old);
    assert_eq!(events, one.events);
    assert_eq!(seq.evolve(), one.engine.evolve());
}

fn drive_oldest_first(config: EngineConfig) -> (Engine, Vec<Event>) {
    let t = serve(config, true, |_, _| 0);
    (t.engine, t.events)
}

#[test]
fn world_model_and_refine_stay_sequential_except_the_final_re_measurement() {
    for strategy in [Strategy::WorldModel, Strategy::Refine] {
        let config = EngineConfig {
            strategy,
            rounds: 6,
            parallel: 4,
            knob_share: 0.0,
            ..EngineConfig::default()
        };
        let trace = serve(config, true, shuffled(5));
        // One at a time until the end, then the top 3 at once.
        let first_final = trace
            .answered
            .iter()
            .position(|r| {
                matches!(
                    r,
                    Request::Evaluate {
                        purpose: Purpose::Final,
                        ..
                    }
                )
            })
            .unwrap();
        // in_flight[i] is after events[..=i]; the finals were issued by event `first_final`.
        assert!(
            trace.in_flight[..first_final].iter().all(|s| s.len() <= 1),
            "{strategy}: {:?}",
            trace.in_flight
        );
        assert_eq!(trace.max_in_flight, 3, "{strategy}");
        assert_eq!(trace.engine.round(), 6);
        assert_replays(&trace);
    }
}

#[test]
fn a_fatal_failure_with_rounds_out_drops_them_and_re_measures() {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(true),
            config: evolve(3, 12),
        })
        .unwrap();
    let seed = engine.pending().cloned().unwrap();
    engine.apply(&answer(&seed)).unwrap();
    let out: Vec<Request> = engine.in_flight().into_iter().cloned().collect();
    assert_eq!(out.len(), 3);
    engine
        .apply(&Event::RequestFailed {
            request_id: out[1].id().unwrap().into(),
            error: "budget exhausted: LLM calls".into(),
            fatal: true,
        })
        .unwrap();
    // Only the seed passed: it is re-measured; the other two rounds are no longer awaited.
    let now = engine.in_flight();
    assert_eq!(now.len(), 1);
    assert!(matches!(
        now[0],
        Request::Evaluate {
            purpose: Purpose::Final,
            ..
        }
    ));
    let late = answer(&out[0]);
    assert!(matches!(
        engine.clone().apply(&late),
        Err(EngineError::Unexpected { .. })
    ));
    let last = now[0].clone();
    engine.apply(&answer(&last)).unwrap();
    let Some(Request::Finished { reason, best_candidate }) = engine.pending() else {
        panic!("{:?}", engine.pending())
    };
    assert!(reason.contains("budget exhausted"), "{reason}");
    assert_eq!(*best_candidate, Some(1));
}

fn sampled(samples: u32, rounds: u32) -> EngineConfig {
    EngineConfig {
        rounds,
        parallel: samples,
        samples,
        rng_seed: 9,
        knob_share: 0.0,
        ..EngineConfig::default()
    }
}

#[test]
fn world_model_steps_ask_for_samples_at_once_and_go_on_when_all_are_measured() {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(true),
            config: sampled(4, 10),
        })
        .unwrap();
    let seed = engine.pending().cloned().unwrap();
    engine.apply(&answer(&seed)).unwrap();
    let plan = engine.pending().cloned().unwrap();
    assert!(matches!(plan, Request::Plan { .. }));
    engine.apply(&answer(&plan)).unwrap();
    // The first step of the first cycle: four coder requests for one node, rounds 1 to 4.
    let out: Vec<Request> = engine.in_flight().into_iter().cloned().collect();
    assert_eq!(out.len(), 4, "{out:?}");
    let nodes: BTreeSet<String> = out
        .iter()
        .map(|r| match r {
            Request::Code { node_id, messages, .. } => {
                assert!(
                    messages[1].content.contains("## Parallel attempt"),
                    "{}",
                    messages[1].content
                );
                node_id.clone()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(nodes.len(), 1);
    let rounds: Vec<u32> = out.iter().map(|r| engine.round_of(r.id().unwrap()).unwrap()).collect();
    assert_eq!(rounds, vec![1, 2, 3, 4]);
    // Answered and measured in any order; nothing new is asked until the last is measured.
    let mut evaluations = Vec::new();
    for r in out.iter().rev() {
        engine.apply(&answer(r)).unwrap();
    }
    for r in engine.in_flight().into_iter().cloned().collect::<Vec<_>>() {
        assert!(matches!(r, Request::Evaluate { .. }), "{r:?}");
        evaluations.push(r);
    }
    assert_eq!(evaluations.len(), 4);
    for (i, r) in evaluations.iter().enumerate() {
        engine.apply(&answer(r)).unwrap();
        let next = engine.in_flight();
        if i + 1 < evaluations.len() {
            assert!(next.iter().all(|n| matches!(n, Request::Evaluate { .. })), "{next:?}");
        } else {
            // The next step: four more requests (improve the step's fastest) at rounds 5 to 8.
            assert_eq!(next.len(), 4, "{next:?}");
            assert!(next.iter().all(|n| matches!(
                n,
                Request::Code {
                    code: CodeKind::Improve,
                    ..
                }
            )));
            let fastest = engine
                .candidates()
                .iter()
                .filter(|c| c.round >= 1)
                .filter(|c| c.passed())
                .max_by(|a, b| a.speedup().unwrap_or(0.0).total_cmp(&b.speedup().unwrap_or(0.0)));
            let Request::Code { base_candidate, .. } = next[0] else {
                unreachable!()
            };
            assert_eq!(*base_candidate, fastest.map(|c| c.id));
        }
    }
}

#[test]
fn sampled_world_model_runs_replay_whatever_the_order_and_respect_the_budget() {
    for seed in 1..6 {
        let trace = serve(sampled(3, 11), seed % 2 == 0, shuffled(seed));
        assert!(trace.max_in_flight >= 3, "{}", trace.max_in_flight);
        assert_replays(&trace);
        // Every coder round is within the budget; the final re-measurement aside.
        let coder = trace
            .answered
            .iter()
            .filter(|r| matches!(r, Request::Code { .. }))
            .count();
        assert!(coder <= 11, "{coder} coder requests for 11 rounds");
        assert!(trace.engine.round() <= 11);
    }
    // One sample is the one-at-a-time engine: the same requests as before the setting existed.
    let one = serve(sampled(1, 8), true, |_, _| 0);
    let plain = serve(
        EngineConfig {
            rounds: 8,
            rng_seed: 9,
            knob_share: 0.0,
            ..EngineConfig::default()
        },
        true,
        |_, _| 0,
    );
    assert_eq!(one.engine.candidates(), plain.engine.candidates());
}

/// A brain that answered a whole step of 8 parallel samples sees the fate of all 8 in the next
/// prompt, each named by the request it answered, even when every answer is long and its diff
/// would fill the section: entries come before diffs.
#[test]
fn the_next_step_lists_every_sample_of_the_last_by_its_request() {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(true),
            config: sampled(8, 24),
        })
        .unwrap();
    let seed = engine.pending().cloned().unwrap();
    engine.apply(&answer(&seed)).unwrap();
    let plan = engine.pending().cloned().unwrap();
    engine.apply(&answer(&plan)).unwrap();
    let step: Vec<Request> = engine.in_flight().into_iter().cloned().collect();
    assert_eq!(step.len(), 8, "{step:?}");
    for (k, r) in step.iter().enumerate() {
        let Request::Code { id, .. } = r else { panic!("{r:?}") };
        // 300 changed lines and a description longer than the clip: each diff alone would take
        // its whole share of the budget.
        let body: String = (0..300).map(|i| format!("int sample{k}_line{i};\n")).collect();
        let text = format!(
            "DESCRIPTION: {}\n```c kernel.c\n{body}SPEED=1.{k}\n```\n",
            format!("sample {k} tries a long idea ").repeat(20)
        );
        engine
            .apply(&Event::CoderAnswered {
                request_id: id.clone(),
                text,
            })
            .unwrap();
    }
    for r in engine.in_flight().into_iter().cloned().collect::<Vec<_>>() {
        engine.apply(&answer(&r)).unwrap();
    }
    let next: Vec<Request> = engine.in_flight().into_iter().cloned().collect();
    let Some(Request::Code { messages, .. }) = next.first() else {
        panic!("{next:?}")
    };
    let prompt = &messages[1].content;
    let section = prompt
        .split("Recent attempts")
        .nth(1)
        .expect("a Recent attempts section");
    let section = section.split("\n## ").next().unwrap_or(section);
    for r in &step {
        let id = r.id().unwrap();
        assert!(
            section.contains(&format!("answer to request {id},")),
            "{id} is missing from:\n{section}"
        );
    }
    assert!(section.len() <= ATTEMPTS_BUDGET + 100, "{}", section.len());
    // What budget is left still goes to the latest diff.
    assert!(section.contains("diff to candidate"), "{section}");
}
