//! One test per rule of docs/world-model.md: every rejection asserts the exact error text, every
//! accepted op asserts the resulting tree.

use std::collections::HashMap;

use ksearch_search::world_model::{
    EditScript, EngineError, Exploration, NodeStatus, Risk, SolutionRef, WorldModel, DEFAULT_DIFFICULTY_CAP,
};
use serde_json::{json, Value};

fn node(parent: &str, choice: &str, action: Option<(&str, u8, f64)>) -> Value {
    let mut n = json!({"parent_id": parent, "decision": "d", "choice": choice,
                       "overall_rating": 6, "confidence": 0.5});
    if let Some((title, difficulty, score)) = action {
        n["action"] = json!({"title": title, "difficulty": difficulty, "score": score});
    }
    n
}

fn insert(n: Value) -> Value {
    json!({"op": "insert_node", "node": n})
}

/// root
///   n1 [a1 d2 s0.8]
///     n2 [a2 d1 s0.9]      (locked until n1 is solved)
///   n3 [a3 d3 s0.6]
///   n4 (no action: a grouping decision)
///     n5 [a5 d2 s0.5]
fn fixture() -> WorldModel {
    let mut wm = WorldModel::new("row softmax");
    wm.apply_value(
        &json!({"ops": [
            insert(node("root", "c1", Some(("a1", 2, 0.8)))),
            insert(node("n1", "c2", Some(("a2", 1, 0.9)))),
            insert(node("root", "c3", Some(("a3", 3, 0.6)))),
        ]}),
        1,
    )
    .unwrap();
    wm.apply_value(
        &json!({"ops": [insert(node("root", "c4", None)), insert(node("n4", "c5", Some(("a5", 2, 0.5))))]}),
        2,
    )
    .unwrap();
    wm
}

fn sol(speedup: f64, round: u32) -> SolutionRef {
    SolutionRef {
        candidate_id: i64::from(round),
        speedup,
        latency_ns: 1000.0,
        round,
    }
}

fn snapshot(wm: &WorldModel) -> String {
    serde_json::to_string(wm).unwrap()
}

/// Applies a script that must be rejected; checks the model is unchanged; returns the messages.
fn reject(wm: &mut WorldModel, script: Value) -> Vec<String> {
    let before = snapshot(wm);
    let errors = wm.apply_value(&script, 9).expect_err("the script should be rejected");
    assert_eq!(snapshot(wm), before, "a rejected script changed the model");
    errors.iter().map(ToString::to_string).collect()
}

fn ids(wm: &WorldModel) -> Vec<&str> {
    wm.tree().nodes().iter().map(|n| n.node_id.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------
// Document, construction, serialisation

#[test]
fn new_model_has_only_the_engine_root() {
    let wm = WorldModel::new("k");
    assert_eq!(ids(&wm), ["root"]);
    let root = wm.node("root").unwrap();
    assert_eq!(root.parent_id, None);
    assert_eq!((root.decision.as_str(), root.choice.as_str()), ("kernel", "the task"));
    assert_eq!(root.status, NodeStatus::Open);
    assert_eq!(wm.tree().active_leaf_id(), "root");
    assert_eq!(wm.tree().root_id(), "root");
    wm.check_invariants().unwrap();
}

#[test]
fn the_doc_example_deserialises_and_round_trips() {
    let doc = json!({
      "kernel_summary": "row softmax, memory-bound at large N",
      "open_questions": ["does the exp dominate at N=77?"],
      "decision_tree": {
        "root_id": "root",
        "active_leaf_id": "n1",
        "nodes": [
          {"node_id": "root", "parent_id": null, "decision": "kernel", "choice": "the task",
           "overall_rating": 5, "confidence": 0.5,
           "impacts": {"memory_bandwidth": {"rating": 5, "risk": "medium", "notes": ""},
                       "register_pressure": {"rating": 5, "risk": "medium", "notes": ""},
                       "compute_intensity": {"rating": 5, "risk": "medium", "notes": ""}},
           "notes": "", "last_updated_round": 0, "status": "open", "action": null, "solution_ref": null},
          {"node_id": "n1", "parent_id": "root",
           "decision": "row reduction strategy", "choice": "one pass with online max/sum",
           "overall_rating": 7.5, "confidence": 0.6,
           "impacts": {
             "memory_bandwidth":  {"rating": 8, "risk": "low",    "notes": "reads x once"},
             "register_pressure": {"rating": 6, "risk": "medium", "notes": ""},
             "compute_intensity": {"rating": 5, "risk": "low",    "notes": "hardware fit"}
           },
           "notes": "...",
           "last_updated_round": 3,
           "status": "open",
           "action": {"title": "fuse max and sum", "description": "...", "rationale": "...",
                      "difficulty": 2, "score": 0.8, "expected_speedup": 1.6},
           "solution_ref": null}
        ]
      },
      "computed_signals": {"last_status": "passed", "last_latency_ns": 1.2e5,
                           "reference_latency_ns": 9.0e4, "last_speedup": 0.75,
                           "best_speedup": 0.9, "best_candidate_id": 4, "round": 7}
    });
    let wm: WorldModel = serde_json::from_value(doc).unwrap();
    let n1 = wm.node("n1").unwrap();
    assert_eq!(n1.impacts.memory_bandwidth.risk, Risk::Low);
    assert_eq!(n1.action.as_ref().unwrap().expected_speedup, Some(1.6));
    assert_eq!(wm.signals().best_candidate_id, Some(4));
    let text = serde_json::to_string(&wm).unwrap();
    let back: WorldModel = serde_json::from_str(&text).unwrap();
    assert_eq!(back, wm);
    assert_eq!(serde_json::to_string(&back).unwrap(), text);
}

#[test]
fn deserialising_checks_the_invariants() {
    let mut doc = fixture().to_json();
    doc["decision_tree"]["nodes"][2]["parent_id"] = json!("n9");
    doc["decision_tree"]["nodes"][3]["overall_rating"] = json!(12);
    let err = serde_json::from_value::<WorldModel>(doc).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid world model: node 'n2': parent_id: no node 'n9'; node 'n3': overall_rating: 12 is out of range 0-10"
    );

    let mut doc = fixture().to_json();
    doc["decision_tree"]["nodes"][1]["parent_id"] = json!("n2"); // n1 <-> n2
    let err = serde_json::from_value::<WorldModel>(doc).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid world model: node 'n1' is on a parent cycle; node 'n2' is on a parent cycle"
    );

    let mut doc = fixture().to_json();
    doc["decision_tree"]["nodes"][2]["node_id"] = json!("n1");
    doc["decision_tree"]["nodes"][2]["status"] = json!("solved");
    let err = serde_json::from_value::<WorldModel>(doc).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid world model: node id 'n1' is used more than once; node 'n1': status 'solved' without solution_ref \
         (solved exactly when a solution is attached); node 'n1' is on a parent cycle"
    );

    let mut doc = fixture().to_json();
    doc["decision_tree"]["nodes"][1]["parent_id"] = json!(null);
    doc["decision_tree"]["active_leaf_id"] = json!("zz");
    let err = serde_json::from_value::<WorldModel>(doc).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid world model: the nodes without a parent must be exactly the root 'root', found [root, n1]; \
         active_leaf_id: no node 'zz'"
    );
}

