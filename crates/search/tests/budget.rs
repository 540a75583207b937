//! Raising a run's round budget (`Event::BudgetRaised`, `ksearch resume --rounds`): a run its
//! budget ended goes on from where it stood, makes its final re-measurement again at the new
//! end, and replays to the same state; what the engine cannot take is refused, leaving it as it
//! was. A "kernel" is a text whose markers say how it measures (common/mod.rs).

mod common;
use common::*;
use ksearch_search::engine::*;
use serde_json::json;

/// What a scripted request was, with the prompt's parts a raise must not change.
#[derive(Debug, Clone, PartialEq)]
enum Asked {
    Plan(PlanKind),
    Code {
        kind: CodeKind,
        base: Option<i64>,
        node: String,
    },
}

/// A coder answer per code request count: speed 1 + k/10, the 5th fails, the 6th is fastest.
fn coder(k: usize) -> String {
    match k {
        5 => code(&format!("k{k} FAIL")),
        6 => code(&format!("k{k} SPEED=9.0")),
        _ => code(&format!("k{k} SPEED={}", 1.0 + k as f64 / 10.0)),
    }
}

fn planner(plan: &PlanKind, n: usize) -> String {
    scripted_plan(plan, n)
}

/// Serves `engine` until it finishes, appending to `events` and `asked`; answers count on from
/// what `asked` already holds, so a run served in two parts gets the same answers as in one.
fn serve(engine: &mut Engine, events: &mut Vec<Event>, asked: &mut Vec<Asked>) {
    serve_measured(engine, events, asked, |sources, _| summary(&sources[0].content))
}

/// `serve`, each evaluation measured by `measure` (the sources and the evaluation's purpose).
fn serve_measured(
    engine: &mut Engine,
    events: &mut Vec<Event>,
    asked: &mut Vec<Asked>,
    mut measure: impl FnMut(&[Source], Purpose) -> EvalSummary,
) {
    for _ in 0..500 {
        let codes = asked.iter().filter(|a| matches!(a, Asked::Code { .. })).count();
        let plans = asked.len() - codes;
        let event = match engine.pending().cloned().expect("a request") {
            Request::Plan { id, plan, .. } => {
                asked.push(Asked::Plan(plan.clone()));
                Event::PlannerAnswered {
                    request_id: id,
                    text: planner(&plan, plans + 1),
                }
            }
            Request::Code {
                id,
                code,
                node_id,
                base_candidate,
                ..
            } => {
                asked.push(Asked::Code {
                    kind: code,
                    base: base_candidate,
                    node: node_id,
                });
                Event::CoderAnswered {
                    request_id: id,
                    text: coder(codes + 1),
                }
            }
            Request::Evaluate {
                id,
                candidate_id,
                sources,
                purpose,
                ..
            } => Event::Evaluated {
                request_id: id,
                candidate_id,
                summary: measure(&sources, purpose),
            },
            Request::Finished { .. } => return,
        };
        engine.apply(&event).unwrap();
        events.push(event);
    }
    panic!("the run did not finish");
}

fn start(config: EngineConfig) -> (Engine, Vec<Event>) {
    let started = Event::Started {
        task: brief(true),
        config,
    };
    let mut engine = Engine::new();
    engine.apply(&started).unwrap();
    (engine, vec![started])
}

fn config(strategy: Strategy, rounds: u32) -> EngineConfig {
    EngineConfig {
        strategy,
        rounds,
        knob_share: 0.0,
        rng_seed: 7,
        ..EngineConfig::default()
    }
}

fn finished(engine: &Engine) -> (Option<i64>, String) {
    match engine.pending() {
        Some(Request::Finished { best_candidate, reason }) => (*best_candidate, reason.clone()),
        other => panic!("not finished: {other:?}"),
    }
}

/// The search's own evaluations of each candidate, without the final re-measurements.
fn searched(engine: &Engine) -> Vec<(i64, u32, Option<EvalSummary>)> {
    engine
        .candidates()
        .iter()
        .map(|c| (c.id, c.round, c.result.clone()))
        .collect()
}

fn final_evaluations(events: &[Event], engine: &Engine) -> usize {
    // Every evaluation beyond one per candidate is a final re-measurement here (no noise, so
    // no re-measurement of a best).
    let evaluations = events.iter().filter(|e| matches!(e, Event::Evaluated { .. })).count();
    evaluations - engine.candidates().len()
}

fn assert_replays(engine: &Engine, events: &[Event]) {
    let again = Engine::replay(events).unwrap();
    assert_eq!(again.candidates(), engine.candidates());
    assert_eq!(again.pending(), engine.pending());
    assert_eq!(again.round(), engine.round());
    assert_eq!(again.config(), engine.config());
    assert_eq!(again.world_model().to_json(), engine.world_model().to_json());
    assert_eq!(again.events_applied(), engine.events_applied());
}

