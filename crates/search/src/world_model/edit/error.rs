//! Why a script was rejected: one located error per broken rule.

use std::fmt;

use crate::world_model::node::NodeId;

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
    /// What is wrong, addressed to the planner.
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