// ---------------------------------------------------------------------------------------------
// Parsing: malformed scripts

#[test]
fn parse_rejects_a_non_object_script() {
    let errs = EditScript::from_value(&json!([1])).unwrap_err();
    assert_eq!(
        errs[0].to_string(),
        r#"script: expected an object {"active_leaf_id"?, "ops": [...]}, got an array"#
    );
}

#[test]
fn parse_rejects_invalid_json_text() {
    let errs = EditScript::from_json("{\"ops\": [").unwrap_err();
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0]
            .to_string()
            .starts_with("script: not valid JSON: EOF while parsing"),
        "{}",
        errs[0]
    );
}

#[test]
fn parse_reports_script_level_problems() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"foo": 1, "active_leaf_id": 3, "open_questions": ["a", 2]})
        ),
        [
            "foo: unknown field (expected one of active_leaf_id, kernel_summary, open_questions, ops)",
            "active_leaf_id: expected a string, got the number 3",
            "open_questions: item 1: expected a string, got the number 2",
            "ops: missing",
        ]
    );
    assert_eq!(
        reject(&mut wm, json!({"ops": {"op": "delete_node"}})),
        ["ops: expected an array of edit operations, got an object"]
    );
}

#[test]
fn parse_reports_malformed_ops_by_index() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [3, {"node_id": "n1"}, {"op": "remove_node", "node_id": "n1"}, {"op": 7},
                           {"op": "delete_node"}, {"op": "delete_node", "node_id": "n5", "why": "x"}]})
        ),
        [
            r#"ops[0]: expected an object, got the number 3 (an op is an object with an "op" field)"#,
            "ops[1]: op: missing (insert_node, update_node, split_node or delete_node)",
            "ops[2]: op: unknown op 'remove_node' (expected insert_node, update_node, split_node or delete_node)",
            "ops[3]: op: expected a string (insert_node, update_node, split_node or delete_node), got the number 7",
            "ops[4] (delete_node): node_id: missing",
            "ops[5] (delete_node n5): why: unknown field (expected one of op, node_id)",
        ]
    );
}

#[test]
fn parse_reports_every_bad_field_of_a_new_node() {
    let mut wm = fixture();
    let bad = json!({"op": "insert_node", "node": {
        "node_id": "n7", "parent_id": "n1", "choice": 4, "overall_rating": "high", "confidence": 1.5,
        "status": "open", "solution_ref": null, "rating": 3,
        "impacts": {"memory_bandwidth": {"rating": -1, "risk": "extreme"}, "latency": {}},
        "action": {"title": "t", "difficulty": 2.5, "score": 2, "expected_speedup": 0}}});
    assert_eq!(
        reject(&mut wm, json!({"ops": [bad]})),
        [
            "ops[0] (insert_node n7): node.status: engine-owned; new nodes start 'open'",
            "ops[0] (insert_node n7): node.solution_ref: engine-owned; the planner cannot set it",
            "ops[0] (insert_node n7): node.rating: unknown field (expected one of node_id, parent_id, decision, \
             choice, overall_rating, confidence, impacts, notes, action)",
            "ops[0] (insert_node n7): node.decision: missing",
            "ops[0] (insert_node n7): node.choice: expected a string, got the number 4",
            r#"ops[0] (insert_node n7): node.overall_rating: expected a number, got the string "high""#,
            "ops[0] (insert_node n7): node.impacts.latency: unknown field (expected one of memory_bandwidth, \
             register_pressure, compute_intensity)",
            r#"ops[0] (insert_node n7): node.impacts.memory_bandwidth.risk: expected one of low, medium, high, got the string "extreme""#,
            "ops[0] (insert_node n7): node.impacts.memory_bandwidth.rating: -1 is out of range 0-10",
            "ops[0] (insert_node n7): node.action.difficulty: expected an integer 1-5, got 2.5",
            "ops[0] (insert_node n7): node.action.score: 2 is out of range 0-1",
            "ops[0] (insert_node n7): node.action.expected_speedup: 0 must be a finite number > 0",
            "ops[0] (insert_node n7): node.confidence: 1.5 is out of range 0-1",
        ]
    );
}

