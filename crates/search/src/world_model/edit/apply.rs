//! All-or-nothing application: every op is checked and applied in order on a copy of the
//! model, which replaces the model only if no rule broke.

use serde::Serialize;

use super::script::{new_node_problems, update_problems, EditOp, EditScript, NewNode, NodeUpdate, MAX_NEW_NODES};
use super::{ActionEdit, EditError};
use crate::world_model::node::{self, Impacts, Node, NodeId, NodeStatus};
use crate::world_model::WorldModel;

/// What an applied script did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ApplyReport {
    /// Created nodes (inserts and split children) that still exist, with their final ids, in op
    /// order.
    pub inserted: Vec<NodeId>,
    /// Nodes changed by `update_node` or `split_node` (each once, in op order).
    pub updated: Vec<NodeId>,
    /// Nodes removed by `delete_node`, in op order.
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
    /// Parses untrusted JSON into a script and applies it (see [`WorldModel::apply`]). A script
    /// with shape errors is rejected with all of them, and with the errors the ops that did parse
    /// meet against the tree (their out-of-range values and broken rules), located by their
    /// index in the JSON: one answer's every error at once. (An op naming a node that only a
    /// malformed op would have created reports it missing.)
    pub fn apply_value(&mut self, script: &serde_json::Value, round: u32) -> Result<ApplyReport, Vec<EditError>> {
        let parsed = crate::world_model::parse::parse_all(script);
        let Some(parsed_script) = parsed.script else {
            return Err(parsed.errors);
        };
        if parsed.shape_errors == 0 {
            return self.apply(&parsed_script, round);
        }
        let mut errors = parsed.errors;
        if let Err(rule_errors) = self.clone().apply(&parsed_script, round) {
            for mut e in rule_errors {
                e.op_index = e.op_index.and_then(|k| parsed.indices.get(k).copied());
                // Range errors are found by both passes: once is enough.
                let seen = errors.iter().any(|x| {
                    (x.op_index, &x.op_kind, &x.field, &x.message) == (e.op_index, &e.op_kind, &e.field, &e.message)
                });
                if !seen {
                    errors.push(e);
                }
            }
        }
        // In op order, script-level errors last (a stable sort keeps each op's own order).
        errors.sort_by_key(|e| e.op_index.unwrap_or(usize::MAX));
        Err(errors)
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
