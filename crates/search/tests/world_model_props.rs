//! Property tests of the world model: random trees grown by random planner scripts (valid and
//! invalid mixes) and random engine calls; after every step the invariants hold, rejected
//! scripts change nothing, planner scripts never touch engine-owned fields, serialisation
//! round-trips, and the compact rendering respects its caps and keeps the active path.

use std::collections::{HashMap, HashSet};

use ksearch_search::world_model::{EditScript, NodeStatus, SolutionRef, WorldModel};
use proptest::prelude::*;
use serde_json::{json, Value};

/// A node reference, resolved against the tree when the step runs (so that scripts mostly name
/// nodes that exist, and trees grow).
#[derive(Debug, Clone)]
enum Ref {
    Existing(usize),
    Missing,
    Odd,
}

impl Ref {
    fn resolve(&self, wm: &WorldModel) -> String {
        let nodes = wm.tree().nodes();
        match self {
            Ref::Existing(i) => nodes[i % nodes.len()].node_id.clone(),
            Ref::Missing => "n999".to_string(),
            Ref::Odd => "bad id".to_string(),
        }
    }
}

fn reference(sloppy: bool) -> BoxedStrategy<Ref> {
    if sloppy {
        prop_oneof![6 => (0usize..64).prop_map(Ref::Existing), 1 => Just(Ref::Missing), 1 => Just(Ref::Odd)].boxed()
    } else {
        (0usize..64).prop_map(Ref::Existing).boxed()
    }
}

/// Valid values, or (when sloppy) valid ones mixed with out-of-range and mistyped ones.
fn pick(valid: BoxedStrategy<Value>, invalid: Vec<Value>, sloppy: bool) -> BoxedStrategy<Value> {
    if sloppy {
        prop_oneof![3 => valid, 1 => prop::sample::select(invalid)].boxed()
    } else {
        valid
    }
}

fn rating(sloppy: bool) -> BoxedStrategy<Value> {
    let valid = (0u32..=20).prop_map(|k| json!(f64::from(k) / 2.0)).boxed();
    pick(valid, vec![json!(10.5), json!(-1), json!("high")], sloppy)
}

fn unit(sloppy: bool) -> BoxedStrategy<Value> {
    let valid = (0u32..=10).prop_map(|k| json!(f64::from(k) / 10.0)).boxed();
    pick(valid, vec![json!(1.5), json!(null), json!(-0.1)], sloppy)
}

fn action(sloppy: bool) -> BoxedStrategy<Value> {
    let difficulty = pick(
        (1u32..=5).prop_map(|d| json!(d)).boxed(),
        vec![json!(0), json!(6), json!(2.5)],
        sloppy,
    );
    let speedup = pick(
        (1u32..=30).prop_map(|k| json!(f64::from(k) / 10.0)).boxed(),
        vec![json!(0)],
        sloppy,
    );
    (
        difficulty,
        unit(sloppy),
        prop::option::of(speedup),
        prop::bool::weighted(if sloppy { 0.2 } else { 0.0 }),
    )
        .prop_map(|(difficulty, score, speedup, drop_title)| {
            let mut a = json!({"title": "t", "difficulty": difficulty, "score": score});
            if let Some(s) = speedup {
                a["expected_speedup"] = s;
            }
            if drop_title {
                a.as_object_mut().unwrap().remove("title");
            }
            a
        })
        .boxed()
}

fn impacts(sloppy: bool) -> BoxedStrategy<Value> {
    let risk = pick(
        prop::sample::select(vec![json!("low"), json!("medium"), json!("high")]).boxed(),
        vec![json!("extreme")],
        sloppy,
    );
    (rating(sloppy), risk)
        .prop_map(|(r, risk)| json!({"register_pressure": {"rating": r, "risk": risk}}))
        .boxed()
}

/// A proposed node without `parent_id` (added when the op is resolved).
fn new_node(sloppy: bool) -> BoxedStrategy<Value> {
    let extras: Vec<&'static str> = if sloppy {
        vec!["", "", "status", "solution_ref", "node_id", "n1"]
    } else {
        vec!["", "", "", "", "node_id"]
    };
    (
        rating(sloppy),
        unit(sloppy),
        prop::option::of(impacts(sloppy)),
        prop::option::of(action(sloppy)),
        prop::sample::select(extras),
        0u32..40,
    )
        .prop_map(|(rating, confidence, impacts, action, extra, k)| {
            let mut n = json!({"decision": "d", "choice": "c", "overall_rating": rating, "confidence": confidence});
            if let Some(i) = impacts {
                n["impacts"] = i;
            }
            if let Some(a) = action {
                n["action"] = a;
            }
            match extra {
                "status" => n["status"] = json!("solved"),
                "solution_ref" => n["solution_ref"] = json!({"candidate_id": 1, "speedup": 9.0}),
                "node_id" => n["node_id"] = json!(format!("alt{k}")),
                "n1" => n["node_id"] = json!("n1"),
                _ => {}
            }
            n
        })
        .boxed()
}