#[test]
fn parse_requires_the_node_object_and_a_complete_action() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                {"op": "insert_node", "node_id": "n7", "parent_id": "root"},
                {"op": "insert_node", "node": {"parent_id": "root", "decision": "d", "choice": "c",
                  "overall_rating": 5, "confidence": 0.5, "action": {"title": "t", "difficulty": 9}}},
                {"op": "insert_node", "node": {"decision": "d", "choice": "c", "overall_rating": 5,
                  "confidence": 0.5, "impacts": {"register_pressure": 3}}},
            ]})
        ),
        [
            "ops[0] (insert_node): node_id: unknown field (expected one of op, node)",
            "ops[0] (insert_node): parent_id: unknown field (expected one of op, node)",
            "ops[0] (insert_node): node: missing",
            "ops[1] (insert_node): node.action.difficulty: 9 is out of range 1-5",
            "ops[1] (insert_node): node.action.score: missing",
            "ops[2] (insert_node): node.parent_id: missing",
            r#"ops[2] (insert_node): node.impacts.register_pressure: expected an object {"rating", "risk", "notes"}, got the number 3"#,
        ]
    );
}

#[test]
fn parse_rejects_engine_owned_and_structural_fields_in_set() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [{"op": "update_node", "node_id": "n1", "set": {
                "node_id": "x", "parent_id": "n3", "solution_ref": {"candidate_id": 1},
                "last_updated_round": 3, "status_reason": "r", "status": "done", "overall_rating": 11,
                "action": 5}}]})
        ),
        [
            "ops[0] (update_node n1): set.node_id: a node's id cannot change",
            "ops[0] (update_node n1): set.parent_id: a node cannot be moved; insert a new node under the new parent instead",
            "ops[0] (update_node n1): set.solution_ref: engine-owned; the planner cannot set it",
            "ops[0] (update_node n1): set.last_updated_round: engine-owned; the planner cannot set it",
            "ops[0] (update_node n1): set.status_reason: engine-owned; the planner cannot set it",
            "ops[0] (update_node n1): set.action: expected an object, got the number 5 (or null to remove the action)",
            r#"ops[0] (update_node n1): set.status: expected 'closed' or 'open', got the string "done""#,
            "ops[0] (update_node n1): set.overall_rating: 11 is out of range 0-10",
        ]
    );
}

