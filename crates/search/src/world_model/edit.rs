//! Edit scripts (planner -> engine): their types, their validation against a copy of the model
//! and their all-or-nothing application.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::node::{self, Action, Impact, Impacts, Node, NodeId, NodeStatus, Risk};
use super::WorldModel;

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
    pub ops: Vec<EditOp>,
}

/// One operation of an edit script, tagged by `op` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum EditOp {
    /// A new node under an existing one.
    InsertNode { node: NewNode },
    /// Changes planner-owned fields of a node.
    UpdateNode { node_id: NodeId, set: NodeUpdate },
    /// Replaces a node's action by sub-decisions (the children).
    SplitNode { node_id: NodeId, children: Vec<NewNode> },
    /// Removes a leaf without a solution.
    DeleteNode { node_id: NodeId },
}

impl EditOp {
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
    pub decision: String,
    pub choice: String,
    pub overall_rating: f64,
    pub confidence: f64,
    /// Dimensions (and fields) left out default to rating 5, risk medium, empty notes.
    #[serde(skip_serializing_if = "ImpactsPatch::is_empty")]
    pub impacts: ImpactsPatch,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

/// Per-dimension changes of the impacts; absent dimensions stay as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ImpactsPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth: Option<ImpactPatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub register_pressure: Option<ImpactPatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_intensity: Option<ImpactPatch>,
}

/// Changes of one impact dimension; absent fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ImpactPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rating: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl ImpactsPatch {
    pub fn is_empty(&self) -> bool {
        self.memory_bandwidth.is_none() && self.register_pressure.is_none() && self.compute_intensity.is_none()
    }

    pub(crate) fn dims(&self) -> [(&'static str, Option<&ImpactPatch>); 3] {
        [
            ("memory_bandwidth", self.memory_bandwidth.as_ref()),
            ("register_pressure", self.register_pressure.as_ref()),
            ("compute_intensity", self.compute_intensity.as_ref()),
        ]
    }

    pub(crate) fn apply_to(&self, impacts: &mut Impacts) {
        for ((_, target), (_, patch)) in impacts.all_mut().into_iter().zip(self.dims()) {
            if let Some(p) = patch {
                p.apply_to(target);
            }
        }
    }

    pub(crate) fn problems(&self, prefix: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (dim, patch) in self.dims() {
            if let Some(rating) = patch.and_then(|p| p.rating) {
                node::push(&mut out, format!("{prefix}{dim}.rating"), node::check_rating(rating));
            }
        }
        out
    }
}

impl ImpactPatch {
    fn apply_to(&self, impact: &mut Impact) {
        if let Some(r) = self.rating {
            impact.rating = r;
        }
        if let Some(r) = self.risk {
            impact.risk = r;
        }
        if let Some(n) = &self.notes {
            impact.notes.clone_from(n);
        }
    }
}

/// The `set` of an `update_node`: the planner-owned fields to change.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NodeUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall_rating: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impacts: Option<ImpactsPatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<ActionEdit>,
    /// Only `closed`, or `open` (an explicit reopen); `solved`/`too_hard` are the engine's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

impl NodeUpdate {
    pub fn is_empty(&self) -> bool {
        *self == NodeUpdate::default()
    }
}

/// What an `update_node` does to the action: `null` removes it, an object changes the given
/// fields (a node without an action needs `title`, `difficulty` and `score`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ActionEdit {
    Remove,
    Set(ActionPatch),
}

/// Fields of an action to change; absent fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ActionPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_speedup: Option<f64>,
}

impl ActionPatch {
    fn problems(&self, prefix: &str) -> Vec<(String, String)> {
        node::action_problems(prefix, self.difficulty, self.score, self.expected_speedup)
    }

