//! The node of the decision tree and its parts, with the range rules every writer must respect.

use serde::{Deserialize, Serialize};

/// A node's id: `root`, `n<k>` when the engine assigned it, or a planner-chosen name.
pub type NodeId = String;

/// The id of the engine-created root.
pub const ROOT_ID: &str = "root";

/// The longest node id a planner may choose.
pub const MAX_ID_LEN: usize = 32;

/// How risky a dimension of a choice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Unlikely to hurt.
    Low,
    /// May hurt; the default of a dimension left out.
    Medium,
    /// Likely to hurt unless done carefully.
    High,
}

impl Risk {
    /// Every risk, from low to high.
    pub const ALL: [Risk; 3] = [Risk::Low, Risk::Medium, Risk::High];

    /// The JSON spelling: `low`, `medium`, `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }

    /// The risk spelled `s` (as [`Risk::as_str`] writes it), if any.
    pub fn parse(s: &str) -> Option<Risk> {
        Risk::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// The planner's estimate of a choice along one dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Impact {
    /// 0-10, higher is better for the kernel.
    pub rating: f64,
    /// How risky the choice is along this dimension.
    pub risk: Risk,
    /// The planner's reasoning for the rating; may be empty.
    #[serde(default)]
    pub notes: String,
}

impl Default for Impact {
    /// The default of a dimension the planner left out: rating 5, risk medium, no notes.
    fn default() -> Self {
        Impact {
            rating: 5.0,
            risk: Risk::Medium,
            notes: String::new(),
        }
    }
}

/// The three dimensions every node is rated on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Impacts {
    /// Effect on memory traffic and bandwidth use.
    pub memory_bandwidth: Impact,
    /// Effect on registers per thread (and so occupancy); higher is better (less pressure).
    pub register_pressure: Impact,
    /// Compute intensity / hardware fit.
    pub compute_intensity: Impact,
}

impl Impacts {
    /// The dimension names, in serialisation order.
    pub const DIMENSIONS: [&'static str; 3] = ["memory_bandwidth", "register_pressure", "compute_intensity"];

    /// The dimension named `dimension` (one of [`Impacts::DIMENSIONS`]), if it is one.
    pub fn get(&self, dimension: &str) -> Option<&Impact> {
        match dimension {
            "memory_bandwidth" => Some(&self.memory_bandwidth),
            "register_pressure" => Some(&self.register_pressure),
            "compute_intensity" => Some(&self.compute_intensity),
            _ => None,
        }
    }

    pub(crate) fn all(&self) -> [(&'static str, &Impact); 3] {
        [
            ("memory_bandwidth", &self.memory_bandwidth),
            ("register_pressure", &self.register_pressure),
            ("compute_intensity", &self.compute_intensity),
        ]
    }

    pub(crate) fn all_mut(&mut self) -> [(&'static str, &mut Impact); 3] {
        [
            ("memory_bandwidth", &mut self.memory_bandwidth),
            ("register_pressure", &mut self.register_pressure),
            ("compute_intensity", &mut self.compute_intensity),
        ]
    }
}

/// Where a node stands. Engine-owned except for the planner's `closed` and explicit reopen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Action not yet attempted, or no action.
    Open,
    /// A passing candidate is attached (`solution_ref`).
    Solved,
    /// Attempted without a passing candidate; `status_reason` says why.
    TooHard,
    /// Pruned by the planner.
    Closed,
}

impl NodeStatus {
    /// Every status, in declaration order.
    pub const ALL: [NodeStatus; 4] = [
        NodeStatus::Open,
        NodeStatus::Solved,
        NodeStatus::TooHard,
        NodeStatus::Closed,
    ];

    /// The JSON spelling: `open`, `solved`, `too_hard`, `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Open => "open",
            NodeStatus::Solved => "solved",
            NodeStatus::TooHard => "too_hard",
            NodeStatus::Closed => "closed",
        }
    }

    /// The status spelled `s` (as [`NodeStatus::as_str`] writes it), if any.
    pub fn parse(s: &str) -> Option<NodeStatus> {
        NodeStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// One concrete optimisation step the coder can implement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// Short name of the step, e.g. `vectorise loads with float4`.
    pub title: String,
    /// What to change, for the coder; may be empty.
    #[serde(default)]
    pub description: String,
    /// Why it should help; may be empty.
    #[serde(default)]
    pub rationale: String,
    /// 1 (trivial) to 5 (very hard).
    pub difficulty: u8,
    /// 0-1: the planner's priority.
    pub score: f64,
    /// Expected speed factor vs the baseline (> 0), when the planner gave one.
    #[serde(default)]
    pub expected_speedup: Option<f64>,
}

/// The best passing candidate of the cycle that worked on a node. Engine-owned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolutionRef {
    /// The candidate's id.
    pub candidate_id: i64,
    /// Its speedup over the reference.
    pub speedup: f64,
    /// Its latency in nanoseconds: geometric mean over workloads of the medians (0 if none).
    pub latency_ns: f64,
    /// The round it was made in.
    pub round: u32,
}

/// One node of the decision tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The node's id (see [`NodeId`]).
    pub node_id: NodeId,
    /// `None` for the root only.
    pub parent_id: Option<NodeId>,
    /// The design question the node answers, e.g. `how to tile the K loop`.
    pub decision: String,
    /// The answer this node takes to it.
    pub choice: String,
    /// 0-10.
    pub overall_rating: f64,
    /// 0-1.
    pub confidence: f64,
    /// The planner's estimate along each dimension.
    pub impacts: Impacts,
    /// The planner's notes; may be empty.
    #[serde(default)]
    pub notes: String,
    /// The last round in which the node was changed.
    pub last_updated_round: u32,
    /// Where the node stands.
    pub status: NodeStatus,
    /// Why the node is `too_hard` (set by the engine); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// The step the coder can implement here; `None` for a pure decision node.
    pub action: Option<Action>,
    /// The best passing candidate of the cycle that worked on it (engine-owned).
    pub solution_ref: Option<SolutionRef>,
}

