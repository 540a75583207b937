//! The `refine` and `evolve` strategies driven by scripted answers, like engine_scripted.rs:
//! a "kernel" is a text whose markers say how it would measure (`SPEED=1.5` passes at 1.5x,
//! `FAIL` fails). Both strategies must spend exactly the round budget, never call the planner,
//! and replay to the same state.

mod common;
use common::*;
use ksearch_search::engine::*;

/// What the scripted coder is told about a request.
struct Ask<'a> {
    kind: CodeKind,
    /// 1-based count of code requests so far.
    n: usize,
    base: Option<i64>,
    node_id: &'a str,
    prompt: &'a str,
}

/// Serves requests until the run finishes (or `max_events`); any planner request panics.
fn drive(
    seed: bool,
    config: EngineConfig,
    mut coder: impl FnMut(&Ask) -> String,
    max_events: usize,
) -> (Engine, Vec<Event>) {
    let mut engine = Engine::new();
    let mut events = vec![Event::Started {
        task: brief(seed),
        config,
    }];
    engine.apply(&events[0]).unwrap();
    let mut codes = 0;
    while events.len() < max_events {
        let event = match engine.pending().cloned().unwrap() {
            Request::Plan { plan, .. } => panic!("the planner was asked ({plan:?})"),
            Request::Code {
                id,
                code,
                node_id,
                base_candidate,
                messages,
            } => {
                codes += 1;
                let ask = Ask {
                    kind: code,
                    n: codes,
                    base: base_candidate,
                    node_id: &node_id,
                    prompt: &messages[1].content,
                };
                Event::CoderAnswered {
                    request_id: id,
                    text: coder(&ask),
                }
            }
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
            Request::Finished { .. } => break,
        };
        engine.apply(&event).unwrap();
        events.push(event);
    }
    (engine, events)
}

/// A kernel of the given speed with `loops` loops (which moves it across archive cells).
fn kernel(k: usize, speed: f64, loops: usize) -> String {
    code(&format!("k{k} SPEED={speed}\n{}", "for (;;) {}\n".repeat(loops)))
}

fn finished(engine: &Engine) -> (Option<i64>, String) {
    match engine.pending() {
        Some(Request::Finished { best_candidate, reason }) => (*best_candidate, reason.clone()),
        other => panic!("not finished: {other:?}"),
    }
}

fn assert_replays(engine: &Engine, events: &[Event]) {
    let again = Engine::replay(events).unwrap();
    assert_eq!(again.candidates(), engine.candidates());
    assert_eq!(again.pending(), engine.pending());
    assert_eq!(again.round(), engine.round());
    assert_eq!(again.world_model().to_json(), engine.world_model().to_json());
    assert_eq!(again.evolve(), engine.evolve());
    assert_eq!(again.events_applied(), engine.events_applied());
}

fn config(strategy: Strategy, rounds: u32) -> EngineConfig {
    EngineConfig {
        strategy,
        rounds,
        ..EngineConfig::default()
    }
}

// --- refine -----------------------------------------------------------------------------------

#[test]
fn refine_spends_the_budget_improving_the_best_and_finds_the_fastest() {
    // Round k answers speed 1 + k/10, except round 4 (the fastest) and round 6 (a failure).
    let mut bases = Vec::new();
    let (engine, events) = drive(
        true,
        config(Strategy::Refine, 8),
        |ask| {
            assert_eq!(ask.node_id, "root");
            bases.push((ask.kind, ask.base));
            match ask.n {
                4 => kernel(ask.n, 3.0, 1),
                6 => code("k6 FAIL"),
                k => kernel(k, 1.0 + k as f64 / 10.0, 0),
            }
        },
        500,
    );
    let (best, reason) = finished(&engine);
    let best = engine.candidate(best.unwrap()).unwrap();
    assert!(best.sources[0].content.contains("SPEED=3"), "{best:?}");
    assert!(reason.contains("round budget (8)"), "{reason}");
    assert_eq!(engine.round(), 8);
    assert_eq!(engine.candidates().len(), 9, "the seed and one candidate per round");
    assert_eq!(
        engine.candidates().iter().filter(|c| c.final_result.is_some()).count(),
        3,
        "the top 3 are re-measured"
    );
    // Every round improves the best so far: the seed (1), then each new best, and after the
    // failure of round 6 still the best (candidate 5, round 4), not the failure.
    let expected: Vec<(CodeKind, Option<i64>)> = [1, 2, 3, 4, 5, 5, 5, 5]
        .into_iter()
        .map(|b| (CodeKind::Improve, Some(b)))
        .collect();
    assert_eq!(bases, expected);
    // Parents are the bases; the tree stays the root alone.
    assert!(engine
        .candidates()
        .iter()
        .skip(1)
        .all(|c| c.parent.is_some() && c.cycle == 1));
    assert_eq!(engine.world_model().tree().nodes().len(), 1);
    engine.world_model().check_invariants().unwrap();
    assert_replays(&engine, &events);
}