    /// The action after the patch; `None` (with the missing fields) when there is no action yet
    /// and the patch lacks a required field.
    fn applied(&self, current: Option<&Action>) -> Result<Action, Vec<&'static str>> {
        let (title, difficulty, score) = match current {
            Some(a) => (
                self.title.clone().unwrap_or_else(|| a.title.clone()),
                self.difficulty.unwrap_or(a.difficulty),
                self.score.unwrap_or(a.score),
            ),
            None => {
                let missing: Vec<&'static str> = [
                    ("title", self.title.is_none()),
                    ("difficulty", self.difficulty.is_none()),
                    ("score", self.score.is_none()),
                ]
                .into_iter()
                .filter_map(|(f, m)| m.then_some(f))
                .collect();
                match (&self.title, self.difficulty, self.score) {
                    (Some(t), Some(d), Some(s)) => (t.clone(), d, s),
                    _ => return Err(missing),
                }
            }
        };
        Ok(Action {
            title,
            description: self
                .description
                .clone()
                .or_else(|| current.map(|a| a.description.clone()))
                .unwrap_or_default(),
            rationale: self
                .rationale
                .clone()
                .or_else(|| current.map(|a| a.rationale.clone()))
                .unwrap_or_default(),
            difficulty,
            score,
            expected_speedup: self.expected_speedup.or(current.and_then(|a| a.expected_speedup)),
        })
    }
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

/// One reason an edit script was rejected.
///
/// Displays as `ops[2] (update_node n9): no node 'n9'`, `ops[0] (insert_node n4):
/// overall_rating: 11 is out of range 0-10`, or, for the script as a whole,
/// `active_leaf_id: no node 'n12' after the script`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditError {
    /// The op's index in `ops`; `None` for script-level problems.
    pub op_index: Option<usize>,
    /// `insert_node`, `update_node`, `split_node` or `delete_node` when known.
    pub op_kind: Option<String>,
    /// The node the op is about (for an insert without `node_id`, the id it would get).
    pub node_id: Option<NodeId>,
    /// The offending field, relative to the op (`set.confidence`, `children[1].node_id`).
    pub field: Option<String>,
    pub message: String,
}

impl EditError {
    pub(crate) fn script(field: impl Into<String>, message: impl Into<String>) -> Self {
        EditError {
            op_index: None,
            op_kind: None,
            node_id: None,
            field: Some(field.into()),
            message: message.into(),
        }
    }
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = self.op_index {
            write!(f, "ops[{i}]")?;
            match (&self.op_kind, &self.node_id) {
                (Some(k), Some(id)) => write!(f, " ({k} {id})")?,
                (Some(k), None) => write!(f, " ({k})")?,
                (None, Some(id)) => write!(f, " ({id})")?,
                (None, None) => {}
            }
            f.write_str(": ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for EditError {}

/// All the errors of a rejected script; displays one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditErrors(pub Vec<EditError>);

impl fmt::Display for EditErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for EditErrors {}

/// What an applied script did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ApplyReport {
    /// Created nodes (inserts and split children) that still exist, with their final ids, in op
    /// order.
    pub inserted: Vec<NodeId>,
    /// Nodes changed by `update_node` or `split_node` (each once, in op order).
    pub updated: Vec<NodeId>,
    pub deleted: Vec<NodeId>,
    /// The active leaf after the script.
    pub active_leaf_id: NodeId,
}

/// Collects the errors of one op, located by index, kind and node id.
struct OpErrors<'e> {
    out: &'e mut Vec<EditError>,
    index: usize,
    kind: &'static str,
    node_id: Option<NodeId>,
    count: usize,
}

impl OpErrors<'_> {
    fn push(&mut self, field: Option<String>, message: impl Into<String>) {
        self.count += 1;
        self.out.push(EditError {
            op_index: Some(self.index),
            op_kind: Some(self.kind.to_string()),
            node_id: self.node_id.clone(),
            field,
            message: message.into(),
        });
    }

    fn field(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.push(Some(field.into()), message);
    }

    fn general(&mut self, message: impl Into<String>) {
        self.push(None, message);
    }

