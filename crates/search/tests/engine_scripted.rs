//! The engine driven by scripted answers: no network, no evaluator. A "kernel" here is a text
//! whose markers say how it would measure: `SPEED=1.5` passes at 1.5x, `FAIL` fails.

mod common;
use common::*;
use ksearch_search::engine::*;
use ksearch_search::world_model::NodeStatus;
use serde_json::json;

fn insert(id: &str, parent: &str, score: f64, difficulty: u8) -> serde_json::Value {
    json!({"op": "insert_node", "node": {"node_id": id, "parent_id": parent, "decision": format!("decide {id}"),
        "choice": format!("choice {id}"), "overall_rating": 6, "confidence": 0.5,
        "action": {"title": format!("do {id}"), "description": "change it", "rationale": "faster", "difficulty": difficulty, "score": score}}})
}

/// A planner that inits three actions, proposes children under whatever got solved, and refines
/// with a no-op rating update.
fn simple_planner(plan: &PlanKind, _m: &[ksearch_messages::Message], n: usize) -> String {
    match plan {
        PlanKind::Init => json!({"kernel_summary": "copy", "ops": [insert("a", "root", 0.9, 2), insert("b", "root", 0.5, 2), insert("c", "root", 0.3, 5)]}).to_string(),
        PlanKind::Refine { node_id } => json!({"ops": [insert(&format!("{node_id}x{n}"), node_id, 0.8, 2)]}).to_string(),
        PlanKind::TooHard { node_id } => json!({"ops": [{"op": "update_node", "node_id": node_id, "set": {"notes": "too hard"}}]}).to_string(),
        PlanKind::Propose => json!({"ops": [insert(&format!("p{n}"), "root", 0.4, 1)]}).to_string(),
    }
}

#[test]
fn a_full_run_finds_the_fastest_candidate_and_re_measures_it() {
    let config = EngineConfig {
        rounds: 8,
        stagnation_window: 2,
        ..EngineConfig::default()
    };
    // Round k produces a kernel of speed 1 + k/10, except round 3 which is the fastest.
    let (engine, events) = drive(
        true,
        config,
        simple_planner,
        |_, k| {
            code(&format!(
                "k{k} SPEED={}",
                if k == 3 { 3.0 } else { 1.0 + k as f64 / 10.0 }
            ))
        },
        500,
    );
    let Some(Request::Finished { best_candidate, reason }) = engine.pending() else {
        panic!("not finished")
    };
    let best = engine.candidate(best_candidate.unwrap()).unwrap();
    assert!(best.sources[0].content.contains("SPEED=3"), "{best:?}");
    assert!(reason.contains("round budget (8)"), "{reason}");
    assert_eq!(engine.round(), 8);
    // The top 3 passing candidates were re-measured.
    assert_eq!(
        engine.candidates().iter().filter(|c| c.final_result.is_some()).count(),
        3
    );
    // The seed is attached to the root, the first cycle's node is solved with its best.
    let wm = engine.world_model();
    assert!(wm.node("root").unwrap().solution_ref.is_some());
    assert_eq!(wm.node("a").unwrap().status, NodeStatus::Solved);
    wm.check_invariants().unwrap();
    // Replaying the log rebuilds the same state.
    let again = Engine::replay(&events).unwrap();
    assert_eq!(again.world_model().to_json(), wm.to_json());
    assert_eq!(again.pending(), engine.pending());
    assert_eq!(again.candidates(), engine.candidates());
}

#[test]
fn the_highest_score_action_goes_first_and_builds_on_the_seed() {
    let (engine, _) = drive(
        true,
        EngineConfig::default(),
        simple_planner,
        |_, _| code("SPEED=1.1"),
        3,
    );
    let Some(Request::Code {
        node_id,
        code: kind,
        base_candidate,
        messages,
        ..
    }) = engine.pending()
    else {
        panic!()
    };
    assert_eq!(
        (node_id.as_str(), *kind, *base_candidate),
        ("a", CodeKind::Action, Some(1))
    );
    let prompt = &messages[1].content;
    assert!(prompt.contains("## Your assignment: do a"), "{prompt}");
    assert!(prompt.contains("seed SPEED=1.0"), "the base code is shown: {prompt}");
}