#[test]
fn parse_reports_errors_of_all_ops_at_once_and_round_trips() {
    let script = json!({"active_leaf_id": "n1", "kernel_summary": "k", "open_questions": ["q"], "ops": [
        {"op": "insert_node", "node": {"parent_id": "root", "decision": "d", "choice": "c",
          "overall_rating": 5, "confidence": 0.5, "impacts": {"compute_intensity": {"risk": "high"}},
          "notes": "n", "action": {"title": "t", "difficulty": 2, "score": 0.5, "expected_speedup": 1.2}}},
        {"op": "update_node", "node_id": "n1", "set": {"action": null, "status": "closed",
          "impacts": {"memory_bandwidth": {"rating": 3}}}},
        {"op": "update_node", "node_id": "n3", "set": {"action": {"score": 0.1}}},
        {"op": "split_node", "node_id": "n4", "children": [{"decision": "d", "choice": "c",
          "overall_rating": 1, "confidence": 0}]},
        {"op": "delete_node", "node_id": "n5"}
    ]});
    let parsed = EditScript::from_value(&script).unwrap();
    assert_eq!(parsed.ops.len(), 5);
    let back: EditScript = serde_json::from_value(serde_json::to_value(&parsed).unwrap()).unwrap();
    assert_eq!(back, parsed);
    // The serde path gives the same errors, joined by newlines.
    let err = serde_json::from_value::<EditScript>(json!({"ops": [{"op": "x"}, 1]})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ops[0]: op: unknown op 'x' (expected insert_node, update_node, split_node or delete_node)\n\
         ops[1]: expected an object, got the number 1 (an op is an object with an \"op\" field)"
    );
}

// ---------------------------------------------------------------------------------------------
// insert_node

#[test]
fn insert_assigns_the_next_id_and_fills_defaults() {
    let mut wm = fixture();
    let report = wm
        .apply_value(
            &json!({"ops": [insert(json!({"parent_id": "n3", "decision": "tile", "choice": "64",
                "overall_rating": 7, "confidence": 0.3,
                "impacts": {"register_pressure": {"rating": 2, "risk": "high"}}}))]}),
            4,
        )
        .unwrap();
    assert_eq!(report.inserted, ["n6"]);
    let n6 = wm.node("n6").unwrap();
    assert_eq!(n6.parent_id.as_deref(), Some("n3"));
    assert_eq!(n6.status, NodeStatus::Open);
    assert_eq!(n6.last_updated_round, 4);
    assert_eq!(n6.notes, "");
    assert_eq!(n6.action, None);
    assert_eq!(n6.solution_ref, None);
    assert_eq!(n6.impacts.register_pressure.rating, 2.0);
    assert_eq!(n6.impacts.register_pressure.risk, Risk::High);
    assert_eq!(n6.impacts.register_pressure.notes, "");
    assert_eq!(n6.impacts.memory_bandwidth.rating, 5.0);
    assert_eq!(n6.impacts.memory_bandwidth.risk, Risk::Medium);
    assert_eq!(ids(&wm), ["root", "n1", "n2", "n3", "n4", "n5", "n6"]);
}

#[test]
fn assigned_ids_follow_the_largest_numeric_suffix() {
    let mut wm = fixture();
    let mut named = node("root", "x", None);
    named["node_id"] = json!("n41");
    let mut other = node("root", "y", None);
    other["node_id"] = json!("alt9");
    let report = wm
        .apply_value(
            &json!({"ops": [insert(named), insert(other), insert(node("n41", "z", None))]}),
            3,
        )
        .unwrap();
    assert_eq!(report.inserted, ["n41", "alt9", "n42"]);
}

#[test]
fn insert_may_name_a_node_inserted_earlier_in_the_script() {
    let mut wm = fixture();
    let report = wm
        .apply_value(
            &json!({"active_leaf_id": "n7", "ops": [
                insert(node("root", "a", None)),
                insert(node("n6", "b", Some(("t", 1, 0.5)))),
                {"op": "update_node", "node_id": "n7", "set": {"notes": "child of n6"}},
            ]}),
            5,
        )
        .unwrap();
    assert_eq!(report.inserted, ["n6", "n7"]);
    assert_eq!(report.updated, ["n7"]);
    assert_eq!(report.active_leaf_id, "n7");
    assert_eq!(wm.node("n7").unwrap().parent_id.as_deref(), Some("n6"));
    assert_eq!(wm.node("n7").unwrap().notes, "child of n6");
}

#[test]
fn insert_rejects_missing_parent_existing_and_invalid_ids() {
    let mut wm = fixture();
    let mut dup = node("root", "x", None);
    dup["node_id"] = json!("n1");
    let mut bad = node("root", "x", None);
    bad["node_id"] = json!("a b");
    assert_eq!(
        reject(&mut wm, json!({"ops": [insert(node("n9", "x", None)), insert(dup), insert(bad)]})),
        [
            "ops[0] (insert_node n6): node.parent_id: no node 'n9'",
            "ops[1] (insert_node n1): node.node_id: 'n1' already exists",
            "ops[2] (insert_node a b): node.node_id: 'a b' is not a valid id (1-32 ASCII letters, digits, '_', '-' or '.')",
        ]
    );
}

#[test]
fn at_most_three_new_nodes_per_script() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                insert(node("root", "a", None)),
                {"op": "split_node", "node_id": "n3", "children": [node("n3", "b", None), node("n3", "c", None)]},
                insert(node("root", "d", None)),
            ]})
        ),
        [
            "ops[2] (insert_node n9): the script creates 4 new nodes; at most 3 per script (inserts and split \
             children together)"
        ]
    );
    // Exactly three is fine.
    wm.apply_value(
        &json!({"ops": [insert(node("root", "a", None)), insert(node("root", "b", None)), insert(node("root", "c", None))]}),
        3,
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// update_node

#[test]
fn update_of_a_missing_node_names_the_op() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                {"op": "update_node", "node_id": "n1", "set": {"notes": "ok"}},
                {"op": "update_node", "node_id": "n2", "set": {"notes": "ok"}},
                {"op": "update_node", "node_id": "n9", "set": {"overall_rating": 3}},
            ]})
        ),
        ["ops[2] (update_node n9): no node 'n9'"]
    );
}

#[test]
fn update_changes_planner_fields_and_the_round() {
    let mut wm = fixture();
    let report = wm
        .apply_value(
            &json!({"ops": [{"op": "update_node", "node_id": "n1", "set": {
                "decision": "D", "choice": "C", "overall_rating": 3, "confidence": 0.8,
                "notes": "measured 0.7x", "impacts": {"memory_bandwidth": {"notes": "two passes"},
                                                      "compute_intensity": {"rating": 9, "risk": "low", "notes": "fits"}},
                "action": {"score": 0.2, "rationale": "cheaper"}}}]}),
            7,
        )
        .unwrap();
    assert_eq!(report.updated, ["n1"]);
    let n1 = wm.node("n1").unwrap();
    assert_eq!((n1.decision.as_str(), n1.choice.as_str()), ("D", "C"));
    assert_eq!((n1.overall_rating, n1.confidence), (3.0, 0.8));
    assert_eq!(n1.notes, "measured 0.7x");
    assert_eq!(n1.last_updated_round, 7);
    assert_eq!(n1.impacts.memory_bandwidth.notes, "two passes");
    assert_eq!(n1.impacts.memory_bandwidth.rating, 5.0);
    assert_eq!(n1.impacts.compute_intensity.rating, 9.0);
    let a = n1.action.as_ref().unwrap();
    assert_eq!(
        (a.title.as_str(), a.difficulty, a.score, a.rationale.as_str()),
        ("a1", 2, 0.2, "cheaper")
    );
    // Other nodes keep their round.
    assert_eq!(wm.node("n2").unwrap().last_updated_round, 1);
}

#[test]
fn update_rejects_an_empty_set() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [{"op": "update_node", "node_id": "n1", "set": {}}]})
        ),
        ["ops[0] (update_node n1): set: empty; name at least one field to change"]
    );
}