#[test]
fn refine_and_evolve_raised_after_their_end_go_on_as_if_the_budget_had_been_larger() {
    for strategy in [Strategy::Refine, Strategy::Evolve] {
        // In one go: 8 rounds.
        let (mut whole, mut whole_events) = start(config(strategy, 8));
        let mut whole_asked = Vec::new();
        serve(&mut whole, &mut whole_events, &mut whole_asked);

        // 4 rounds, finished (final re-measurement made), then raised to 8.
        let (mut raised, mut events) = start(config(strategy, 4));
        let mut asked = Vec::new();
        serve(&mut raised, &mut events, &mut asked);
        assert_eq!(finished(&raised).1, "the round budget (4) is spent", "{strategy}");
        let first_finals = final_evaluations(&events, &raised);
        assert_eq!(first_finals, 3, "{strategy}: the top 3 re-measured at the first end");
        let raise = Event::BudgetRaised { rounds: 8 };
        raised.apply(&raise).unwrap();
        events.push(raise);
        assert!(!raised.is_finished(), "{strategy}");
        assert_eq!(raised.config().rounds, 8);
        serve(&mut raised, &mut events, &mut asked);

        // The same requests, the same candidates and search results, the same winner; the
        // final re-measurement made once more at the new end.
        assert_eq!(asked, whole_asked, "{strategy}");
        assert_eq!(searched(&raised), searched(&whole), "{strategy}");
        assert_eq!(raised.round(), 8);
        assert_eq!(finished(&raised), finished(&whole), "{strategy}");
        assert_eq!(final_evaluations(&events, &raised), first_finals + 3, "{strategy}");
        assert_replays(&raised, &events);
    }
}

#[test]
fn a_world_model_run_raised_after_its_end_asks_the_planner_about_the_cycle_the_budget_cut() {
    let (mut engine, mut events) = start(config(Strategy::WorldModel, 4));
    let mut asked = Vec::new();
    serve(&mut engine, &mut events, &mut asked);
    assert_eq!(engine.round(), 4);
    let first_best = finished(&engine).0;
    let old_finalists: Vec<i64> = engine
        .candidates()
        .iter()
        .filter(|c| c.final_result.is_some())
        .map(|c| c.id)
        .collect();
    assert_eq!(old_finalists.len(), 3);

    engine.apply(&Event::BudgetRaised { rounds: 9 }).unwrap();
    events.push(Event::BudgetRaised { rounds: 9 });
    // The planner step the budget ended: a refine of the node the cut cycle worked on.
    let Some(Request::Plan { plan, messages, .. }) = engine.pending() else {
        panic!("{:?}", engine.pending())
    };
    let cut_node = engine.candidates().last().map(|c| c.node_id.clone()).unwrap();
    assert_eq!(plan, &PlanKind::Refine { node_id: cut_node });
    // Its prompt counts the new budget.
    let user = &messages[1].content;
    assert!(user.contains("9"), "{user}");
    serve(&mut engine, &mut events, &mut asked);

    assert_eq!(engine.round(), 9);
    assert_eq!(finished(&engine).1, "the round budget (9) is spent");
    // Round 6 (the fastest) came after the raise and wins.
    let fastest = engine.candidates().iter().find(|c| c.round == 6).map(|c| c.id);
    assert_eq!(finished(&engine).0, fastest);
    assert_ne!(finished(&engine).0, first_best);
    assert_replays(&engine, &events);
}

#[test]
fn only_the_final_re_measurement_of_the_new_end_decides_the_winner() {
    // Refine for 3 rounds: the top 3 are rounds 3, 2, 1, and round 1's final re-measurement
    // reads 50x (a lucky one). Raised to 8, rounds 6, 8 and 7 are the top 3: round 1's old
    // final result stays on record but no longer takes part.
    let lucky = |sources: &[Source], purpose: Purpose| {
        let text = &sources[0].content;
        if purpose == Purpose::Final && text.starts_with("k1 ") {
            summary("k1 SPEED=50.0")
        } else {
            summary(text)
        }
    };
    let (mut engine, mut events) = start(config(Strategy::Refine, 3));
    let mut asked = Vec::new();
    serve_measured(&mut engine, &mut events, &mut asked, lucky);
    let round = |engine: &Engine, r: u32| engine.candidates().iter().find(|c| c.round == r).map(|c| c.id);
    assert_eq!(
        finished(&engine).0,
        round(&engine, 1),
        "the lucky final wins the first end"
    );
    engine.apply(&Event::BudgetRaised { rounds: 8 }).unwrap();
    events.push(Event::BudgetRaised { rounds: 8 });
    serve_measured(&mut engine, &mut events, &mut asked, lucky);
    assert_eq!(finished(&engine).0, round(&engine, 6));
    let k1 = engine.candidates().iter().find(|c| c.round == 1).unwrap();
    assert_eq!(
        k1.final_result.as_ref().and_then(|r| r.speedup),
        Some(50.0),
        "kept on record"
    );
    assert_replays(&engine, &events);
}