#[test]
fn refine_writes_from_the_spec_then_debugs_until_something_passes() {
    let mut seen = Vec::new();
    let (engine, events) = drive(
        false,
        config(Strategy::Refine, 6),
        |ask| {
            seen.push((ask.kind, ask.base));
            match ask.n {
                1 => {
                    assert!(ask.prompt.contains("from the specification"), "{}", ask.prompt);
                    code("k1 FAIL")
                }
                2 => {
                    assert!(ask.prompt.contains("12 of 64 elements differ"), "{}", ask.prompt);
                    assert!(ask.prompt.contains("max abs error 0.5"), "the log is shown");
                    assert!(ask.prompt.contains("k1 FAIL"), "the failing code is shown");
                    "no code here".into()
                }
                3 => {
                    assert!(ask.prompt.contains("format_error"), "{}", ask.prompt);
                    kernel(3, 1.5, 0)
                }
                4 => {
                    assert!(ask.prompt.contains("make the best kernel faster"), "{}", ask.prompt);
                    code("k4 FAIL")
                }
                5 => {
                    assert!(
                        ask.prompt.contains("did not beat it: candidate 3: incorrect_numerical"),
                        "{}",
                        ask.prompt
                    );
                    kernel(5, 2.0, 0)
                }
                k => kernel(k, 1.2, 0),
            }
        },
        500,
    );
    assert_eq!(
        seen,
        vec![
            (CodeKind::Action, None),
            (CodeKind::Debug, Some(1)),
            // The answer of round 2 had no code: fix what it started from (candidate 1).
            (CodeKind::Debug, Some(1)),
            (CodeKind::Improve, Some(2)),
            (CodeKind::Improve, Some(2)),
            (CodeKind::Improve, Some(4)),
        ]
    );
    let (best, _) = finished(&engine);
    assert_eq!(best, Some(4));
    assert_eq!(engine.round(), 6);
    assert_replays(&engine, &events);
}

// --- evolve -----------------------------------------------------------------------------------

/// Speeds that grow with the round, one scripted outlier at round 9, a failure every 7th round,
/// and loop counts that spread candidates over several cells.
fn evolve_coder(ask: &Ask) -> String {
    match ask.n {
        9 => kernel(9, 5.0, 2),
        k if k % 7 == 0 => code(&format!("k{k} FAIL")),
        k => kernel(k, 1.0 + k as f64 / 20.0, k % 4),
    }
}

