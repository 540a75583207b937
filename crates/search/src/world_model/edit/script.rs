//! The edit script and its ops as the planner writes them, with the range checks of the fields
//! they carry (checks that need no model; `apply` checks against the model).

use serde::{Deserialize, Serialize};

use super::patch::{ActionPatch, ImpactsPatch};
use crate::world_model::node::{self, Action, NodeId, NodeStatus};

/// At most this many nodes are created by one script (inserts and split children together).
pub const MAX_NEW_NODES: usize = 3;

/// A planner's edit of the world model.
///
/// Parse untrusted JSON with [`EditScript::from_value`] / [`EditScript::from_json`] (or serde,
/// which goes through the same parser); build it directly in Rust for rule-based planners.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub struct EditScript {
    /// The node to focus on after the script; it must exist after the script.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_leaf_id: Option<NodeId>,
    /// Replaces the model's `kernel_summary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_summary: Option<String>,
    /// Replaces the model's `open_questions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_questions: Option<Vec<String>>,
    /// The operations, applied in order.
    pub ops: Vec<EditOp>,
}

/// One operation of an edit script, tagged by `op` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum EditOp {
    /// A new node under an existing one.
    InsertNode {
        /// The node; its `parent_id` says where.
        node: NewNode,
    },
    /// Changes planner-owned fields of a node.
    UpdateNode {
        /// The node to change.
        node_id: NodeId,
        /// The fields to change; absent ones stay.
        set: NodeUpdate,
    },
    /// Replaces a node's action by sub-decisions (the children).
    SplitNode {
        /// The node whose action is replaced.
        node_id: NodeId,
        /// The sub-decisions, inserted as its children in order.
        children: Vec<NewNode>,
    },
    /// Removes a leaf without a solution.
    DeleteNode {
        /// The leaf to remove.
        node_id: NodeId,
    },
}

impl EditOp {
    /// The op's tag in JSON: `insert_node`, `update_node`, `split_node`, `delete_node`.
    pub fn kind(&self) -> &'static str {
        match self {
            EditOp::InsertNode { .. } => "insert_node",
            EditOp::UpdateNode { .. } => "update_node",
            EditOp::SplitNode { .. } => "split_node",
            EditOp::DeleteNode { .. } => "delete_node",
        }
    }

    /// How many nodes the op creates.
    pub fn new_node_count(&self) -> usize {
        match self {
            EditOp::InsertNode { .. } => 1,
            EditOp::SplitNode { children, .. } => children.len(),
            _ => 0,
        }
    }
}

/// A node as the planner proposes it (inserted, or a split child).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewNode {
    /// Optional: the engine assigns `n<k>` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<NodeId>,
    /// Required for `insert_node`; for a split child absent or the split node's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<NodeId>,
    /// The design question the node answers.
    pub decision: String,
    /// The answer this node takes to it.
    pub choice: String,
    /// The planner's overall rating, 0-10.
    pub overall_rating: f64,
    /// The planner's confidence in the rating, 0-1.
    pub confidence: f64,
    /// Dimensions (and fields) left out default to rating 5, risk medium, empty notes.
    #[serde(skip_serializing_if = "ImpactsPatch::is_empty")]
    pub impacts: ImpactsPatch,
    /// Free notes; empty when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// The optimisation step the coder can implement; `None` for a pure decision node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

/// The `set` of an `update_node`: the planner-owned fields to change.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NodeUpdate {
    /// New design question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// New choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    /// New overall rating, 0-10.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall_rating: Option<f64>,
    /// New confidence, 0-1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Changes of the impacts, per dimension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impacts: Option<ImpactsPatch>,
    /// New notes, replacing the old.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Removes or changes the action.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<ActionEdit>,
    /// Only `closed`, or `open` (an explicit reopen); `solved`/`too_hard` are the engine's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

impl NodeUpdate {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == NodeUpdate::default()
    }
}

/// What an `update_node` does to the action: `null` removes it, an object changes the given
/// fields (a node without an action needs `title`, `difficulty` and `score`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ActionEdit {
    /// `null`: the node loses its action.
    Remove,
    /// An object: the given fields change (or make the action).
    Set(ActionPatch),
}

/// Range problems of a proposed node's fields (relative field names, e.g. `overall_rating`).
pub(crate) fn new_node_problems(n: &NewNode) -> Vec<(String, String)> {
    let mut out = Vec::new();
    node::push(&mut out, "overall_rating", node::check_rating(n.overall_rating));
    node::push(&mut out, "confidence", node::check_confidence(n.confidence));
    out.extend(n.impacts.problems("impacts."));
    if let Some(a) = &n.action {
        out.extend(node::action_problems(
            "action.",
            Some(a.difficulty),
            Some(a.score),
            a.expected_speedup,
        ));
    }
    if let Some(id) = &n.node_id {
        node::push(&mut out, "node_id", node::id_problem(id));
    }
    out
}

/// Range problems of an update's fields (relative to `set`).
pub(crate) fn update_problems(u: &NodeUpdate) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(r) = u.overall_rating {
        node::push(&mut out, "overall_rating", node::check_rating(r));
    }
    if let Some(c) = u.confidence {
        node::push(&mut out, "confidence", node::check_confidence(c));
    }
    if let Some(i) = &u.impacts {
        out.extend(i.problems("impacts."));
    }
    if let Some(ActionEdit::Set(p)) = &u.action {
        out.extend(p.problems("action."));
    }
    out
}