fn set(sloppy: bool) -> BoxedStrategy<Value> {
    let statuses = if sloppy {
        vec!["open", "closed", "solved", "too_hard"]
    } else {
        vec!["open", "closed"]
    };
    let extras: Vec<&'static str> = if sloppy {
        vec!["", "parent_id", "node_id", "solution_ref", "status_reason", "notes"]
    } else {
        vec!["", "", "notes"]
    };
    (
        prop::option::of(rating(sloppy)),
        prop::option::of(unit(sloppy)),
        prop::option::of(prop::sample::select(statuses)),
        prop::option::of(prop_oneof![
            action(sloppy),
            Just(json!(null)),
            Just(json!({"score": 0.1}))
        ]),
        prop::option::of(impacts(sloppy)),
        prop::sample::select(extras),
    )
        .prop_map(|(rating, confidence, status, action, impacts, extra)| {
            let mut s = json!({});
            if let Some(r) = rating {
                s["overall_rating"] = r;
            }
            if let Some(c) = confidence {
                s["confidence"] = c;
            }
            if let Some(st) = status {
                s["status"] = json!(st);
            }
            if let Some(a) = action {
                s["action"] = a;
            }
            if let Some(i) = impacts {
                s["impacts"] = i;
            }
            match extra {
                "" => {}
                "notes" => s["notes"] = json!("measured"),
                "solution_ref" => s["solution_ref"] = json!(null),
                // parent_id: the only way a planner could make a cycle (n1 under its descendant).
                "parent_id" => s["parent_id"] = json!("n3"),
                field => s[field] = json!("renamed"),
            }
            s
        })
        .boxed()
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Ref, Value),
    Update(Ref, Value),
    Split(Ref, Vec<Value>),
    Delete(Ref),
    Garbage(Value),
}

fn op(sloppy: bool) -> BoxedStrategy<Op> {
    let garbage = if sloppy { 1 } else { 0 };
    let mut choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (
            8,
            (reference(sloppy), new_node(sloppy))
                .prop_map(|(r, n)| Op::Insert(r, n))
                .boxed(),
        ),
        (
            5,
            (reference(sloppy), set(sloppy))
                .prop_map(|(r, s)| Op::Update(r, s))
                .boxed(),
        ),
        (
            2,
            (
                reference(sloppy),
                prop::collection::vec(new_node(sloppy), if sloppy { 0..=3 } else { 1..=2 }),
            )
                .prop_map(|(r, c)| Op::Split(r, c))
                .boxed(),
        ),
        (2, reference(sloppy).prop_map(Op::Delete).boxed()),
    ];
    if garbage > 0 {
        choices.push((
            1,
            prop::sample::select(vec![
                json!({"op": "move_node", "node_id": "n1"}),
                json!(7),
                json!({"op": "delete_node"}),
                json!({"op": "insert_node", "node_id": "n5", "parent_id": "root"}),
            ])
            .prop_map(Op::Garbage)
            .boxed(),
        ));
    }
    proptest::strategy::Union::new_weighted(choices).boxed()
}

#[derive(Debug, Clone)]
struct Script {
    active: Option<Ref>,
    ops: Vec<Op>,
    summary: bool,
}

impl Script {
    fn resolve(&self, wm: &WorldModel) -> Value {
        let ops: Vec<Value> = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Insert(parent, node) => {
                    let mut node = node.clone();
                    node["parent_id"] = json!(parent.resolve(wm));
                    json!({"op": "insert_node", "node": node})
                }
                Op::Update(target, set) => json!({"op": "update_node", "node_id": target.resolve(wm), "set": set}),
                Op::Split(target, children) => {
                    json!({"op": "split_node", "node_id": target.resolve(wm), "children": children})
                }
                Op::Delete(target) => json!({"op": "delete_node", "node_id": target.resolve(wm)}),
                Op::Garbage(v) => v.clone(),
            })
            .collect();
        let mut s = json!({"ops": ops});
        if let Some(a) = &self.active {
            s["active_leaf_id"] = json!(a.resolve(wm));
        }
        if self.summary {
            s["kernel_summary"] = json!("k2");
        }
        s
    }
}