#[test]
fn evolve_spends_the_budget_over_all_islands_and_finds_the_fastest() {
    let cfg = EngineConfig {
        rng_seed: 42,
        ..config(Strategy::Evolve, 15)
    };
    let (engine, events) = drive(true, cfg, evolve_coder, 500);
    let (best, reason) = finished(&engine);
    let best = engine.candidate(best.unwrap()).unwrap();
    assert!(best.sources[0].content.contains("SPEED=5"), "{best:?}");
    assert!(reason.contains("round budget (15)"), "{reason}");
    assert_eq!(engine.round(), 15);
    assert_eq!(
        engine.candidates().iter().filter(|c| c.final_result.is_some()).count(),
        3
    );
    let ev = engine.evolve().expect("evolve state");
    assert_eq!(ev.islands().len(), 3);
    assert_eq!(ev.grid(), [4, 4]);
    // Round-robin: every island got 5 rounds, and every round's child is the island's.
    for (i, island) in ev.islands().iter().enumerate() {
        assert_eq!(island.children.len(), 5, "island {i}");
        for id in &island.children {
            let c = engine.candidate(*id).unwrap();
            assert_eq!((c.round as usize - 1) % 3, i, "candidate {id} is island {i}'s");
        }
    }
    // Each child's parent was sampled from its island's archive (the seed passed, so every
    // round is an improvement of an elite), and the inspirations are other elites.
    assert_eq!(ev.steps().len(), 15);
    for step in ev.steps() {
        assert_eq!(step.kind, CodeKind::Improve);
        let child = engine.candidates().iter().find(|c| c.round == step.round).unwrap();
        assert_eq!(child.parent, step.parent);
        assert!(step.inspirations.len() <= 2);
        assert!(!step.inspirations.contains(&step.parent.unwrap()));
    }
    // Failed children never enter an archive; archives hold one passing candidate per cell.
    for island in ev.islands() {
        let mut cells: Vec<[u32; 2]> = island.archive.iter().map(|e| e.cell).collect();
        cells.dedup();
        assert_eq!(cells.len(), island.archive.len());
        for e in &island.archive {
            let c = engine.candidate(e.candidate).unwrap();
            assert!(c.passed(), "candidate {} failed but is an elite", c.id);
            assert_eq!(descriptors(&c.sources, ev.grid()), e.cell);
        }
    }
    // Migration after rounds 5, 10 and 15, each island to the next.
    let rounds: Vec<u32> = ev.migrations().iter().map(|m| m.round).collect();
    assert_eq!(rounds, vec![5, 5, 5, 10, 10, 10, 15, 15, 15]);
    assert!(ev.migrations().iter().all(|m| m.to == (m.from + 1) % 3));
    // The outlier (candidate 10, round 9, island 2) migrated to island 0 after round 10.
    let m = ev.migrations().iter().find(|m| m.round == 10 && m.from == 2).unwrap();
    assert_eq!((m.candidate, m.accepted), (10, true));
    assert!(ev.islands()[0].contains(10));
    assert!(!ev.islands()[1].children.contains(&10) && !ev.islands()[0].children.contains(&10));
    // Rounds on island 0 after that migration may build on it; the tree stays the root alone.
    assert_eq!(engine.world_model().tree().nodes().len(), 1);
    assert_replays(&engine, &events);
}

#[test]
fn evolve_is_deterministic_per_rng_seed() {
    let run = |rng_seed| {
        let cfg = EngineConfig {
            rng_seed,
            ..config(Strategy::Evolve, 24)
        };
        drive(true, cfg, evolve_coder, 500).0
    };
    let (a, b) = (run(1), run(1));
    assert_eq!(a.evolve(), b.evolve());
    assert_eq!(a.candidates(), b.candidates());
    // Some seed samples differently from seed 1 (the parent draw is not a constant).
    let parents = |e: &Engine| e.evolve().unwrap().steps().iter().map(|s| s.parent).collect::<Vec<_>>();
    assert!(
        (2..12).any(|s| parents(&run(s)) != parents(&a)),
        "the rng seed changes nothing"
    );
}

#[test]
fn evolve_without_a_seed_starts_each_island_from_the_spec_and_debugs_per_island() {
    let cfg = EngineConfig {
        islands: 2,
        migration_interval: 0,
        ..config(Strategy::Evolve, 8)
    };
    let mut seen = Vec::new();
    let (engine, events) = drive(
        false,
        cfg,
        |ask| {
            seen.push((ask.kind, ask.base));
            match ask.n {
                // Island 0 fails once, then passes; island 1 passes at once.
                1 => code("k1 FAIL"),
                2 => kernel(2, 1.5, 0),
                3 => kernel(3, 1.2, 1),
                k => {
                    if ask.kind == CodeKind::Improve {
                        assert!(ask.prompt.contains("## Parent: candidate"), "{}", ask.prompt);
                    }
                    kernel(k, 1.0 + k as f64 / 10.0, k % 3)
                }
            }
        },
        500,
    );
    assert_eq!(seen[0], (CodeKind::Action, None), "island 0 writes from the spec");
    assert_eq!(seen[1], (CodeKind::Action, None), "island 1 too: its own first attempt");
    assert_eq!(seen[2], (CodeKind::Debug, Some(1)), "island 0 fixes its own failure");
    assert_eq!(
        seen[3],
        (CodeKind::Improve, Some(2)),
        "island 1 improves its only elite"
    );
    assert!(seen[4..].iter().all(|s| s.0 == CodeKind::Improve));
    let ev = engine.evolve().unwrap();
    assert!(ev.migrations().is_empty(), "migration_interval 0 never migrates");
    assert!(!ev.islands()[0].contains(1), "a failed child is no elite");
    // Without migration, an island's elites are its own children.
    for (i, island) in ev.islands().iter().enumerate() {
        assert!(!island.archive.is_empty());
        assert!(
            island.archive.iter().all(|e| island.children.contains(&e.candidate)),
            "island {i}"
        );
    }
    assert_replays(&engine, &events);
}