#[test]
fn update_action_rules() {
    let mut wm = fixture();
    wm.attach_solution("n1", sol(1.3, 3), 3).unwrap();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                {"op": "update_node", "node_id": "n1", "set": {"action": {"score": 0.1}}},
                {"op": "update_node", "node_id": "n1", "set": {"action": null}},
                {"op": "update_node", "node_id": "root", "set": {"action": {"title": "t", "difficulty": 1, "score": 0.5}}},
                {"op": "update_node", "node_id": "n4", "set": {"action": {"title": "t"}}},
            ]})
        ),
        [
            "ops[0] (update_node n1): set.action: 'n1' has a solution_ref; its action can no longer change",
            "ops[1] (update_node n1): set.action: 'n1' has a solution_ref; its action can no longer change",
            "ops[2] (update_node root): set.action: the root carries no action",
            "ops[3] (update_node n4): set.action: 'n4' has no action; a new one needs title, difficulty and score \
             (missing: difficulty, score)",
        ]
    );
    wm.apply_value(
        &json!({"ops": [
            {"op": "update_node", "node_id": "n4", "set": {"action": {"title": "t4", "difficulty": 3, "score": 0.4}}},
            {"op": "update_node", "node_id": "n3", "set": {"action": null}},
        ]}),
        4,
    )
    .unwrap();
    let a4 = wm.node("n4").unwrap().action.clone().unwrap();
    assert_eq!(
        (a4.title.as_str(), a4.difficulty, a4.score, a4.description.as_str()),
        ("t4", 3, 0.4, "")
    );
    assert_eq!(wm.node("n3").unwrap().action, None);
}

#[test]
fn update_status_transitions() {
    let mut wm = fixture();
    wm.attach_solution("n1", sol(1.3, 3), 3).unwrap();
    wm.mark_too_hard("n3", "no passing candidate in 5 rounds", 3).unwrap();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                {"op": "update_node", "node_id": "n2", "set": {"status": "solved"}},
                {"op": "update_node", "node_id": "n5", "set": {"status": "too_hard"}},
                {"op": "update_node", "node_id": "n1", "set": {"status": "closed"}},
                {"op": "update_node", "node_id": "n1", "set": {"status": "open"}},
                {"op": "update_node", "node_id": "root", "set": {"status": "closed"}},
            ]})
        ),
        [
            "ops[0] (update_node n2): set.status: 'solved' is set by the engine only; the planner may set 'closed' or 'open'",
            "ops[1] (update_node n5): set.status: 'too_hard' is set by the engine only; the planner may set 'closed' or 'open'",
            "ops[2] (update_node n1): set.status: 'n1' is solved (it has a solution_ref); its status is engine-owned",
            "ops[3] (update_node n1): set.status: 'n1' is solved (it has a solution_ref); its status is engine-owned",
            "ops[4] (update_node root): set.status: the root cannot be closed",
        ]
    );
    // open -> closed, too_hard -> open (explicit reopen, the reason goes), open -> open is a no-op.
    wm.apply_value(
        &json!({"ops": [
            {"op": "update_node", "node_id": "n2", "set": {"status": "closed"}},
            {"op": "update_node", "node_id": "n3", "set": {"status": "open"}},
            {"op": "update_node", "node_id": "n5", "set": {"status": "open"}},
        ]}),
        4,
    )
    .unwrap();
    assert_eq!(wm.node("n2").unwrap().status, NodeStatus::Closed);
    assert_eq!(wm.node("n3").unwrap().status, NodeStatus::Open);
    assert_eq!(wm.node("n3").unwrap().status_reason, None);
    assert_eq!(wm.node("n5").unwrap().status, NodeStatus::Open);
    // closed -> open, too_hard -> closed.
    wm.mark_too_hard("n5", "r", 5).unwrap();
    wm.apply_value(
        &json!({"ops": [
            {"op": "update_node", "node_id": "n2", "set": {"status": "open"}},
            {"op": "update_node", "node_id": "n5", "set": {"status": "closed"}},
        ]}),
        6,
    )
    .unwrap();
    assert_eq!(wm.node("n2").unwrap().status, NodeStatus::Open);
    assert_eq!(wm.node("n5").unwrap().status, NodeStatus::Closed);
    assert_eq!(wm.node("n5").unwrap().status_reason, None);
}

#[test]
fn update_may_edit_a_solved_node_but_not_its_solution() {
    let mut wm = fixture();
    wm.attach_solution("n1", sol(1.3, 3), 3).unwrap();
    wm.apply_value(
        &json!({"ops": [{"op": "update_node", "node_id": "n1", "set": {"overall_rating": 9, "notes": "1.3x measured"}}]}),
        4,
    )
    .unwrap();
    let n1 = wm.node("n1").unwrap();
    assert_eq!(n1.overall_rating, 9.0);
    assert_eq!(n1.solution_ref, Some(sol(1.3, 3)));
    assert_eq!(n1.status, NodeStatus::Solved);
}

// ---------------------------------------------------------------------------------------------
// split_node

#[test]
fn split_replaces_the_action_by_children() {
    let mut wm = fixture();
    wm.mark_too_hard("n3", "too much at once", 3).unwrap();
    let report = wm
        .apply_value(
            &json!({"ops": [{"op": "split_node", "node_id": "n3", "children": [
                node("n3", "step 1", Some(("s1", 1, 0.7))), {"decision": "d", "choice": "step 2",
                "overall_rating": 5, "confidence": 0.5, "action": {"title": "s2", "difficulty": 2, "score": 0.6}}]}]}),
            4,
        )
        .unwrap();
    assert_eq!(report.inserted, ["n6", "n7"]);
    assert_eq!(report.updated, ["n3"]);
    let n3 = wm.node("n3").unwrap();
    assert_eq!(n3.action, None);
    assert_eq!(n3.status, NodeStatus::Open);
    assert_eq!(n3.status_reason, None);
    assert_eq!(n3.last_updated_round, 4);
    let children: Vec<&str> = wm.tree().children("n3").iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(children, ["n6", "n7"]);
    // The split node does not lock its children: they are on the frontier.
    let frontier: Vec<&str> = wm.frontier().iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(frontier, ["n1", "n5", "n6", "n7"]);
}

