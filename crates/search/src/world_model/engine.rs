//! The engine-owned operations: attaching measured solutions, closing failed actions, moving the
//! focus and filling the measured signals. The planner cannot reach any of these.

use super::node::{self, NodeStatus, SolutionRef};
use super::{ComputedSignals, WorldModel};

/// Why an engine operation was refused (a bug in the caller, not in the planner).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// No node has that id.
    #[error("no node '{0}'")]
    NoNode(String),
    /// The node is the root, which has no action to mark.
    #[error("'{0}' is the root, which is not an action")]
    Root(String),
    /// The node is solved, so it cannot be marked too hard.
    #[error("'{0}' has a solution_ref; a solved node cannot be marked too hard")]
    Solved(String),
    /// Another refused operation; the message says what.
    #[error("{0}")]
    Invalid(String),
}

impl WorldModel {
    /// Attaches the cycle's best passing candidate to `node_id` (replacing an earlier one): the
    /// node becomes `solved`, whatever its status was, and `last_updated_round` becomes `round`.
    pub fn attach_solution(&mut self, node_id: &str, solution: SolutionRef, round: u32) -> Result<(), EngineError> {
        let problems = node::solution_problems("solution.", &solution);
        if let Some((field, message)) = problems.into_iter().next() {
            return Err(EngineError::Invalid(format!("{field}: {message}")));
        }
        let node = self
            .decision_tree
            .node_mut(node_id)
            .ok_or_else(|| EngineError::NoNode(node_id.to_string()))?;
        node.solution_ref = Some(solution);
        node.status = NodeStatus::Solved;
        node.status_reason = None;
        node.last_updated_round = round;
        Ok(())
    }

    /// Closes an action that was attempted without a passing candidate: status `too_hard` with
    /// `reason`. It is never selected again unless the planner reopens it.
    pub fn mark_too_hard(&mut self, node_id: &str, reason: impl Into<String>, round: u32) -> Result<(), EngineError> {
        if node_id == self.decision_tree.root_id {
            return Err(EngineError::Root(node_id.to_string()));
        }
        let node = self
            .decision_tree
            .node_mut(node_id)
            .ok_or_else(|| EngineError::NoNode(node_id.to_string()))?;
        if node.solution_ref.is_some() {
            return Err(EngineError::Solved(node_id.to_string()));
        }
        node.status = NodeStatus::TooHard;
        node.status_reason = Some(reason.into());
        node.last_updated_round = round;
        Ok(())
    }

    /// Moves the focus (e.g. to the action the engine selected).
    pub fn set_active_leaf(&mut self, node_id: &str) -> Result<(), EngineError> {
        if !self.decision_tree.contains(node_id) {
            return Err(EngineError::NoNode(node_id.to_string()));
        }
        self.decision_tree.active_leaf_id = node_id.to_string();
        Ok(())
    }

    /// Replaces the measured signals. Every number must be finite.
    pub fn set_signals(&mut self, signals: ComputedSignals) -> Result<(), EngineError> {
        if let Some(problem) = signals_problem(&signals) {
            return Err(EngineError::Invalid(problem));
        }
        self.computed_signals = signals;
        Ok(())
    }
}

/// The first non-finite number of the signals, if any.
pub(crate) fn signals_problem(s: &ComputedSignals) -> Option<String> {
    [
        ("last_latency_ns", s.last_latency_ns),
        ("reference_latency_ns", s.reference_latency_ns),
        ("last_speedup", s.last_speedup),
        ("best_speedup", s.best_speedup),
    ]
    .into_iter()
    .find_map(|(field, v)| {
        v.filter(|v| !v.is_finite())
            .map(|v| format!("computed_signals.{field}: {v} is not a finite number"))
    })
}
