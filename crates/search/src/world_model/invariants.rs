//! The structural invariants of the world model, checked after every applied script and on
//! deserialisation.

use std::collections::{HashMap, HashSet};

use super::engine::signals_problem;
use super::node::{id_problem, NodeStatus};
use super::WorldModel;

impl WorldModel {
    /// Checks: one root (the only node without a parent, named by `root_id`, without an action,
    /// `open` or `solved`); every `parent_id` names an existing node; no cycles; unique, valid
    /// ids, none of them retired; every value within range; `solution_ref` present exactly when
    /// the status is `solved`, `status_reason` exactly when `too_hard`; the active leaf exists;
    /// finite signals. Returns every violation found.
    pub fn check_invariants(&self) -> Result<(), Vec<String>> {
        let tree = &self.decision_tree;
        let mut problems = Vec::new();

        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, n) in tree.nodes.iter().enumerate() {
            if index.insert(n.node_id.as_str(), i).is_some() {
                problems.push(format!("node id '{}' is used more than once", n.node_id));
            }
            if let Some(p) = id_problem(&n.node_id) {
                problems.push(format!("node '{}': node_id: {p}", n.node_id));
            }
        }

        let roots: Vec<&str> = tree
            .nodes
            .iter()
            .filter(|n| n.parent_id.is_none())
            .map(|n| n.node_id.as_str())
            .collect();
        if roots != [tree.root_id.as_str()] {
            problems.push(format!(
                "the nodes without a parent must be exactly the root '{}', found [{}]",
                tree.root_id,
                roots.join(", ")
            ));
        }
        if let Some(root) = tree.root() {
            if root.action.is_some() {
                problems.push(format!("root '{}': the root carries no action", root.node_id));
            }
            if !matches!(root.status, NodeStatus::Open | NodeStatus::Solved) {
                problems.push(format!(
                    "root '{}': status '{}' (the root is open or solved)",
                    root.node_id,
                    root.status.as_str()
                ));
            }
        }

        for n in &tree.nodes {
            let id = &n.node_id;
            if let Some(parent) = &n.parent_id {
                if !index.contains_key(parent.as_str()) {
                    problems.push(format!("node '{id}': parent_id: no node '{parent}'"));
                }
            }
            for (field, message) in n.problems() {
                problems.push(format!("node '{id}': {field}: {message}"));
            }
            if n.solution_ref.is_some() != (n.status == NodeStatus::Solved) {
                problems.push(format!(
                    "node '{id}': status '{}' with{} solution_ref (solved exactly when a solution is attached)",
                    n.status.as_str(),
                    if n.solution_ref.is_some() { "" } else { "out" }
                ));
            }
            if n.status_reason.is_some() != (n.status == NodeStatus::TooHard) {
                problems.push(format!(
                    "node '{id}': status '{}' with{} status_reason (a reason exactly when too_hard)",
                    n.status.as_str(),
                    if n.status_reason.is_some() { "" } else { "out" }
                ));
            }
        }

        // No cycles: walking up from any node reaches a node without a parent within n steps.
        let mut reaches_root: HashSet<usize> = HashSet::new();
        for start in 0..tree.nodes.len() {
            let mut seen: Vec<usize> = Vec::new();
            let mut cursor = Some(start);
            let mut ok = false;
            while let Some(i) = cursor {
                if reaches_root.contains(&i) {
                    ok = true;
                    break;
                }
                if seen.contains(&i) {
                    break;
                }
                seen.push(i);
                match &tree.nodes[i].parent_id {
                    None => {
                        ok = true;
                        break;
                    }
                    Some(p) => cursor = index.get(p.as_str()).copied(),
                }
            }
            if ok {
                reaches_root.extend(seen);
            } else if cursor.is_some() {
                problems.push(format!("node '{}' is on a parent cycle", tree.nodes[start].node_id));
            }
        }

        if !index.contains_key(tree.active_leaf_id.as_str()) {
            problems.push(format!("active_leaf_id: no node '{}'", tree.active_leaf_id));
        }
        for retired in &tree.retired_ids {
            if index.contains_key(retired.as_str()) {
                problems.push(format!("node '{retired}' exists but its id is retired"));
            }
        }
        if let Some(p) = signals_problem(&self.computed_signals) {
            problems.push(p);
        }

        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SolutionRef, WorldModel};
    use crate::world_model::NodeStatus;

    #[test]
    fn engine_and_planner_operations_keep_the_invariants_and_corruption_is_caught() {
        let mut wm = WorldModel::new("k");
        wm.check_invariants().unwrap();
        let sol = SolutionRef {
            candidate_id: 1,
            speedup: 1.0,
            latency_ns: 5.0,
            round: 0,
        };
        wm.attach_solution("root", sol, 0).unwrap();
        wm.check_invariants().unwrap();

        let mut broken = wm.clone();
        broken.decision_tree.nodes[0].status = NodeStatus::TooHard;
        broken.decision_tree.retired_ids.push("root".into());
        assert_eq!(
            broken.check_invariants().unwrap_err(),
            [
                "root 'root': status 'too_hard' (the root is open or solved)",
                "node 'root': status 'too_hard' with solution_ref (solved exactly when a solution is attached)",
                "node 'root': status 'too_hard' without status_reason (a reason exactly when too_hard)",
                "node 'root' exists but its id is retired",
            ]
        );
    }
}