#[test]
fn split_rules() {
    let mut wm = fixture();
    wm.attach_solution("n1", sol(1.3, 3), 3).unwrap();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                {"op": "split_node", "node_id": "n1", "children": [node("n1", "x", None)]},
                {"op": "split_node", "node_id": "n9", "children": [{"decision": "d", "choice": "c",
                  "overall_rating": 5, "confidence": 0.5}]},
                {"op": "split_node", "node_id": "n3", "children": []},
                {"op": "split_node", "node_id": "n5", "children": [node("n4", "x", None)]},
            ]})
        ),
        [
            "ops[0] (split_node n1): 'n1' has a solution_ref; only nodes without one can be split (insert under it instead)",
            "ops[1] (split_node n9): no node 'n9'",
            "ops[2] (split_node n3): children: empty; a split needs at least one child",
            "ops[3] (split_node n5): children[0].parent_id: 'n4' must be 'n5' (the split node) or left out",
        ]
    );
    let mut child = node("n3", "x", None);
    child["overall_rating"] = json!(-1);
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [{"op": "split_node", "node_id": "n3", "children": [child]}]})
        ),
        ["ops[0] (split_node n3): children[0].overall_rating: -1 is out of range 0-10"]
    );
}

// ---------------------------------------------------------------------------------------------
// delete_node

#[test]
fn delete_removes_a_leaf_and_retires_its_id() {
    let mut wm = fixture();
    let report = wm
        .apply_value(
            &json!({"ops": [{"op": "delete_node", "node_id": "n5"}, {"op": "delete_node", "node_id": "n4"}]}),
            3,
        )
        .unwrap();
    assert_eq!(report.deleted, ["n5", "n4"]);
    assert_eq!(ids(&wm), ["root", "n1", "n2", "n3"]);
    assert_eq!(wm.tree().retired_ids(), ["n5", "n4"]);
    // The next assigned id skips the retired ones, and a retired id cannot be named again.
    let report = wm
        .apply_value(&json!({"ops": [insert(node("root", "x", None))]}), 4)
        .unwrap();
    assert_eq!(report.inserted, ["n6"]);
    let mut again = node("root", "y", None);
    again["node_id"] = json!("n5");
    assert_eq!(
        reject(&mut wm, json!({"ops": [insert(again)]})),
        ["ops[0] (insert_node n5): node.node_id: 'n5' belonged to a deleted node; ids are never reused"]
    );
}

#[test]
fn delete_rules() {
    let mut wm = fixture();
    wm.attach_solution("n2", sol(1.1, 3), 3).unwrap();
    assert_eq!(
        reject(
            &mut wm,
            json!({"ops": [
                {"op": "delete_node", "node_id": "root"},
                {"op": "delete_node", "node_id": "n4"},
                {"op": "delete_node", "node_id": "n2"},
                {"op": "delete_node", "node_id": "n9"},
            ]})
        ),
        [
            "ops[0] (delete_node root): the root cannot be deleted",
            "ops[1] (delete_node n4): 'n4' has children (n5); only leaves can be deleted",
            "ops[2] (delete_node n2): 'n2' has a solution_ref; solved nodes cannot be deleted",
            "ops[3] (delete_node n9): no node 'n9'",
        ]
    );
    // Closed and too-hard leaves may go.
    wm.mark_too_hard("n3", "r", 4).unwrap();
    wm.apply_value(
        &json!({"ops": [{"op": "update_node", "node_id": "n5", "set": {"status": "closed"}},
                        {"op": "delete_node", "node_id": "n5"}, {"op": "delete_node", "node_id": "n3"}]}),
        5,
    )
    .unwrap();
    assert_eq!(ids(&wm), ["root", "n1", "n2", "n4"]);
}

#[test]
fn deleting_the_active_leaf_moves_focus_to_its_parent() {
    let mut wm = fixture();
    wm.set_active_leaf("n5").unwrap();
    let report = wm
        .apply_value(&json!({"ops": [{"op": "delete_node", "node_id": "n5"}]}), 3)
        .unwrap();
    assert_eq!(report.active_leaf_id, "n4");
    assert_eq!(wm.tree().active_leaf_id(), "n4");
}

// ---------------------------------------------------------------------------------------------
// Script-level rules

#[test]
fn active_leaf_must_exist_after_the_script() {
    let mut wm = fixture();
    assert_eq!(
        reject(
            &mut wm,
            json!({"active_leaf_id": "n5", "ops": [{"op": "delete_node", "node_id": "n5"}]})
        ),
        ["active_leaf_id: no node 'n5' after the script"]
    );
    let report = wm.apply_value(&json!({"active_leaf_id": "n2", "ops": []}), 3).unwrap();
    assert_eq!(report.active_leaf_id, "n2");
}

#[test]
fn a_rejected_script_changes_nothing_and_reports_every_error() {
    let mut wm = fixture();
    let errors = reject(
        &mut wm,
        json!({"active_leaf_id": "zz", "kernel_summary": "changed", "ops": [
            insert(node("root", "fine", None)),
            {"op": "update_node", "node_id": "n1", "set": {"notes": "fine"}},
            {"op": "delete_node", "node_id": "n4"},
            {"op": "update_node", "node_id": "n8", "set": {"notes": "x"}},
        ]}),
    );
    assert_eq!(
        errors,
        [
            "ops[2] (delete_node n4): 'n4' has children (n5); only leaves can be deleted",
            "ops[3] (update_node n8): no node 'n8'",
            "active_leaf_id: no node 'zz' after the script",
        ]
    );
    assert_eq!(wm.kernel_summary, "row softmax");
}

