//! Translation layers: one TOML file per (source, target) pair under `kb/translation/`, saying
//! what a kernel written for the source platform (CUDA) must become on the target (Metal through
//! MLX, MLX's CUDA backend). Knowledge for the planner and the coder, not a compiler: a table of
//! primitives with the constraint that changes the design, the patterns that carry over with a
//! note for the target, and properties every candidate on the target must keep.

use crate::error::{Problem, Problems};
use crate::hardware::{valid_id, SCHEMA_VERSION};
use crate::kinds::TargetKind;
use ksearch_spec::Language;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One translation layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Translation {
    /// Data format version; must be [`SCHEMA_VERSION`].
    pub schema: u32,
    /// `<source>-to-<target>`; equals the file name without `.toml`.
    pub id: String,
    /// The language of the kernels being adapted (the expertise): `cuda`, `triton`.
    pub source: String,
    /// What candidates are written for: `metal`, `mlx-cuda`.
    pub target: String,
    /// Human name of the layer (`CUDA to Metal (MLX mx.fast.metal_kernel on Apple GPUs)`).
    pub title: String,
    /// The kernel dialect on the target's devices: picks the devices the layer applies to (those
    /// listing it among their `targets`) and the pattern hints.
    pub dialect: TargetKind,
    /// Task kernel languages (`[kernel].language` in task.toml) whose candidates are written for
    /// this target, e.g. `mlx`.
    pub languages: Vec<Language>,
    /// How to approach the translation, a few sentences; goes into prompts.
    pub summary: String,
    /// Properties every candidate on this target must keep, whatever the task.
    #[serde(default)]
    pub properties: Vec<String>,
    /// The primitive mapping table.
    pub mappings: Vec<Mapping>,
    /// Patterns of `kb/patterns/` that apply on the target, with a note for it.
    #[serde(default)]
    pub patterns: Vec<PatternNote>,
    /// Target-specific properties per task family (families live in `kb/assertions/`).
    #[serde(default)]
    pub assertions: Vec<FamilyProperties>,
    /// Where the facts come from (documentation, not prompts).
    #[serde(default)]
    pub references: Vec<String>,
}

/// One row of the mapping table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The source concept (`__syncthreads()`).
    pub from: String,
    /// What it becomes on the target (`threadgroup_barrier(mem_flags::mem_threadgroup)`).
    pub to: String,
    /// The limit or difference that changes the design. Required: a row without one is only
    /// syntax, which the coder knows already.
    pub constraint: String,
    /// Anything else worth knowing about the row; rendered with it in prompts.
    #[serde(default)]
    pub notes: Option<String>,
}

/// A pattern that applies on the target, and what is particular about it there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternNote {
    /// An id of `kb/patterns/`.
    pub id: String,
    /// What is particular about the pattern on this target, one or two sentences.
    pub note: String,
}

/// Properties of one task family that matter on this target in particular.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyProperties {
    /// A family of `kb/assertions/`.
    pub family: String,
    /// Properties every candidate of that family must keep on this target, one sentence each.
    pub properties: Vec<String>,
}

// Prompt budget: a layer renders in full into every prompt of a task on its target, so each
// piece is short by construction (the tests check the whole rendering against
// MAX_LAYER_CHARS).
const MAX_TITLE: usize = 80;
const MAX_SUMMARY: usize = 500;
const MAX_FROM: usize = 90;
const MAX_TO: usize = 120;
const MAX_CONSTRAINT: usize = 260;
const MAX_NOTES: usize = 200;
const MAX_PATTERN_NOTE: usize = 200;
pub(crate) const MAX_PROPERTY: usize = 250;
const MAX_MAPPINGS: usize = 24;