    fn problems(&mut self, prefix: &str, problems: Vec<(String, String)>) {
        for (field, message) in problems {
            self.field(format!("{prefix}{field}"), message);
        }
    }
}

impl WorldModel {
    /// Parses untrusted JSON into a script and applies it (see [`WorldModel::apply`]).
    pub fn apply_value(&mut self, script: &serde_json::Value, round: u32) -> Result<ApplyReport, Vec<EditError>> {
        let script = EditScript::from_value(script)?;
        self.apply(&script, round)
    }

    /// Validates `script` as a whole against a copy of the model and, if every rule holds,
    /// replaces the model by the edited copy. On rejection the model is unchanged and every
    /// error is returned. Ops apply in order: a later op may name a node an earlier op created.
    /// `last_updated_round` of every inserted or updated node becomes `round`.
    pub fn apply(&mut self, script: &EditScript, round: u32) -> Result<ApplyReport, Vec<EditError>> {
        let mut work = self.clone();
        let mut errors = Vec::new();
        let mut report = ApplyReport::default();

        let total_new: usize = script.ops.iter().map(EditOp::new_node_count).sum();
        let mut new_so_far = 0usize;
        for (index, op) in script.ops.iter().enumerate() {
            let before = new_so_far;
            new_so_far += op.new_node_count();
            let node_id = match op {
                EditOp::InsertNode { node } => Some(
                    node.node_id
                        .clone()
                        .unwrap_or_else(|| work.decision_tree.next_assigned_id()),
                ),
                EditOp::UpdateNode { node_id, .. }
                | EditOp::SplitNode { node_id, .. }
                | EditOp::DeleteNode { node_id } => Some(node_id.clone()),
            };
            let mut errs = OpErrors {
                out: &mut errors,
                index,
                kind: op.kind(),
                node_id,
                count: 0,
            };
            if before <= MAX_NEW_NODES && new_so_far > MAX_NEW_NODES {
                errs.general(format!(
                    "the script creates {total_new} new nodes; at most {MAX_NEW_NODES} per script \
                     (inserts and split children together)"
                ));
            }
            match op {
                EditOp::InsertNode { node } => work.op_insert(node, round, &mut errs, &mut report),
                EditOp::UpdateNode { node_id, set } => work.op_update(node_id, set, round, &mut errs, &mut report),
                EditOp::SplitNode { node_id, children } => {
                    work.op_split(node_id, children, round, &mut errs, &mut report)
                }
                EditOp::DeleteNode { node_id } => work.op_delete(node_id, &mut errs, &mut report),
            }
        }

        if let Some(id) = &script.active_leaf_id {
            if work.decision_tree.contains(id) {
                work.decision_tree.active_leaf_id.clone_from(id);
            } else {
                errors.push(EditError::script(
                    "active_leaf_id",
                    format!("no node '{id}' after the script"),
                ));
            }
        }
        if let Some(summary) = &script.kernel_summary {
            work.kernel_summary.clone_from(summary);
        }
        if let Some(questions) = &script.open_questions {
            work.open_questions.clone_from(questions);
        }

        if errors.is_empty() {
            // Defence in depth: the rules above keep the invariants; never store a model that breaks them.
            if let Err(problems) = work.check_invariants() {
                errors.extend(
                    problems
                        .into_iter()
                        .map(|p| EditError::script("script", format!("would break an invariant: {p}"))),
                );
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        report.active_leaf_id = work.decision_tree.active_leaf_id.clone();
        *self = work;
        Ok(report)
    }

    /// Checks a new node's id, parent and fields; inserts it into `self` when its id and parent
    /// are usable (even if a field is out of range, so that later ops can refer to it; the script
    /// is rejected anyway). Returns the inserted id.
    fn insert_new(
        &mut self,
        new: &NewNode,
        parent: Option<&str>,
        prefix: &str,
        round: u32,
        errs: &mut OpErrors<'_>,
    ) -> Option<NodeId> {
        let tree = &self.decision_tree;
        let mut usable = true;
        match parent {
            None => {
                errs.field(format!("{prefix}parent_id"), "missing");
                usable = false;
            }
            Some(p) if !tree.contains(p) => {
                errs.field(format!("{prefix}parent_id"), format!("no node '{p}'"));
                usable = false;
            }
            Some(_) => {}
        }
        let id = match &new.node_id {
            Some(id) => {
                if node::id_problem(id).is_some() {
                    usable = false; // reported with the field problems below
                } else if tree.contains(id) {
                    errs.field(format!("{prefix}node_id"), format!("'{id}' already exists"));
                    usable = false;
                } else if tree.retired_ids.contains(id) {
                    errs.field(
                        format!("{prefix}node_id"),
                        format!("'{id}' belonged to a deleted node; ids are never reused"),
                    );
                    usable = false;
                }
                id.clone()
            }
            None => tree.next_assigned_id(),
        };
        errs.problems(prefix, new_node_problems(new));
        let parent = parent.filter(|_| usable)?;
        let impacts = {
            let mut i = Impacts::default();
            new.impacts.apply_to(&mut i);
            i
        };
        self.decision_tree.nodes.push(Node {
            node_id: id.clone(),
            parent_id: Some(parent.to_string()),
            decision: new.decision.clone(),
            choice: new.choice.clone(),
            overall_rating: new.overall_rating,
            confidence: new.confidence,
            impacts,
            notes: new.notes.clone().unwrap_or_default(),
            last_updated_round: round,
            status: NodeStatus::Open,
            status_reason: None,
            action: new.action.clone(),
            solution_ref: None,
        });
        Some(id)
    }

    fn op_insert(&mut self, new: &NewNode, round: u32, errs: &mut OpErrors<'_>, report: &mut ApplyReport) {
        if let Some(id) = self.insert_new(new, new.parent_id.as_deref(), "node.", round, errs) {
            report.inserted.push(id);
        }
    }

    fn op_update(&mut self, id: &str, set: &NodeUpdate, round: u32, errs: &mut OpErrors<'_>, report: &mut ApplyReport) {
        let is_root = id == self.decision_tree.root_id;
        let before = errs.count;
        if !self.decision_tree.contains(id) {
            errs.general(format!("no node '{id}'"));
        }
        if set.is_empty() {
            errs.field("set", "empty; name at least one field to change");
        }
        errs.problems("set.", update_problems(set));
        if let Some(status @ (NodeStatus::Solved | NodeStatus::TooHard)) = set.status {
            errs.field(
                "set.status",
                format!(
                    "'{}' is set by the engine only; the planner may set 'closed' or 'open'",
                    status.as_str()
                ),
            );
        }
        let Some(node) = self.decision_tree.node_mut(id) else {
            return;
        };
        let solved = node.solution_ref.is_some();
        let mut new_action = node.action.clone();
        match &set.action {
            None => {}
            Some(_) if solved => errs.field(
                "set.action",
                format!("'{id}' has a solution_ref; its action can no longer change"),
            ),
            Some(ActionEdit::Remove) => new_action = None,
            Some(ActionEdit::Set(_)) if is_root => errs.field("set.action", "the root carries no action"),
            Some(ActionEdit::Set(patch)) => match patch.applied(node.action.as_ref()) {
                Ok(a) => new_action = Some(a),
                Err(missing) => errs.field(
                    "set.action",
                    format!(
                        "'{id}' has no action; a new one needs title, difficulty and score (missing: {})",
                        missing.join(", ")
                    ),
                ),
            },
        }
        let mut new_status = node.status;
        if let Some(status) = set.status {
            match status {
                NodeStatus::Solved | NodeStatus::TooHard => {} // reported above
                _ if solved => errs.field(
                    "set.status",
                    format!("'{id}' is solved (it has a solution_ref); its status is engine-owned"),
                ),
                NodeStatus::Closed if is_root => errs.field("set.status", "the root cannot be closed"),
                NodeStatus::Open | NodeStatus::Closed => new_status = status,
            }
        }
        if errs.count > before {
            return;
        }
        if let Some(v) = &set.decision {
            node.decision.clone_from(v);
        }
        if let Some(v) = &set.choice {
            node.choice.clone_from(v);
        }
        if let Some(v) = set.overall_rating {
            node.overall_rating = v;
        }
        if let Some(v) = set.confidence {
            node.confidence = v;
        }
        if let Some(p) = &set.impacts {
            p.apply_to(&mut node.impacts);
        }
        if let Some(v) = &set.notes {
            node.notes.clone_from(v);
        }
        node.action = new_action;
        if new_status != node.status {
            node.status = new_status;
            node.status_reason = None;
        }
        node.last_updated_round = round;
        push_once(&mut report.updated, id);
    }

    fn op_split(
        &mut self,
        id: &str,
        children: &[NewNode],
        round: u32,
        errs: &mut OpErrors<'_>,
        report: &mut ApplyReport,
    ) {
        let before = errs.count;
        let target = self.decision_tree.node(id);
        match target {
            None => errs.general(format!("no node '{id}'")),
            Some(n) if n.solution_ref.is_some() => errs.general(format!(
                "'{id}' has a solution_ref; only nodes without one can be split (insert under it instead)"
            )),
            Some(_) => {}
        }
        let exists = target.is_some();
        if children.is_empty() {
            errs.field("children", "empty; a split needs at least one child");
        }
        for (k, child) in children.iter().enumerate() {
            let prefix = format!("children[{k}].");
            if let Some(p) = &child.parent_id {
                if p != id {
                    errs.field(
                        format!("{prefix}parent_id"),
                        format!("'{p}' must be '{id}' (the split node) or left out"),
                    );
                    continue;
                }
            }
            if exists {
                if let Some(new_id) = self.insert_new(child, Some(id), &prefix, round, errs) {
                    report.inserted.push(new_id);
                }
            } else {
                // Still report the child's own problems.
                errs.problems(&prefix, new_node_problems(child));
            }
        }
        if errs.count > before {
            return;
        }
        if let Some(node) = self.decision_tree.node_mut(id) {
            node.action = None;
            node.status = NodeStatus::Open;
            node.status_reason = None;
            node.last_updated_round = round;
            push_once(&mut report.updated, id);
        }
    }

    fn op_delete(&mut self, id: &str, errs: &mut OpErrors<'_>, report: &mut ApplyReport) {
        let tree = &self.decision_tree;
        let Some(index) = tree.index_of(id) else {
            errs.general(format!("no node '{id}'"));
            return;
        };
        if id == tree.root_id {
            errs.general("the root cannot be deleted");
            return;
        }
        let node = &tree.nodes[index];
        if node.solution_ref.is_some() {
            errs.general(format!("'{id}' has a solution_ref; solved nodes cannot be deleted"));
            return;
        }
        let children: Vec<&str> = tree.children(id).iter().map(|c| c.node_id.as_str()).collect();
        if !children.is_empty() {
            errs.general(format!(
                "'{id}' has children ({}); only leaves can be deleted",
                children.join(", ")
            ));
            return;
        }
        let removed = self.decision_tree.nodes.remove(index);
        if self.decision_tree.active_leaf_id == id {
            // The active leaf goes: focus falls back to its parent.
            if let Some(parent) = removed.parent_id {
                self.decision_tree.active_leaf_id = parent;
            }
        }
        self.decision_tree.retired_ids.push(id.to_string());
        report.updated.retain(|u| u != id);
        report.inserted.retain(|u| u != id);
        report.deleted.push(id.to_string());
    }
}

fn push_once(list: &mut Vec<NodeId>, id: &str) {
    if !list.iter().any(|x| x == id) {
        list.push(id.to_string());
    }
}