impl Node {
    /// An action that can still be selected: it exists, the node is `open` and unsolved.
    pub fn is_open_action(&self) -> bool {
        self.action.is_some() && self.status == NodeStatus::Open && self.solution_ref.is_none()
    }

    /// Every out-of-range value of the node, as `(field, message)` with fields relative to the node.
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        push(&mut out, "overall_rating", check_rating(self.overall_rating));
        push(&mut out, "confidence", check_confidence(self.confidence));
        for (dim, impact) in self.impacts.all() {
            push(&mut out, format!("impacts.{dim}.rating"), check_rating(impact.rating));
        }
        if let Some(action) = &self.action {
            out.extend(action_problems(
                "action.",
                Some(action.difficulty),
                Some(action.score),
                action.expected_speedup,
            ));
        }
        if let Some(sol) = &self.solution_ref {
            out.extend(solution_problems("solution_ref.", sol));
        }
        out
    }
}

pub(crate) fn push(out: &mut Vec<(String, String)>, field: impl Into<String>, problem: Option<String>) {
    if let Some(message) = problem {
        out.push((field.into(), message));
    }
}

/// Formats a number the way the messages and the rendering show it: `7`, `7.5`, `0.25`.
pub(crate) fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if matches!(s, "0" | "-0" | "") {
        // A tiny value that rounds to zero at three decimals: show it exactly.
        format!("{v}")
    } else {
        s.to_string()
    }
}

fn check_range(v: f64, lo: f64, hi: f64, what: &str) -> Option<String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        None
    } else {
        Some(format!("{} is out of range {what}", fmt_num(v)))
    }
}

pub(crate) fn check_rating(v: f64) -> Option<String> {
    check_range(v, 0.0, 10.0, "0-10")
}

pub(crate) fn check_confidence(v: f64) -> Option<String> {
    check_range(v, 0.0, 1.0, "0-1")
}

pub(crate) fn check_score(v: f64) -> Option<String> {
    check_range(v, 0.0, 1.0, "0-1")
}

pub(crate) fn check_difficulty(v: u8) -> Option<String> {
    if (1..=5).contains(&v) {
        None
    } else {
        Some(format!("{v} is out of range 1-5"))
    }
}

pub(crate) fn check_positive(v: f64) -> Option<String> {
    if v.is_finite() && v > 0.0 {
        None
    } else {
        Some(format!("{} must be a finite number > 0", fmt_num(v)))
    }
}

/// Range problems of the action fields that are present (`prefix` is e.g. `action.`).
pub(crate) fn action_problems(
    prefix: &str,
    difficulty: Option<u8>,
    score: Option<f64>,
    expected_speedup: Option<f64>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(d) = difficulty {
        push(&mut out, format!("{prefix}difficulty"), check_difficulty(d));
    }
    if let Some(s) = score {
        push(&mut out, format!("{prefix}score"), check_score(s));
    }
    if let Some(e) = expected_speedup {
        push(&mut out, format!("{prefix}expected_speedup"), check_positive(e));
    }
    out
}

pub(crate) fn solution_problems(prefix: &str, sol: &SolutionRef) -> Vec<(String, String)> {
    let mut out = Vec::new();
    push(&mut out, format!("{prefix}speedup"), check_positive(sol.speedup));
    if !(sol.latency_ns.is_finite() && sol.latency_ns >= 0.0) {
        out.push((
            format!("{prefix}latency_ns"),
            format!("{} must be a finite number >= 0", fmt_num(sol.latency_ns)),
        ));
    }
    out
}

/// Why `id` is not an acceptable node id, if it is not: 1-32 ASCII letters, digits, `_`, `-`, `.`.
pub(crate) fn id_problem(id: &str) -> Option<String> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        None
    } else {
        Some(format!(
            "'{id}' is not a valid id (1-{MAX_ID_LEN} ASCII letters, digits, '_', '-' or '.')"
        ))
    }
}

/// The `k` of an id of the form `n<k>` (digits only after the `n`).
pub(crate) fn numeric_suffix(id: &str) -> Option<u128> {
    let digits = id.strip_prefix('n')?;
    if digits.is_empty() || digits.len() > 38 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_shown_short() {
        assert_eq!(fmt_num(7.0), "7");
        assert_eq!(fmt_num(7.5), "7.5");
        assert_eq!(fmt_num(0.125), "0.125");
        assert_eq!(fmt_num(1.0 / 3.0), "0.333");
        assert_eq!(fmt_num(-1.0), "-1");
        assert_eq!(fmt_num(1e-9), "0.000000001");
        assert_eq!(fmt_num(f64::NAN), "NaN");
    }

    #[test]
    fn numeric_suffixes_are_n_then_digits() {
        assert_eq!(numeric_suffix("n12"), Some(12));
        assert_eq!(numeric_suffix("n007"), Some(7));
        assert_eq!(numeric_suffix("n"), None);
        assert_eq!(numeric_suffix("n1a"), None);
        assert_eq!(numeric_suffix("alt3"), None);
        assert_eq!(
            numeric_suffix(&format!("n{}", "9".repeat(31))),
            Some(10u128.pow(31) - 1)
        );
    }

    #[test]
    fn ids_are_short_and_plain() {
        assert_eq!(id_problem("n1"), None);
        assert_eq!(id_problem("alt_2.b-c"), None);
        assert!(id_problem("").is_some());
        assert!(id_problem("a b").is_some());
        assert!(id_problem(&"x".repeat(33)).is_some());
        assert!(id_problem("né").is_some());
    }
}