impl Translation {
    /// Per-file checks; references to patterns and families are checked when the whole
    /// knowledge base is assembled.
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
        for (field, value) in [("source", &self.source), ("target", &self.target)] {
            if !valid_id(value) {
                p.push(
                    field,
                    format!("'{value}' must be lower case letters, digits and single dashes"),
                );
            }
        }
        if self.source == self.target {
            p.push("target", format!("'{}' is also the source", self.target));
        }
        let expected = format!("{}-to-{}", self.source, self.target);
        if self.id != expected {
            p.push(
                "id",
                format!("'{}' must be '<source>-to-<target>', here '{expected}'", self.id),
            );
        } else if self.id != stem {
            p.push("id", format!("'{}' must equal the file name ('{stem}.toml')", self.id));
        }
        text(&mut p, "title", &self.title, MAX_TITLE);
        text(&mut p, "summary", &self.summary, MAX_SUMMARY);
        if self.languages.is_empty() {
            p.push("languages", "must name at least one task kernel language (e.g. mlx)");
        }
        for (i, l) in self.languages.iter().enumerate() {
            // An unknown name fails the parse, which names the field and the known languages.
            if self.languages[..i].contains(l) {
                p.push(format!("languages[{i}]"), format!("'{l}' is listed twice"));
            }
        }
        properties(&mut p, "properties", &self.properties, false);
        if self.mappings.is_empty() {
            p.push("mappings", "must have at least one row");
        } else if self.mappings.len() > MAX_MAPPINGS {
            p.push(
                "mappings",
                format!(
                    "{} rows; at most {MAX_MAPPINGS} (the table goes into every prompt)",
                    self.mappings.len()
                ),
            );
        }
        for (i, m) in self.mappings.iter().enumerate() {
            let field = |f: &str| format!("mappings[{i}].{f}");
            text(&mut p, &field("from"), &m.from, MAX_FROM);
            text(&mut p, &field("to"), &m.to, MAX_TO);
            text(&mut p, &field("constraint"), &m.constraint, MAX_CONSTRAINT);
            if let Some(n) = &m.notes {
                text(&mut p, &field("notes"), n, MAX_NOTES);
            }
            let key = squash(&m.from);
            if let Some(j) = self.mappings[..i].iter().position(|o| squash(&o.from) == key) {
                p.push(field("from"), format!("'{}' repeats mappings[{j}]", m.from.trim()));
            }
        }
        for (i, n) in self.patterns.iter().enumerate() {
            let field = format!("patterns[{i}]");
            if !valid_id(&n.id) {
                p.push(format!("{field}.id"), format!("'{}' is not a pattern id", n.id));
            } else if let Some(j) = self.patterns[..i].iter().position(|o| o.id == n.id) {
                p.push(format!("{field}.id"), format!("'{}' repeats patterns[{j}]", n.id));
            }
            text(&mut p, &format!("{field}.note"), &n.note, MAX_PATTERN_NOTE);
        }
        for (i, a) in self.assertions.iter().enumerate() {
            let field = format!("assertions[{i}]");
            if !valid_id(&a.family) {
                p.push(format!("{field}.family"), format!("'{}' is not a family id", a.family));
            } else if let Some(j) = self.assertions[..i].iter().position(|o| o.family == a.family) {
                p.push(
                    format!("{field}.family"),
                    format!("'{}' repeats assertions[{j}]", a.family),
                );
            }
            properties(&mut p, &format!("{field}.properties"), &a.properties, true);
        }
        for (i, r) in self.references.iter().enumerate() {
            if r.trim().is_empty() {
                p.push(format!("references[{i}]"), "must not be empty");
            }
        }
        p.into_list()
    }

    /// The target-specific properties for `family`, if the layer has any.
    pub fn family_properties(&self, family: &str) -> &[String] {
        self.assertions
            .iter()
            .find(|a| a.family == family)
            .map(|a| a.properties.as_slice())
            .unwrap_or(&[])
    }

    /// The layer as prompts cite it: summary, mapping table, the patterns with their notes
    /// (titles looked up by `title_of`). Properties are rendered with the task's family, by
    /// the caller. Deterministic.
    pub fn to_prompt(&self, title_of: &dyn Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "## Translation layer: {} (`{}`)", self.title.trim(), self.id);
        let _ = writeln!(out, "{}", one_paragraph(&self.summary));
        let _ = writeln!(
            out,
            "\nPrimitive mapping ({} -> {} -- the constraint that changes the design):",
            self.source, self.target
        );
        for m in &self.mappings {
            let _ = write!(
                out,
                "- {} -> {} -- {}",
                one_paragraph(&m.from),
                one_paragraph(&m.to),
                one_paragraph(&m.constraint)
            );
            if let Some(n) = &m.notes {
                let _ = write!(out, " ({})", one_paragraph(n).trim_end_matches('.'));
            }
            out.push('\n');
        }
        if !self.patterns.is_empty() {
            let _ = writeln!(out, "\nPatterns that carry over to {}:", self.target);
            for n in &self.patterns {
                let title = title_of(&n.id).unwrap_or_else(|| n.id.clone());
                let _ = writeln!(out, "- {title}: {}", one_paragraph(&n.note));
            }
        }
        out
    }

    /// Everything in the file, for `ksearch kb show` (references and every family included).
    pub fn details_markdown(&self, title_of: &dyn Fn(&str) -> Option<String>) -> String {
        let mut out = self.to_prompt(title_of);
        let languages = self.languages.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            out,
            "\nApplies to tasks in {languages} on devices running {} kernels.",
            self.dialect
        );
        if !self.properties.is_empty() {
            let _ = writeln!(out, "\nProperties every candidate on {} must keep:", self.target);
            for prop in &self.properties {
                let _ = writeln!(out, "- {}", prop.trim());
            }
        }
        for a in &self.assertions {
            let _ = writeln!(out, "\nFor {} tasks on {}:", a.family, self.target);
            for prop in &a.properties {
                let _ = writeln!(out, "- {}", prop.trim());
            }
        }
        if !self.references.is_empty() {
            let _ = writeln!(out, "\nReferences:");
            for r in &self.references {
                let _ = writeln!(out, "- {}", r.trim());
            }
        }
        out
    }
}

/// Multi-line TOML strings written for readability become one paragraph in prompts.
pub(crate) fn one_paragraph(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The comparison form of a mapping's `from`: case and spacing do not make a new row.
fn squash(s: &str) -> String {
    one_paragraph(s).to_lowercase()
}

pub(crate) fn text(p: &mut Problems, field: &str, value: &str, max: usize) {
    let n = one_paragraph(value).chars().count();
    if n == 0 {
        p.push(field, "must not be empty");
    } else if n > max {
        p.push(field, format!("{n} characters; at most {max}"));
    }
}

/// A list of properties: each non-empty, short enough for prompts, none repeated.
pub(crate) fn properties(p: &mut Problems, field: &str, list: &[String], required: bool) {
    if required && list.is_empty() {
        p.push(field, "must list at least one property");
    }
    for (i, prop) in list.iter().enumerate() {
        let f = format!("{field}[{i}]");
        text(p, &f, prop, MAX_PROPERTY);
        if let Some(j) = list[..i].iter().position(|o| squash(o) == squash(prop)) {
            p.push(f, format!("repeats {field}[{j}]"));
        }
    }
}
