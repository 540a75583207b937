//! The optimisation pattern library: one TOML file per pattern under `kb/patterns/`.
//!
//! A pattern says when it pays (its `prior` per regime: how often, by our judgement, it helps a
//! kernel limited that way; the knob tuner seeds its ratings with these and measurements update
//! them), which kernel dialects it applies to, what to do, and what can go wrong.

use crate::error::{Problem, Problems};
use crate::hardware::{valid_id, SCHEMA_VERSION};
use crate::kinds::{Regime, TargetKind};
use crate::render::num;
use serde::{Deserialize, Serialize};

/// One optimisation pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pattern {
    /// Data format version; must be [`SCHEMA_VERSION`].
    pub schema: u32,
    /// Stable identifier; equals the file name without `.toml` (`online-softmax`).
    pub id: String,
    /// Short human name (at most 45 characters), the head of the pattern's prompt line.
    pub title: String,
    /// Kernel dialects it applies to.
    pub targets: Vec<TargetKind>,
    /// Prior probability (0-1) that it helps, per regime; the regimes listed are those where it
    /// can pay at all.
    pub prior: Priors,
    /// One sentence: what to do. Goes into prompts when the dialect has no hint.
    pub summary: String,
    /// The longer explanation: why it works and how to apply it.
    pub description: String,
    /// What can go wrong; the first goes into prompts.
    pub risks: Vec<String>,
    /// How a dialect does it (intrinsics, pragmas, parameters), self-contained: in a prompt for
    /// that dialect it replaces the summary. Only for listed targets.
    #[serde(default)]
    pub hints: Hints,
    /// Names of template knobs this pattern corresponds to (`unroll`, `vector_width`), so the
    /// knob tuner can seed a knob's rating with this pattern's prior.
    #[serde(default)]
    pub knobs: Vec<String>,
    /// Where the technique is described or used.
    #[serde(default)]
    pub references: Vec<String>,
}

/// Priors per regime; absent means the pattern is not expected to pay in that regime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Priors {
    /// Prior (0-1) that it helps a memory-bound kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bound: Option<f64>,
    /// Prior (0-1) that it helps a compute-bound kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_bound: Option<f64>,
    /// Prior (0-1) that it helps a latency-bound kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_bound: Option<f64>,
}

impl Priors {
    /// The prior for `regime`; `None` where the pattern is not expected to pay.
    pub fn get(&self, regime: Regime) -> Option<f64> {
        match regime {
            Regime::MemoryBound => self.memory_bound,
            Regime::ComputeBound => self.compute_bound,
            Regime::LatencyBound => self.latency_bound,
        }
    }
}

/// Dialect-specific spellings of a pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hints {
    /// How C for the host CPU does it (intrinsics, pragmas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// How CUDA C++ does it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// How Triton does it (block sizes, `tl.` calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton: Option<String>,
    /// How Metal Shading Language does it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metal: Option<String>,
}

impl Hints {
    /// The hint for `target`'s dialect; `None` where there is none (prompts then use the summary).
    pub fn get(&self, target: TargetKind) -> Option<&str> {
        match target {
            TargetKind::Cpu => self.cpu.as_deref(),
            TargetKind::Cuda => self.cuda.as_deref(),
            TargetKind::Triton => self.triton.as_deref(),
            TargetKind::Metal => self.metal.as_deref(),
        }
    }
}

// Prompt budget: a full slice lists up to ~15 patterns in MAX_SLICE_CHARS together with the
// device's spec, one line each, so the rendered parts (title, summary or hint, first risk) are
// kept short by construction.
const MAX_TITLE: usize = 45;
const MAX_SUMMARY: usize = 130;
const MAX_HINT: usize = 110;
const MAX_FIRST_RISK: usize = 80;
const MAX_RISK: usize = 300;
const MAX_DESCRIPTION: usize = 1500;

impl Pattern {
    /// The prior for `regime`, if the pattern can pay there.
    pub fn prior(&self, regime: Regime) -> Option<f64> {
        self.prior.get(regime)
    }

    /// The regimes where it can pay, in the fixed order memory, compute, latency.
    pub fn regimes(&self) -> Vec<Regime> {
        Regime::ALL.into_iter().filter(|r| self.prior(*r).is_some()).collect()
    }