#[test]
fn stagnation_ends_a_cycle_and_failures_close_the_node_as_too_hard() {
    let config = EngineConfig {
        rounds: 30,
        stagnation_window: 3,
        ..EngineConfig::default()
    };
    let mut asked_too_hard = false;
    let (engine, _) = drive(
        false,
        config,
        |plan, messages, n| {
            if let PlanKind::TooHard { node_id } = plan {
                asked_too_hard = true;
                assert_eq!(node_id, "a");
                assert!(
                    messages[1].content.contains("attempted 3 times"),
                    "{}",
                    messages[1].content
                );
            }
            simple_planner(plan, messages, n)
        },
        |kind, k| {
            if k <= 3 {
                assert_eq!(kind, if k == 1 { CodeKind::Action } else { CodeKind::Debug });
                code("FAIL")
            } else {
                code("SPEED=1.2")
            }
        },
        40,
    );
    assert!(asked_too_hard);
    let a = engine.world_model().node("a").unwrap();
    assert_eq!(a.status, NodeStatus::TooHard);
    assert!(a.status_reason.as_deref().unwrap().contains("12 of 64 elements differ"));
    // The next cycle moved on to "b" (never back to the closed "a").
    assert!(engine.candidates().iter().skip(3).all(|c| c.node_id != "a"));
}

#[test]
fn a_rejected_edit_script_is_re_asked_with_every_error_and_changes_nothing() {
    let mut seen_feedback = String::new();
    let (engine, _) = drive(
        false,
        EngineConfig::default(),
        |plan, messages, n| match (plan, n) {
            (PlanKind::Init, 1) => {
                json!({"ops": [insert("a", "nope", 0.9, 2), {"op": "delete_node", "node_id": "root"}]}).to_string()
            }
            (PlanKind::Init, 2) => {
                seen_feedback = messages[1].content.clone();
                simple_planner(plan, messages, n)
            }
            _ => simple_planner(plan, messages, n),
        },
        |_, _| code("SPEED=1.0"),
        4,
    );
    assert!(seen_feedback.contains("ops[0] (insert_node a)"), "{seen_feedback}");
    assert!(seen_feedback.contains("ops[1] (delete_node root)"), "{seen_feedback}");
    assert!(seen_feedback.contains("nothing was applied"), "{seen_feedback}");
    assert!(
        engine.world_model().node("a").is_some(),
        "the corrected answer was applied"
    );
}

#[test]
fn an_answer_without_code_is_a_failed_attempt_that_asks_for_a_fix() {
    let (engine, _) = drive(
        false,
        EngineConfig::default(),
        simple_planner,
        |_, k| {
            if k == 1 {
                "I would rather not.".into()
            } else {
                code("SPEED=1.3")
            }
        },
        3,
    );
    let Some(Request::Code {
        code: kind, messages, ..
    }) = engine.pending()
    else {
        panic!("{:?}", engine.pending())
    };
    assert_eq!(*kind, CodeKind::Debug);
    assert!(messages[1].content.contains("format_error"), "{}", messages[1].content);
}

#[test]
fn a_fatal_failure_stops_the_search_and_still_re_measures() {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(true),
            config: EngineConfig::default(),
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
    let id = engine.pending().unwrap().id().unwrap().to_string();
    engine
        .apply(&Event::RequestFailed {
            request_id: id,
            error: "budget exhausted: dollars".into(),
            fatal: true,
        })
        .unwrap();
    let Some(Request::Evaluate {
        id,
        candidate_id,
        purpose: Purpose::Final,
        ..
    }) = engine.pending().cloned()
    else {
        panic!("{:?}", engine.pending())
    };
    engine
        .apply(&Event::Evaluated {
            request_id: id,
            candidate_id,
            summary: summary("SPEED=1.0"),
        })
        .unwrap();
    let Some(Request::Finished { best_candidate, reason }) = engine.pending() else {
        panic!()
    };
    assert_eq!(
        (*best_candidate, reason.as_str()),
        (Some(1), "budget exhausted: dollars")
    );
}

#[test]
fn events_that_answer_nothing_are_refused() {
    let mut engine = Engine::new();
    let e = engine
        .apply(&Event::PlannerAnswered {
            request_id: "r1".into(),
            text: "{}".into(),
        })
        .unwrap_err();
    assert!(matches!(e, EngineError::Unexpected { .. }), "{e}");
    engine
        .apply(&Event::Started {
            task: brief(false),
            config: EngineConfig::default(),
        })
        .unwrap();
    let e = engine
        .apply(&Event::PlannerAnswered {
            request_id: "r9".into(),
            text: "{}".into(),
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("does not answer the pending request (planner r1)"),
        "{e}"
    );
    assert!(engine
        .apply(&Event::Started {
            task: brief(false),
            config: EngineConfig::default()
        })
        .is_err());
}

#[test]
#[ignore = "prints prompts for a human to read: cargo test -p ksearch-search -- --ignored --nocapture"]
fn show_prompts() {
    let (_, _) = drive(
        true,
        EngineConfig {
            rounds: 4,
            stagnation_window: 1,
            ..EngineConfig::default()
        },
        |plan, m, n| {
            println!("===== PLANNER {plan:?}\n{}\n{}", m[0].content, m[1].content);
            simple_planner(plan, m, n)
        },
        |_, _| code("SPEED=1.2"),
        30,
    );
}
