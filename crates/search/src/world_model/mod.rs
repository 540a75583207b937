//! The world model: the search's memory, specified in `docs/world-model.md`.
//!
//! A [`WorldModel`] holds the planner's beliefs about the kernel (`kernel_summary`,
//! `open_questions`), a decision tree of optimisation hypotheses (a flat list of [`Node`]s linked
//! by `parent_id` under an engine-created root) and the engine's measured [`ComputedSignals`].
//!
//! Who may write what:
//! - the **planner** edits through [`EditScript`]s ([`WorldModel::apply`]), which are validated
//!   as a whole against a copy and applied all or nothing; every rule violation is reported as an
//!   [`EditError`] naming the op (`ops[2] (update_node n9): no node 'n9'`);
//! - the **engine** alone attaches solutions ([`WorldModel::attach_solution`]), closes failed
//!   actions ([`WorldModel::mark_too_hard`]), moves the active leaf and fills the signals.
//!
//! Nodes stay in insertion order, which makes every query, the selection rule
//! ([`WorldModel::select_action`]) and the rendering ([`WorldModel::render_compact`])
//! deterministic. The tree's fields are private, so a `WorldModel` can only change through the
//! operations above, each of which keeps [`WorldModel::check_invariants`] true; deserialising
//! checks the invariants too.
//!
//! Modules: `node` (node types and range rules), `edit` (edit script types and
//! validation/application), `parse` (edit scripts from untrusted JSON, with precise errors),
//! `engine` (engine-owned operations), `select` (frontier and selection rule), `render` (compact
//! rendering for prompts), `invariants` (the structural checks).

mod edit;
mod engine;
mod invariants;
mod node;
mod parse;
mod render;
mod select;

pub use edit::{
    ActionEdit, ActionPatch, ApplyReport, EditError, EditErrors, EditOp, EditScript, ImpactPatch, ImpactsPatch,
    NewNode, NodeUpdate, MAX_NEW_NODES,
};
pub use engine::EngineError;
pub use node::{Action, Impact, Impacts, Node, NodeId, NodeStatus, Risk, SolutionRef, MAX_ID_LEN, ROOT_ID};
pub use render::{DEFAULT_MAX_CHARS, DEFAULT_MAX_NODES};
pub use select::{Exploration, DEFAULT_DIFFICULTY_CAP};

use serde::{Deserialize, Serialize};

/// The measured signals the engine fills after each evaluation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ComputedSignals {
    /// Status of the last evaluation (`passed`, `compile_error`, ...).
    pub last_status: Option<String>,
    /// The last evaluation's latency in nanoseconds: geometric mean over workloads of the medians.
    pub last_latency_ns: Option<f64>,
    /// The reference's latency in that evaluation, the same way (nanoseconds).
    pub reference_latency_ns: Option<f64>,
    /// The last evaluation's speedup over the reference, if it has one.
    pub last_speedup: Option<f64>,
    /// The best candidate's speedup so far, by the run's comparison rule.
    pub best_speedup: Option<f64>,
    /// The candidate that holds `best_speedup`.
    pub best_candidate_id: Option<i64>,
    /// The engine's round when the signals were last filled.
    pub round: u32,
}

/// The decision tree: a flat list of nodes in insertion order, linked by `parent_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionTree {
    root_id: NodeId,
    active_leaf_id: NodeId,
    nodes: Vec<Node>,
    /// Ids of deleted nodes: never given to a new node, so that stored attempts that name a node
    /// id stay unambiguous.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    retired_ids: Vec<NodeId>,
}

impl DecisionTree {
    /// The root's id, `root`.
    pub fn root_id(&self) -> &str {
        &self.root_id
    }

    /// The node the planner (or the engine) is focused on; the rendering always shows its path.
    pub fn active_leaf_id(&self) -> &str {
        &self.active_leaf_id
    }

    /// All nodes, in insertion order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Ids of deleted nodes, which are never reused.
    pub fn retired_ids(&self) -> &[NodeId] {
        &self.retired_ids
    }