    /// The highest prior over all regimes.
    pub fn best_prior(&self) -> f64 {
        Regime::ALL
            .into_iter()
            .filter_map(|r| self.prior(r))
            .fold(0.0, f64::max)
    }

    /// Whether `target` is among the pattern's dialects.
    pub fn applies_to(&self, target: TargetKind) -> bool {
        self.targets.contains(&target)
    }

    /// One compact markdown bullet for prompts: title, priors, the dialect's hint (the summary
    /// when the dialect has none) and the first risk.
    pub fn to_markdown_line(&self, target: Option<TargetKind>) -> String {
        let priors: Vec<String> = Regime::ALL
            .into_iter()
            .filter_map(|r| self.prior(r).map(|p| format!("{} {}", r.letter(), num(p))))
            .collect();
        let how = target.and_then(|t| self.hints.get(t)).unwrap_or(&self.summary);
        let mut line = format!("- {} [{}]: {}", self.title.trim(), priors.join(" "), how.trim());
        if let Some(risk) = self.risks.first() {
            line.push_str(" Risk: ");
            line.push_str(risk.trim());
        }
        line
    }

    pub(crate) fn validate(&self, file: &str, stem: &str) -> Vec<Problem> {
        let mut p = Problems::new(file);
        if self.schema != SCHEMA_VERSION {
            p.push(
                "schema",
                format!(
                    "unsupported version {}; this ksearch reads {SCHEMA_VERSION}",
                    self.schema
                ),
            );
        }
        if !valid_id(&self.id) {
            p.push(
                "id",
                format!("'{}' must be lower case letters, digits and single dashes", self.id),
            );
        } else if self.id != stem {
            p.push("id", format!("'{}' must equal the file name ('{stem}.toml')", self.id));
        }
        text(&mut p, "title", &self.title, MAX_TITLE);
        text(&mut p, "summary", &self.summary, MAX_SUMMARY);
        text(&mut p, "description", &self.description, MAX_DESCRIPTION);
        if self.targets.is_empty() {
            p.push("targets", "must name at least one of cpu, cuda, triton, metal");
        }
        for (i, t) in self.targets.iter().enumerate() {
            if self.targets[..i].contains(t) {
                p.push(format!("targets[{i}]"), format!("'{t}' is listed twice"));
            }
        }
        if self.regimes().is_empty() {
            p.push(
                "prior",
                "must give a prior for at least one of memory-bound, compute-bound, latency-bound",
            );
        }
        for r in Regime::ALL {
            if let Some(v) = self.prior(r) {
                if !(0.0..=1.0).contains(&v) {
                    p.push(format!("prior.{r}"), format!("must be between 0 and 1, got {v}"));
                }
            }
        }
        if self.risks.is_empty() {
            p.push("risks", "must name at least one risk");
        }
        for (i, risk) in self.risks.iter().enumerate() {
            let max = if i == 0 { MAX_FIRST_RISK } else { MAX_RISK };
            text(&mut p, &format!("risks[{i}]"), risk, max);
        }
        for t in TargetKind::ALL {
            if let Some(h) = self.hints.get(t) {
                let field = format!("hints.{t}");
                if !self.applies_to(t) {
                    p.push(
                        field.clone(),
                        format!("a hint for '{t}', which is not among the pattern's targets"),
                    );
                }
                text(&mut p, &field, h, MAX_HINT);
            }
        }
        for (i, k) in self.knobs.iter().enumerate() {
            let ok = !k.is_empty()
                && k.starts_with(|c: char| c.is_ascii_lowercase())
                && k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !ok {
                p.push(format!("knobs[{i}]"), format!("'{k}' must be a snake_case identifier"));
            }
        }
        for (i, r) in self.references.iter().enumerate() {
            if r.trim().is_empty() {
                p.push(format!("references[{i}]"), "must not be empty");
            }
        }
        p.into_list()
    }
}

fn text(p: &mut Problems, field: &str, value: &str, max: usize) {
    let n = value.trim().chars().count();
    if n == 0 {
        p.push(field, "must not be empty");
    } else if n > max {
        p.push(field, format!("{n} characters; at most {max}"));
    }
}
