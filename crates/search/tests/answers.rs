//! Answer validation in one pass (`Engine::check_answer`): every error of an answer at once,
//! the same list in the re-ask, and the fallback after repeated rejected refine answers.

mod common;
use common::*;
use ksearch_search::engine::*;
use serde_json::json;

fn started(config: EngineConfig) -> Engine {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief(false),
            config,
        })
        .unwrap();
    engine
}

fn pending_id(engine: &Engine) -> String {
    engine.pending().and_then(|r| r.id()).unwrap().to_string()
}

fn insert(id: &str, parent: &str) -> serde_json::Value {
    json!({"op": "insert_node", "node": {"node_id": id, "parent_id": parent, "decision": "d", "choice": "c",
        "overall_rating": 6, "confidence": 0.5,
        "action": {"title": "t", "description": "d", "rationale": "r", "difficulty": 1, "score": 0.5}}})
}

/// An init answer with a shape error (op 0's unknown field), a range error (op 1's rating) and
/// a rule error (op 2 names a node that does not exist).
fn broken_init() -> String {
    let mut shape = insert("a", "root");
    shape["node"]["colour"] = json!("blue");
    let mut range = insert("b", "root");
    range["node"]["overall_rating"] = json!(11);
    let rule = json!({"op": "update_node", "node_id": "nope", "set": {"notes": "x"}});
    json!({"ops": [shape, range, rule, insert("c", "root")]}).to_string()
}

#[test]
fn every_error_of_an_answer_is_reported_at_once() {
    let engine = started(EngineConfig::default());
    let id = pending_id(&engine);
    let errors = engine.check_answer(&id, &broken_init()).unwrap_err();
    let all = errors.join("\n");
    assert!(
        all.contains("ops[0] (insert_node a): node.colour: unknown field"),
        "{all}"
    );
    assert!(
        all.contains("ops[1] (insert_node b): node.overall_rating: 11 is out of range"),
        "{all}"
    );
    assert!(all.contains("ops[2] (update_node nope): no node 'nope'"), "{all}");
    assert_eq!(errors.len(), 3, "each error once: {errors:#?}");
    // Nothing was applied by checking.
    assert_eq!(engine.world_model().tree().nodes().len(), 1);
    // A good answer passes; not-JSON is one error; a coder's answer needs code.
    let good = json!({"ops": [insert("a", "root"), insert("b", "root"), insert("c", "root")]}).to_string();
    assert_eq!(engine.check_answer(&id, &good), Ok(()));
    assert_eq!(engine.check_answer(&id, "no json here").unwrap_err().len(), 1);
    let unknown = engine.check_answer("r99", &good).unwrap_err();
    assert!(unknown[0].contains("no request r99"), "{unknown:?}");

    // Submitting the broken answer re-asks with the same list.
    let mut engine = engine;
    engine
        .apply(&Event::PlannerAnswered {
            request_id: id,
            text: broken_init(),
        })
        .unwrap();
    let Some(Request::Plan { messages, .. }) = engine.pending() else {
        panic!("not re-asked")
    };
    let prompt = &messages[1].content;
    for e in &errors {
        assert!(prompt.contains(e.as_str()), "{e} missing from the re-ask:\n{prompt}");
    }
    // A coder request: an answer without code is refused with the extraction error.
    engine
        .apply(&Event::PlannerAnswered {
            request_id: pending_id(&engine),
            text: good,
        })
        .unwrap();
    let code_id = pending_id(&engine);
    assert!(matches!(engine.pending(), Some(Request::Code { .. })));
    let no_code = engine.check_answer(&code_id, "I would unroll the loop.").unwrap_err();
    assert!(no_code[0].starts_with("format_error:"), "{no_code:?}");
    assert_eq!(engine.check_answer(&code_id, &code("SPEED=1.2")), Ok(()));
}

#[test]
fn a_refine_step_given_up_keeps_its_evidence_in_the_propose_prompt() {
    let config = EngineConfig {
        rounds: 6,
        stagnation_window: 1,
        knob_share: 0.0,
        ..EngineConfig::default()
    };
    let mut propose_prompts = Vec::new();
    let (_, _) = drive(
        true,
        config,
        |plan, messages, _| match plan {
            PlanKind::Init => {
                json!({"ops": [insert("a", "root"), insert("b", "root"), insert("c", "root")]}).to_string()
            }
            // Every refine answer is rejected.
            PlanKind::Refine { .. } => {
                json!({"ops": [{"op": "update_node", "node_id": "nope", "set": {"notes": "x"}}]}).to_string()
            }
            PlanKind::Propose => {
                propose_prompts.push(messages[1].content.clone());
                json!({"ops": [insert("p", "a")]}).to_string()
            }
            PlanKind::TooHard { .. } => json!({"ops": []}).to_string(),
        },
        |_, k| {
            code(&format!(
                "DESCRIPTION: attempt {k}\nk{k} SPEED={}",
                if k == 1 { 1.5 } else { 0.5 }
            ))
        },
        200,
    );
    let prompt = propose_prompts
        .first()
        .expect("a propose request after the rejected refines");
    assert!(prompt.contains("## What just happened"), "{prompt}");
    assert!(
        prompt.contains("Your refine answers for node a (d: c) were rejected 3 times"),
        "{prompt}"
    );
    assert!(prompt.contains("no node 'nope'"), "the last errors: {prompt}");
    assert!(prompt.contains("its best candidate: candidate 2"), "{prompt}");
    assert!(prompt.contains("Attempts of that cycle:"), "{prompt}");
}