#[test]
fn evolve_prompts_show_the_parent_and_inspirations_with_their_scores() {
    let cfg = EngineConfig {
        islands: 1,
        ..config(Strategy::Evolve, 6)
    };
    let mut last_prompt = String::new();
    let (engine, _) = drive(
        true,
        cfg,
        |ask| {
            last_prompt = ask.prompt.to_string();
            kernel(ask.n, 1.0 + ask.n as f64 / 10.0, ask.n % 4)
        },
        500,
    );
    let step = engine.evolve().unwrap().steps().last().unwrap().clone();
    assert_eq!(step.inspirations.len(), 2, "{step:?}");
    let parent = step.parent.unwrap();
    assert!(
        last_prompt.contains(&format!("## Parent: candidate {parent} (passed, ")),
        "{last_prompt}"
    );
    for (n, id) in step.inspirations.iter().enumerate() {
        let header = format!("## Inspiration {}: candidate {id} (passed, ", n + 1);
        assert!(last_prompt.contains(&header), "{last_prompt}");
    }
    assert!(last_prompt.contains("# Task: toy"));
    assert!(last_prompt.contains("## Measurements so far"));
    assert!(!last_prompt.contains("World model"), "no tree for the baselines");
}

// --- shared accounting ------------------------------------------------------------------------

#[test]
fn every_strategy_spends_the_same_rounds_and_evaluations() {
    for strategy in [Strategy::Refine, Strategy::Evolve] {
        let (engine, events) = drive(true, config(strategy, 10), evolve_coder, 500);
        let codes = events
            .iter()
            .filter(|e| matches!(e, Event::CoderAnswered { .. }))
            .count();
        let evals = events.iter().filter(|e| matches!(e, Event::Evaluated { .. })).count();
        assert_eq!(codes, 10, "{strategy}");
        // Seed + one per round (every answer had code) + the final top 3.
        assert_eq!(evals, 1 + 10 + 3, "{strategy}");
        assert_eq!(engine.cycle_count(), 1);
        assert!(engine.is_finished());
    }
}

#[test]
fn a_fatal_failure_ends_a_baseline_run_with_the_final_re_measurement() {
    for strategy in [Strategy::Refine, Strategy::Evolve] {
        let mut engine = Engine::new();
        engine
            .apply(&Event::Started {
                task: brief(true),
                config: config(strategy, 10),
            })
            .unwrap();
        let Some(Request::Evaluate { id, candidate_id, .. }) = engine.pending().cloned() else {
            panic!()
        };
        engine
            .apply(&Event::Evaluated {
                request_id: id,
                candidate_id,
                summary: summary("SPEED=1.0"),
            })
            .unwrap();
        let Some(Request::Code { id, .. }) = engine.pending().cloned() else {
            panic!("{:?}", engine.pending())
        };
        engine
            .apply(&Event::RequestFailed {
                request_id: id,
                error: "budget exhausted: tokens".into(),
                fatal: true,
            })
            .unwrap();
        assert!(
            matches!(
                engine.pending(),
                Some(Request::Evaluate {
                    purpose: Purpose::Final,
                    ..
                })
            ),
            "{strategy}: {:?}",
            engine.pending()
        );
    }
}