#[test]
fn scripts_may_rewrite_summary_and_questions() {
    let mut wm = fixture();
    wm.apply_value(
        &json!({"kernel_summary": "softmax, latency-bound", "open_questions": ["is exp the bottleneck?"], "ops": []}),
        3,
    )
    .unwrap();
    assert_eq!(wm.kernel_summary, "softmax, latency-bound");
    assert_eq!(wm.open_questions, ["is exp the bottleneck?"]);
}

// ---------------------------------------------------------------------------------------------
// Engine-owned operations

#[test]
fn engine_operations() {
    let mut wm = fixture();
    wm.attach_solution("n1", sol(1.4, 5), 5).unwrap();
    let n1 = wm.node("n1").unwrap();
    assert_eq!((n1.status, n1.last_updated_round), (NodeStatus::Solved, 5));
    assert_eq!(n1.solution_ref, Some(sol(1.4, 5)));

    wm.mark_too_hard("n3", "compile errors", 6).unwrap();
    let n3 = wm.node("n3").unwrap();
    assert_eq!(n3.status, NodeStatus::TooHard);
    assert_eq!(n3.status_reason.as_deref(), Some("compile errors"));

    assert_eq!(wm.mark_too_hard("n1", "x", 7), Err(EngineError::Solved("n1".into())));
    assert_eq!(wm.mark_too_hard("root", "x", 7), Err(EngineError::Root("root".into())));
    assert_eq!(wm.mark_too_hard("n9", "x", 7), Err(EngineError::NoNode("n9".into())));
    assert_eq!(
        wm.attach_solution("n2", sol(f64::NAN, 7), 7).unwrap_err().to_string(),
        "solution.speedup: NaN must be a finite number > 0"
    );
    assert_eq!(wm.set_active_leaf("n9"), Err(EngineError::NoNode("n9".into())));
    // A too-hard node can still be solved later (the engine's word wins), and the root can carry
    // the seed solution.
    wm.attach_solution("n3", sol(1.1, 8), 8).unwrap();
    assert_eq!(wm.node("n3").unwrap().status_reason, None);
    wm.attach_solution("root", sol(1.0, 0), 0).unwrap();
    wm.check_invariants().unwrap();

    let signals = ksearch_search::world_model::ComputedSignals {
        last_status: Some("passed".into()),
        last_speedup: Some(f64::INFINITY),
        ..Default::default()
    };
    assert_eq!(
        wm.set_signals(signals.clone()).unwrap_err().to_string(),
        "computed_signals.last_speedup: inf is not a finite number"
    );
    let signals = ksearch_search::world_model::ComputedSignals {
        last_speedup: Some(1.4),
        round: 8,
        ..signals
    };
    wm.set_signals(signals.clone()).unwrap();
    assert_eq!(wm.signals(), &signals);
}

// ---------------------------------------------------------------------------------------------
// Frontier and selection

fn frontier(wm: &WorldModel) -> Vec<&str> {
    wm.frontier().iter().map(|n| n.node_id.as_str()).collect()
}

#[test]
fn frontier_unlocks_steps_one_at_a_time() {
    let mut wm = fixture();
    // n2 waits for n1; n5 sits under a grouping node without an action, which does not lock.
    assert_eq!(frontier(&wm), ["n1", "n3", "n5"]);
    wm.attach_solution("n1", sol(1.2, 3), 3).unwrap();
    assert_eq!(frontier(&wm), ["n2", "n3", "n5"]);
    wm.mark_too_hard("n3", "r", 4).unwrap();
    assert_eq!(frontier(&wm), ["n2", "n5"]);
    // Closing a grouping node prunes what is under it.
    wm.apply_value(
        &json!({"ops": [{"op": "update_node", "node_id": "n4", "set": {"status": "closed"}}]}),
        5,
    )
    .unwrap();
    assert_eq!(frontier(&wm), ["n2"]);
    // Reopening brings it back.
    wm.apply_value(
        &json!({"ops": [{"op": "update_node", "node_id": "n3", "set": {"status": "open"}}]}),
        6,
    )
    .unwrap();
    assert_eq!(frontier(&wm), ["n2", "n3"]);
}

#[test]
fn selection_prefers_score_then_difficulty_then_rating_then_order() {
    let mut wm = WorldModel::new("k");
    let mut a = node("root", "a", Some(("a", 3, 0.7)));
    a["overall_rating"] = json!(9);
    let mut b = node("root", "b", Some(("b", 2, 0.7)));
    b["overall_rating"] = json!(4);
    let mut c = node("root", "c", Some(("c", 2, 0.7)));
    c["overall_rating"] = json!(8);
    wm.apply_value(&json!({"ops": [insert(a), insert(b), insert(c)]}), 1)
        .unwrap();
    // Same score: lowest difficulty (n2, n3), then highest rating: n3.
    assert_eq!(wm.select_action(DEFAULT_DIFFICULTY_CAP, None).as_deref(), Some("n3"));
    // Equal in everything: the earliest.
    let mut d = node("root", "d", Some(("d", 2, 0.7)));
    d["overall_rating"] = json!(8);
    wm.apply_value(&json!({"ops": [insert(d)]}), 2).unwrap();
    assert_eq!(wm.select_action(DEFAULT_DIFFICULTY_CAP, None).as_deref(), Some("n3"));
    // A higher score wins over everything, unless it is above the difficulty cap.
    wm.apply_value(&json!({"ops": [insert(node("root", "e", Some(("e", 5, 0.9))))]}), 3)
        .unwrap();
    assert_eq!(wm.select_action(DEFAULT_DIFFICULTY_CAP, None).as_deref(), Some("n3"));
    assert_eq!(wm.select_action(5, None).as_deref(), Some("n5"));
    assert_eq!(wm.select_action(1, None), None);
}