fn script() -> impl Strategy<Value = Script> {
    prop::bool::weighted(0.3).prop_flat_map(|sloppy| {
        (
            prop::option::of(reference(sloppy)),
            prop::collection::vec(op(sloppy), if sloppy { 0..=5 } else { 1..=3 }),
            any::<bool>(),
        )
            .prop_map(|(active, ops, summary)| Script { active, ops, summary })
    })
}

#[derive(Debug, Clone)]
enum Step {
    Planner(Script),
    Attach(Ref, u32),
    TooHard(Ref),
    Focus(Ref),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => script().prop_map(Step::Planner),
        3 => (reference(true), 1u32..=30).prop_map(|(r, s)| Step::Attach(r, s)),
        2 => reference(true).prop_map(Step::TooHard),
        1 => reference(true).prop_map(Step::Focus),
    ]
}

/// What the engine owns, per node: solution, status, reason.
type Owned = HashMap<String, (Option<SolutionRef>, NodeStatus, Option<String>)>;

fn owned(wm: &WorldModel) -> Owned {
    wm.tree()
        .nodes()
        .iter()
        .map(|n| {
            (
                n.node_id.clone(),
                (n.solution_ref.clone(), n.status, n.status_reason.clone()),
            )
        })
        .collect()
}

fn check_engine_fields_untouched(before: &Owned, after: &WorldModel) -> Result<(), TestCaseError> {
    for n in after.tree().nodes() {
        match before.get(&n.node_id) {
            Some((sol, status, reason)) => {
                prop_assert_eq!(&n.solution_ref, sol, "solution_ref of {} changed", n.node_id);
                if *status == NodeStatus::Solved || n.status == NodeStatus::Solved {
                    prop_assert_eq!(n.status, *status, "solved status of {} changed", n.node_id);
                }
                if n.status == NodeStatus::TooHard {
                    prop_assert_eq!(
                        *status,
                        NodeStatus::TooHard,
                        "the planner set too_hard on {}",
                        n.node_id
                    );
                    prop_assert_eq!(&n.status_reason, reason);
                }
            }
            None => {
                prop_assert_eq!(n.status, NodeStatus::Open, "new node {} is not open", n.node_id);
                prop_assert!(n.solution_ref.is_none());
            }
        }
    }
    // Solved nodes are never deleted.
    let now: HashSet<&str> = after.tree().nodes().iter().map(|n| n.node_id.as_str()).collect();
    for (id, (sol, _, _)) in before {
        if sol.is_some() {
            prop_assert!(now.contains(id.as_str()), "solved node {} was deleted", id);
        }
    }
    Ok(())
}

fn check_round_trip(wm: &WorldModel) -> Result<(), TestCaseError> {
    let text = serde_json::to_string(wm).unwrap();
    let back: WorldModel = serde_json::from_str(&text).unwrap();
    prop_assert_eq!(&back, wm);
    prop_assert_eq!(serde_json::to_string(&back).unwrap(), text);
    Ok(())
}

/// The size of the id-only rendering of the protected paths (root->active, root->best).
fn protected_id_only_size(wm: &WorldModel) -> usize {
    let tree = wm.tree();
    let mut ids: HashSet<&str> = tree
        .path_to(tree.active_leaf_id())
        .iter()
        .map(|n| n.node_id.as_str())
        .collect();
    if let Some(best) = tree.best_solved() {
        ids.extend(tree.path_to(&best.node_id).iter().map(|n| n.node_id.as_str()));
    }
    let chars: usize = ids.iter().map(|id| 2 * tree.depth(id).unwrap() + id.len()).sum();
    chars + ids.len().saturating_sub(1)
}

fn check_render(wm: &WorldModel, max_nodes: usize, max_chars: usize) -> Result<(), TestCaseError> {
    let text = wm.render_compact(max_nodes, max_chars);
    prop_assert!(
        text.chars().count() <= max_chars,
        "{} chars > {}",
        text.chars().count(),
        max_chars
    );
    prop_assert_eq!(&text, &wm.render_compact(max_nodes, max_chars), "not deterministic");
    if max_chars >= protected_id_only_size(wm) {
        let first_tokens: HashSet<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
        for n in wm.tree().path_to(wm.tree().active_leaf_id()) {
            prop_assert!(
                first_tokens.contains(n.node_id.as_str()),
                "{} missing from\n{}",
                n.node_id,
                text
            );
        }
    }
    Ok(())
}