#[test]
fn the_strategy_is_part_of_the_config_and_old_configs_still_load() {
    let old = serde_json::json!({"rounds": 7, "difficulty_cap": 3});
    let c: EngineConfig = serde_json::from_value(old).unwrap();
    assert_eq!(c.strategy, Strategy::WorldModel);
    assert_eq!(
        (c.rounds, c.islands, c.migration_interval, c.archive_grid),
        (7, 3, 5, [4, 4])
    );
    let v = serde_json::to_value(config(Strategy::Evolve, 3)).unwrap();
    assert_eq!(v["strategy"], "evolve");
    assert_eq!(
        serde_json::to_value(Strategy::WorldModel).unwrap(),
        serde_json::json!("world_model")
    );
    for (text, s) in [
        ("world-model", Strategy::WorldModel),
        ("world_model", Strategy::WorldModel),
        ("refine", Strategy::Refine),
        ("Evolve", Strategy::Evolve),
    ] {
        assert_eq!(text.parse::<Strategy>().unwrap(), s);
    }
    assert!("annealing".parse::<Strategy>().is_err());
    assert_eq!(Strategy::WorldModel.to_string(), "world-model");
}

// --- the knob tuner as the coder of a baseline ---------------------------------------------

const KNOBS: &str = r#"
[[knob]]
name = "unroll"
values = [1, 2, 4, 8]
default = 1

[[knob]]
name = "block"
range = { min = 16, max = 128, step = 16 }
default = 16
"#;

/// Speed peaks at unroll 8, block 64.
fn knob_speed(source: &str) -> f64 {
    let get = |k: &str| -> f64 {
        source
            .split(&format!("{k}="))
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap()
    };
    (1.0 + get("unroll").log2() * 0.2) * (1.0 + 0.3 * (1.0 - ((get("block") - 64.0) / 64.0).abs()))
}

#[test]
fn the_knob_tuner_serves_the_baselines_too() {
    use ksearch_search::tuner::Tuner;
    let template = ksearch_spec::KernelTemplate {
        file: "kernel.c".into(),
        source: "/* unroll={{ unroll }} block={{ block }} */\nvoid k(void) {}\n".into(),
        space: ksearch_spec::KnobSpace::parse("knobs.toml", KNOBS).unwrap(),
    };
    let tuner = Tuner::new(template, Default::default(), Default::default()).unwrap();
    let optimum = knob_speed("unroll=8 block=64");
    for strategy in [Strategy::Refine, Strategy::Evolve] {
        let mut engine = Engine::new();
        let mut task = brief(false);
        task.seed = Some(vec![Source {
            path: "kernel.c".into(),
            content: tuner.seed().unwrap(),
        }]);
        engine
            .apply(&Event::Started {
                task,
                config: config(strategy, 16),
            })
            .unwrap();
        while let Some(request) = engine.pending().cloned() {
            let event = match request {
                Request::Finished { .. } => break,
                Request::Plan { .. } => panic!("{strategy}: the planner was asked"),
                r @ Request::Code { .. } => Event::CoderAnswered {
                    request_id: r.id().unwrap().into(),
                    text: tuner.answer(&engine, &r).unwrap(),
                },
                Request::Evaluate {
                    id,
                    candidate_id,
                    sources,
                    ..
                } => Event::Evaluated {
                    request_id: id,
                    candidate_id,
                    summary: EvalSummary {
                        status: "passed".into(),
                        reason: None,
                        speedup: Some(knob_speed(&sources[0].content)),
                        relative_noise: Some(0.01),
                        workloads: vec![],
                        log_tail: String::new(),
                        suspicious: None,
                        resources: vec![],
                        profile: None,
                        harness: None,
                    },
                },
            };
            engine.apply(&event).unwrap();
        }
        assert!(engine.is_finished());
        let best = engine.best().unwrap().speedup().unwrap();
        assert!(best >= 0.95 * optimum, "{strategy}: best {best:.3} vs {optimum:.3}");
    }
}

#[test]
#[ignore = "prints prompts and archives for a human to read: cargo test -p ksearch-search --test strategies -- --ignored --nocapture"]
fn show_runs() {
    for strategy in [Strategy::Refine, Strategy::Evolve] {
        let (engine, _) = drive(
            true,
            config(strategy, 7),
            |ask| {
                println!("===== {strategy} {:?} base {:?}\n{}", ask.kind, ask.base, ask.prompt);
                evolve_coder(ask)
            },
            500,
        );
        if let Some(ev) = engine.evolve() {
            println!("{}", serde_json::to_string_pretty(ev).unwrap());
        }
    }
}
