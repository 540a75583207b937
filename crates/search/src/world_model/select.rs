//! The frontier and the engine's selection rule.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::node::{Node, NodeId, NodeStatus};
use super::WorldModel;

/// The default difficulty cap of the selection rule.
pub const DEFAULT_DIFFICULTY_CAP: u8 = 4;

/// The optional exploration bonus: `score + c * sqrt(ln(total + 1) / (visits(parent) + 1))`.
#[derive(Debug, Clone, Copy)]
pub struct Exploration<'a> {
    /// The bonus weight; the bonus is off unless `c > 0` (and finite).
    pub c: f64,
    /// How many cycles worked on each node (missing ids count 0). `visits(parent)` is the sum
    /// over the parent's subtree (the parent included); `total` the sum over the whole tree.
    pub visits: &'a HashMap<NodeId, u32>,
}

impl WorldModel {
    /// Whether the children of `id` may be worked on: `id` is the root, has a `solution_ref`, or
    /// is an open decision without an action whose own parent is unlocked (a split node or a
    /// pure grouping node does not lock its children).
    fn is_unlocked(&self, id: &str) -> bool {
        let tree = &self.decision_tree;
        let mut cursor = tree.node(id);
        let mut steps = 0;
        while let Some(n) = cursor {
            if n.node_id == tree.root_id || n.solution_ref.is_some() {
                return true;
            }
            if n.action.is_some() || n.status != NodeStatus::Open || steps > tree.nodes.len() {
                return false;
            }
            steps += 1;
            cursor = n.parent_id.as_deref().and_then(|p| tree.node(p));
        }
        false
    }

    /// The open actions (action, status `open`, no `solution_ref`) whose parent is unlocked
    /// (see the doc), in node order.
    pub fn frontier(&self) -> Vec<&Node> {
        self.decision_tree
            .nodes
            .iter()
            .filter(|n| n.is_open_action() && n.parent_id.as_deref().is_some_and(|p| self.is_unlocked(p)))
            .collect()
    }

    /// The engine's choice of the next action: among frontier actions with `difficulty <= cap`,
    /// the highest score (plus the exploration bonus when given), then the lowest difficulty,
    /// then the highest `overall_rating`, then the earliest in node order.
    pub fn select_action(&self, difficulty_cap: u8, exploration: Option<Exploration<'_>>) -> Option<NodeId> {
        let exploration = exploration.filter(|e| e.c.is_finite() && e.c > 0.0);
        let subtree_visits = exploration.map(|e| self.subtree_visits(e.visits));
        let total: f64 = exploration
            .map(|e| {
                self.decision_tree
                    .nodes
                    .iter()
                    .map(|n| f64::from(e.visits.get(&n.node_id).copied().unwrap_or(0)))
                    .sum()
            })
            .unwrap_or(0.0);

        let mut best: Option<(&Node, f64)> = None;
        for node in self.frontier() {
            let Some(action) = &node.action else { continue };
            if action.difficulty > difficulty_cap {
                continue;
            }
            let mut value = action.score;
            if let (Some(e), Some(sub)) = (exploration, &subtree_visits) {
                let parent_visits = node
                    .parent_id
                    .as_deref()
                    .and_then(|p| sub.get(p))
                    .copied()
                    .unwrap_or(0.0);
                value += e.c * ((total + 1.0).ln() / (parent_visits + 1.0)).sqrt();
            }
            let better = match best {
                None => true,
                Some((incumbent, incumbent_value)) => compare(node, value, incumbent, incumbent_value).is_gt(),
            };
            if better {
                best = Some((node, value));
            }
        }
        best.map(|(n, _)| n.node_id.clone())
    }

    /// Visits summed over each node's subtree.
    fn subtree_visits(&self, visits: &HashMap<NodeId, u32>) -> HashMap<&str, f64> {
        let tree = &self.decision_tree;
        let mut sums: HashMap<&str, f64> = HashMap::new();
        for n in &tree.nodes {
            let v = f64::from(visits.get(&n.node_id).copied().unwrap_or(0));
            if v == 0.0 {
                continue;
            }
            for ancestor in tree.path_to(&n.node_id) {
                *sums.entry(ancestor.node_id.as_str()).or_insert(0.0) += v;
            }
        }
        sums
    }
}

/// `Greater` when `a` (with selection value `va`) beats `b`; node order breaks the last tie
/// because candidates are visited in node order and only a strictly better one replaces the
/// incumbent.
fn compare(a: &Node, va: f64, b: &Node, vb: f64) -> Ordering {
    let (Some(aa), Some(ab)) = (&a.action, &b.action) else {
        return Ordering::Equal;
    };
    va.total_cmp(&vb)
        .then(ab.difficulty.cmp(&aa.difficulty))
        .then(a.overall_rating.total_cmp(&b.overall_rating))
}
