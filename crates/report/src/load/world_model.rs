//! The world-model tree as the report shows it.

use crate::model::*;
use ksearch_search::engine::Engine;
use std::collections::HashMap;

pub(super) fn tree(engine: &Engine, best: Option<i64>) -> Tree {
    let wm = engine.world_model();
    let t = wm.tree();
    let best_node = best.and_then(|id| engine.candidate(id)).map(|c| c.node_id.clone());
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for c in engine.candidates() {
        *per_node.entry(c.node_id.as_str()).or_default() += 1;
    }
    let mut nodes = Vec::new();
    // Depth-first from the root, children in node order: the order of the compact rendering.
    let mut stack: Vec<(&ksearch_search::world_model::Node, usize)> = t.root().map(|r| (r, 0)).into_iter().collect();
    while let Some((n, depth)) = stack.pop() {
        let action = n.action.as_ref();
        nodes.push(TreeNode {
            id: n.node_id.to_string(),
            parent: n.parent_id.as_ref().map(|p| p.to_string()),
            depth,
            decision: n.decision.clone(),
            choice: n.choice.clone(),
            rating: n.overall_rating,
            confidence: n.confidence,
            status: n.status.as_str().to_string(),
            status_reason: n.status_reason.clone(),
            action: action.map(|a| a.title.clone()),
            difficulty: action.map(|a| a.difficulty),
            score: action.map(|a| a.score),
            expected_speedup: action.and_then(|a| a.expected_speedup),
            result: n.solution_ref.as_ref().map(|s| NodeResult {
                candidate: s.candidate_id,
                speedup: s.speedup,
                round: s.round,
            }),
            notes: n.notes.clone(),
            attempts: per_node.get(n.node_id.as_str()).copied().unwrap_or(0),
            last_updated_round: n.last_updated_round,
            active: n.node_id.as_str() == t.active_leaf_id(),
            best: best_node.as_deref() == Some(n.node_id.as_str()),
        });
        for child in t.children(&n.node_id).into_iter().rev() {
            stack.push((child, depth + 1));
        }
    }
    Tree {
        kernel_summary: wm.kernel_summary.clone(),
        open_questions: wm.open_questions.clone(),
        active_leaf: t.active_leaf_id().to_string(),
        nodes,
    }
}