#[test]
fn exploration_bonus_favours_rarely_visited_subtrees() {
    let mut wm = WorldModel::new("k");
    wm.apply_value(
        &json!({"ops": [insert(node("root", "a", Some(("a", 2, 0.5)))), insert(node("root", "b", Some(("b", 2, 0.5))))]}),
        1,
    )
    .unwrap();
    wm.attach_solution("n1", sol(1.2, 2), 2).unwrap();
    wm.attach_solution("n2", sol(1.1, 3), 3).unwrap();
    wm.apply_value(
        &json!({"ops": [insert(node("n1", "a1", Some(("a1", 2, 0.6)))), insert(node("n2", "b1", Some(("b1", 2, 0.5))))]}),
        4,
    )
    .unwrap();
    assert_eq!(wm.select_action(4, None).as_deref(), Some("n3"));
    let visits: HashMap<String, u32> = [("n1".to_string(), 6), ("n2".to_string(), 1)].into();
    // n3's parent subtree was visited 6 times, n4's once: with c = 1 the bonus flips the choice.
    let explore = Exploration {
        c: 1.0,
        visits: &visits,
    };
    assert_eq!(wm.select_action(4, Some(explore)).as_deref(), Some("n4"));
    // c = 0 switches the bonus off.
    let off = Exploration {
        c: 0.0,
        visits: &visits,
    };
    assert_eq!(wm.select_action(4, Some(off)).as_deref(), Some("n3"));
}

// ---------------------------------------------------------------------------------------------
// Rendering

#[test]
fn render_shows_one_line_per_node() {
    let mut wm = fixture();
    wm.attach_solution("n1", sol(1.42, 5), 5).unwrap();
    wm.mark_too_hard("n3", "compile errors\nin every round", 6).unwrap();
    wm.set_active_leaf("n2").unwrap();
    let text = wm.render_compact(60, 6000);
    assert_eq!(
        text,
        "root kernel: the task [rating 5, conf 0.5] open\n\
         \x20 n1 d: c1 [rating 6, conf 0.5] solved | action: a1 (difficulty 2, score 0.8) | speedup 1.42x @ round 5\n\
         \x20   n2 d: c2 [rating 6, conf 0.5] open | action: a2 (difficulty 1, score 0.9) <- active\n\
         \x20 n3 d: c3 [rating 6, conf 0.5] too_hard (compile errors in every round) | action: a3 (difficulty 3, score 0.6)\n\
         \x20 n4 d: c4 [rating 6, conf 0.5] open\n\
         \x20   n5 d: c5 [rating 6, conf 0.5] open | action: a5 (difficulty 2, score 0.5)"
    );
}

#[test]
fn render_summarises_closed_subtrees_first_then_far_open_leaves() {
    let mut wm = fixture();
    wm.mark_too_hard("n3", "r", 3).unwrap();
    wm.apply_value(
        &json!({"ops": [insert(node("n3", "x", None)), insert(node("n3", "y", None))]}),
        4,
    )
    .unwrap();
    wm.set_active_leaf("n2").unwrap();
    // 8 nodes; at most 6: the too-hard subtree of n3 (3 nodes) goes first.
    assert_eq!(
        wm.render_compact(6, 6000),
        "root kernel: the task [rating 5, conf 0.5] open\n\
         \x20 n1 d: c1 [rating 6, conf 0.5] open | action: a1 (difficulty 2, score 0.8)\n\
         \x20   n2 d: c2 [rating 6, conf 0.5] open | action: a2 (difficulty 1, score 0.9) <- active\n\
         \x20 n4 d: c4 [rating 6, conf 0.5] open\n\
         \x20   n5 d: c5 [rating 6, conf 0.5] open | action: a5 (difficulty 2, score 0.5)\n\
         \x20 (3 closed nodes omitted)"
    );
    // At most 3: then the open leaf far from the active path (n5), then n4.
    assert_eq!(
        wm.render_compact(3, 6000),
        "root kernel: the task [rating 5, conf 0.5] open\n\
         \x20 n1 d: c1 [rating 6, conf 0.5] open | action: a1 (difficulty 2, score 0.8)\n\
         \x20   n2 d: c2 [rating 6, conf 0.5] open | action: a2 (difficulty 1, score 0.9) <- active\n\
         \x20 (5 nodes omitted: 2 open, 3 closed)"
    );
}

#[test]
fn render_keeps_the_active_and_best_paths_and_the_character_cap() {
    let mut wm = fixture();
    wm.attach_solution("n5", sol(2.0, 4), 4).unwrap();
    wm.set_active_leaf("n2").unwrap();
    let text = wm.render_compact(0, 6000);
    for id in ["root", "n1", "n2", "n4", "n5"] {
        assert!(text.contains(id), "{id} missing from\n{text}");
    }
    assert!(!text.contains("n3 "));
    // Shortened lines when the paths do not fit in full, ids alone after that, then a hard cut.
    assert_eq!(
        wm.render_compact(0, 120),
        "root open\n  n1 open\n    n2 open <- active\n  n4 open\n    n5 solved | speedup 2.00x @ round 4\n  (1 node omitted: 1 open)"
    );
    assert_eq!(wm.render_compact(0, 40), "root\n  n1\n    n2\n  n4\n    n5");
    assert_eq!(wm.render_compact(0, 10), "root\n  n1\n");
    assert_eq!(wm.render_compact(0, 0), "");
}
