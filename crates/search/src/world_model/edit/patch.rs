//! Partial changes of a node's impacts and action: absent fields stay as they are.

use serde::Serialize;

use crate::world_model::node::{self, Action, Impact, Impacts, Risk};

/// Per-dimension changes of the impacts; absent dimensions stay as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ImpactsPatch {
    /// Changes of the memory-bandwidth impact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth: Option<ImpactPatch>,
    /// Changes of the register-pressure impact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub register_pressure: Option<ImpactPatch>,
    /// Changes of the compute-intensity impact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_intensity: Option<ImpactPatch>,
}

/// Changes of one impact dimension; absent fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ImpactPatch {
    /// New rating, 0-10.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rating: Option<f64>,
    /// New risk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    /// New notes, replacing the old.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl ImpactsPatch {
    /// Whether it changes no dimension.
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

/// Fields of an action to change; absent fields stay as they are.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ActionPatch {
    /// New title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// New description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// New rationale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// New difficulty, 1 (trivial) to 5 (very hard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<u8>,
    /// New priority score, 0-1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// New expected speed factor vs the baseline (> 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_speedup: Option<f64>,
}

impl ActionPatch {
    pub(super) fn problems(&self, prefix: &str) -> Vec<(String, String)> {
        node::action_problems(prefix, self.difficulty, self.score, self.expected_speedup)
    }

    /// The action after the patch; `None` (with the missing fields) when there is no action yet
    /// and the patch lacks a required field.
    pub(super) fn applied(&self, current: Option<&Action>) -> Result<Action, Vec<&'static str>> {
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