fn check_selection(wm: &WorldModel, cap: u8) -> Result<(), TestCaseError> {
    let frontier = wm.frontier();
    for n in &frontier {
        prop_assert!(n.is_open_action());
    }
    let eligible: Vec<_> = frontier
        .iter()
        .filter(|n| n.action.as_ref().is_some_and(|a| a.difficulty <= cap))
        .collect();
    match wm.select_action(cap, None) {
        None => prop_assert!(eligible.is_empty()),
        Some(id) => {
            let chosen = eligible.iter().find(|n| n.node_id == id);
            prop_assert!(chosen.is_some(), "{} is not an eligible frontier action", id);
            let score = chosen.and_then(|n| n.action.as_ref()).map_or(0.0, |a| a.score);
            for n in &eligible {
                prop_assert!(n.action.as_ref().map_or(0.0, |a| a.score) <= score);
            }
        }
    }
    Ok(())
}

proptest! {
    // 256 cases by default; PROPTEST_CASES=N runs more.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn random_histories_keep_every_property(
        steps in prop::collection::vec(step(), 1..50),
        max_nodes in 0usize..25,
        max_chars in 0usize..1500,
        cap in 1u8..=5,
    ) {
        let mut wm = WorldModel::new("k");
        for (round, step) in (1u32..).zip(steps) {
            match step {
                Step::Planner(script) => {
                    let script = script.resolve(&wm);
                    let before_text = serde_json::to_string(&wm).unwrap();
                    let before_owned = owned(&wm);
                    match wm.apply_value(&script, round) {
                        Ok(report) => {
                            check_engine_fields_untouched(&before_owned, &wm)?;
                            for id in &report.inserted {
                                prop_assert_eq!(wm.node(id).map(|n| n.last_updated_round), Some(round));
                            }
                            for id in &report.updated {
                                prop_assert_eq!(wm.node(id).map(|n| n.last_updated_round), Some(round));
                            }
                            prop_assert!(report.inserted.len() <= 3);
                            // A parsed script serialises and parses back to itself.
                            let parsed = EditScript::from_value(&script).unwrap();
                            let again: EditScript =
                                serde_json::from_value(serde_json::to_value(&parsed).unwrap()).unwrap();
                            prop_assert_eq!(again, parsed);
                        }
                        Err(errors) => {
                            prop_assert!(!errors.is_empty());
                            prop_assert_eq!(serde_json::to_string(&wm).unwrap(), before_text);
                            for e in &errors {
                                let text = e.to_string();
                                if let Some(i) = e.op_index {
                                    prop_assert!(text.starts_with(&format!("ops[{i}]")), "{}", text);
                                }
                            }
                        }
                    }
                }
                Step::Attach(r, s) => {
                    let id = r.resolve(&wm);
                    let sol = SolutionRef {
                        candidate_id: i64::from(round),
                        speedup: f64::from(s) / 10.0,
                        latency_ns: 1000.0 / f64::from(s),
                        round,
                    };
                    let _ = wm.attach_solution(&id, sol, round);
                }
                Step::TooHard(r) => {
                    let id = r.resolve(&wm);
                    let _ = wm.mark_too_hard(&id, format!("failed in round {round}"), round);
                }
                Step::Focus(r) => {
                    let id = r.resolve(&wm);
                    let _ = wm.set_active_leaf(&id);
                }
            }
            if let Err(problems) = wm.check_invariants() {
                prop_assert!(false, "invariants broken: {:?}", problems);
            }
            check_round_trip(&wm)?;
            check_render(&wm, max_nodes, max_chars)?;
            check_selection(&wm, cap)?;
        }
    }

    /// Scripts that only insert valid nodes under existing ones grow the tree; renders with
    /// roomy caps show every node.
    #[test]
    fn valid_inserts_always_apply(parents in prop::collection::vec(0usize..50, 1..30)) {
        let mut wm = WorldModel::new("k");
        for (round, p) in (1u32..).zip(parents) {
            let ids: Vec<String> = wm.tree().nodes().iter().map(|n| n.node_id.clone()).collect();
            let parent = &ids[p % ids.len()];
            let script = json!({"active_leaf_id": parent, "ops": [{"op": "insert_node", "node": {
                "parent_id": parent, "decision": "d", "choice": "c", "overall_rating": 5, "confidence": 0.5,
                "action": {"title": "t", "difficulty": 2, "score": 0.5}}}]});
            let report = wm.apply_value(&script, round).unwrap();
            prop_assert_eq!(report.inserted.len(), 1);
            prop_assert_eq!(report.inserted[0].clone(), format!("n{}", ids.len()));
        }
        let text = wm.render_compact(100, 100_000);
        prop_assert_eq!(text.lines().count(), wm.tree().nodes().len());
    }
}