    /// The node with id `id`, if there is one.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.node_id == id)
    }

    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.node_id == id)
    }

    pub(crate) fn node_mut(&mut self, id: &str) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.node_id == id)
    }

    /// Whether a node has id `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.index_of(id).is_some()
    }

    /// The root node; `None` only in a tree not yet built.
    pub fn root(&self) -> Option<&Node> {
        self.node(&self.root_id)
    }

    /// The children of `id`, in insertion order.
    pub fn children(&self, id: &str) -> Vec<&Node> {
        self.nodes
            .iter()
            .filter(|n| n.parent_id.as_deref() == Some(id))
            .collect()
    }

    /// Whether any node has `id` as its parent.
    pub fn has_children(&self, id: &str) -> bool {
        self.nodes.iter().any(|n| n.parent_id.as_deref() == Some(id))
    }

    /// The nodes from the root down to `id` (both included); empty when `id` does not exist.
    pub fn path_to(&self, id: &str) -> Vec<&Node> {
        let mut path = Vec::new();
        let mut cursor = self.node(id);
        while let Some(node) = cursor {
            path.push(node);
            if path.len() > self.nodes.len() {
                // A cycle: impossible while the invariants hold; never loop forever.
                break;
            }
            cursor = node.parent_id.as_deref().and_then(|p| self.node(p));
        }
        path.reverse();
        path
    }

    /// The depth of `id` (root 0), if it exists.
    pub fn depth(&self, id: &str) -> Option<usize> {
        let path = self.path_to(id);
        path.len().checked_sub(1)
    }

    /// The solved node with the highest `solution_ref.speedup` (the earliest one on ties).
    pub fn best_solved(&self) -> Option<&Node> {
        let mut best: Option<(&Node, f64)> = None;
        for node in &self.nodes {
            if let Some(sol) = &node.solution_ref {
                if best.is_none_or(|(_, s)| sol.speedup.total_cmp(&s).is_gt()) {
                    best = Some((node, sol.speedup));
                }
            }
        }
        best.map(|(n, _)| n)
    }

    /// The id an `insert_node` without `node_id` gets: `n<k>`, `k` one more than the largest `k`
    /// among existing and retired ids of the form `n<k>`.
    pub fn next_assigned_id(&self) -> NodeId {
        let max = self
            .nodes
            .iter()
            .map(|n| n.node_id.as_str())
            .chain(self.retired_ids.iter().map(String::as_str))
            .filter_map(node::numeric_suffix)
            .max()
            .unwrap_or(0);
        format!("n{}", max.saturating_add(1))
    }
}

/// The world model. Serialises to the document of `docs/world-model.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WorldModelRepr")]
pub struct WorldModel {
    /// The planner's description of the kernel (edited through an edit script's `kernel_summary`).
    pub kernel_summary: String,
    /// Questions the planner wants answered (edited through an edit script's `open_questions`).
    pub open_questions: Vec<String>,
    decision_tree: DecisionTree,
    computed_signals: ComputedSignals,
}

/// The serialised shape, checked by [`WorldModel::check_invariants`] on the way in.
#[derive(Deserialize)]
struct WorldModelRepr {
    kernel_summary: String,
    #[serde(default)]
    open_questions: Vec<String>,
    decision_tree: DecisionTree,
    #[serde(default)]
    computed_signals: ComputedSignals,
}

impl TryFrom<WorldModelRepr> for WorldModel {
    type Error = String;

    fn try_from(r: WorldModelRepr) -> Result<Self, Self::Error> {
        let wm = WorldModel {
            kernel_summary: r.kernel_summary,
            open_questions: r.open_questions,
            decision_tree: r.decision_tree,
            computed_signals: r.computed_signals,
        };
        wm.check_invariants()
            .map_err(|problems| format!("invalid world model: {}", problems.join("; ")))?;
        Ok(wm)
    }
}

impl WorldModel {
    /// A world model holding only the engine's root (`decision` "kernel", `choice` "the task",
    /// neutral ratings, no action), which is also the active leaf.
    pub fn new(kernel_summary: impl Into<String>) -> Self {
        let root = Node {
            node_id: ROOT_ID.to_string(),
            parent_id: None,
            decision: "kernel".to_string(),
            choice: "the task".to_string(),
            overall_rating: 5.0,
            confidence: 0.5,
            impacts: Impacts::default(),
            notes: String::new(),
            last_updated_round: 0,
            status: NodeStatus::Open,
            status_reason: None,
            action: None,
            solution_ref: None,
        };
        WorldModel {
            kernel_summary: kernel_summary.into(),
            open_questions: Vec::new(),
            decision_tree: DecisionTree {
                root_id: ROOT_ID.to_string(),
                active_leaf_id: ROOT_ID.to_string(),
                nodes: vec![root],
                retired_ids: Vec::new(),
            },
            computed_signals: ComputedSignals::default(),
        }
    }

    /// The decision tree.
    pub fn tree(&self) -> &DecisionTree {
        &self.decision_tree
    }

    /// The measured signals the engine filled in.
    pub fn signals(&self) -> &ComputedSignals {
        &self.computed_signals
    }

    /// The node with id `id`, if there is one (see [`DecisionTree::node`]).
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.decision_tree.node(id)
    }

    /// The document as JSON (field order as in the doc).
    pub fn to_json(&self) -> serde_json::Value {
        // Serialising plain data with string keys cannot fail; fall back to null regardless.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}