#[test]
fn a_budget_raised_while_the_run_goes_on_is_spent_like_one_given_at_the_start() {
    let (mut whole, mut whole_events) = start(config(Strategy::Refine, 7));
    let mut whole_asked = Vec::new();
    serve(&mut whole, &mut whole_events, &mut whole_asked);

    let (mut engine, mut events) = start(config(Strategy::Refine, 3));
    // The seed's evaluation, then raised before any round.
    let Some(Request::Evaluate { id, candidate_id, .. }) = engine.pending().cloned() else {
        panic!()
    };
    let seed = Event::Evaluated {
        request_id: id,
        candidate_id,
        summary: summary("seed SPEED=1.0"),
    };
    engine.apply(&seed).unwrap();
    events.push(seed);
    engine.apply(&Event::BudgetRaised { rounds: 7 }).unwrap();
    events.push(Event::BudgetRaised { rounds: 7 });
    let mut asked = Vec::new();
    serve(&mut engine, &mut events, &mut asked);
    assert_eq!(asked, whole_asked);
    assert_eq!(searched(&engine), searched(&whole));
    assert_eq!(finished(&engine), finished(&whole));
    assert_eq!(final_evaluations(&events, &engine), 3, "one final re-measurement");
    assert_replays(&engine, &events);
}

#[test]
fn what_the_engine_cannot_take_is_refused_and_changes_nothing() {
    let refused = |engine: &mut Engine, rounds: u32, why: &str| {
        let before = (
            engine.pending().cloned(),
            engine.config().clone(),
            engine.events_applied(),
        );
        let err = engine.apply(&Event::BudgetRaised { rounds }).unwrap_err();
        assert!(matches!(err, EngineError::BudgetNotRaised(_)), "{err:?}");
        assert!(err.to_string().contains(why), "{err}");
        let after = (
            engine.pending().cloned(),
            engine.config().clone(),
            engine.events_applied(),
        );
        assert_eq!(before, after);
    };

    // Not above the budget.
    let (mut engine, _) = start(config(Strategy::Refine, 4));
    refused(&mut engine, 4, "the run's round budget is 4 already");
    refused(&mut engine, 2, "the new one must be above it");

    // During the final re-measurement.
    let (mut engine, mut events) = start(config(Strategy::Refine, 2));
    for _ in 0..100 {
        if let Some(Request::Evaluate {
            purpose: Purpose::Final,
            ..
        }) = engine.pending()
        {
            break;
        }
        // One event at a time: serve only up to the first final evaluation.
        let event = match engine.pending().cloned().unwrap() {
            Request::Code { id, .. } => Event::CoderAnswered {
                request_id: id,
                text: coder(events.len()),
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
            other => panic!("{other:?}"),
        };
        engine.apply(&event).unwrap();
        events.push(event);
    }
    refused(&mut engine, 5, "final re-measurement");

    // After a fatal failure.
    let (mut engine, _) = start(config(Strategy::Refine, 10));
    let Some(Request::Evaluate { id, candidate_id, .. }) = engine.pending().cloned() else {
        panic!()
    };
    engine
        .apply(&Event::Evaluated {
            request_id: id,
            candidate_id,
            summary: summary("seed SPEED=1.0"),
        })
        .unwrap();
    let Some(Request::Code { id, .. }) = engine.pending().cloned() else {
        panic!()
    };
    engine
        .apply(&Event::RequestFailed {
            request_id: id,
            error: "budget exhausted: tokens".into(),
            fatal: true,
        })
        .unwrap();
    let mut events = Vec::new();
    let mut asked = Vec::new();
    serve(&mut engine, &mut events, &mut asked);
    assert!(engine.is_finished());
    refused(&mut engine, 20, "the run ended because budget exhausted: tokens");
}

#[test]
fn the_event_is_spelled_budget_raised_and_round_trips() {
    let event = Event::BudgetRaised { rounds: 120 };
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(value, json!({"event": "budget_raised", "rounds": 120}));
    assert_eq!(event.kind(), "budget_raised");
    assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
}
