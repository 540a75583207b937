//! What a task's prompts cite, at each context level of the published three-configuration
//! comparison:
//! - `none`: nothing;
//! - `hardware`: the device's figures only;
//! - `full`: the figures, the optimisation patterns for the task's kernel dialect, every
//!   translation layer that takes the task's expertise to its target, and the properties every
//!   candidate must keep (the task family's, plus the layers' for that target).
//!
//! The CUDA kernels a task names as expertise are rendered by the caller (they live in the task
//! folder); the level decides whether they are shown too, and only `full` shows them.

use crate::assertions::AssertionFamily;
use crate::error::KbError;
use crate::hardware::HardwareSpec;
use crate::kinds::{Context, TargetKind};
use crate::translation::{one_paragraph, Translation};
use crate::Kb;
use ksearch_spec::Language;
use std::fmt::Write as _;

/// The context level a run cites knowledge at (`none`, `hardware`, `full`; parse with
/// `"full".parse::<ContextLevel>()`). The same type as [`Context`], named for the CLI flag.
pub type ContextLevel = Context;

/// What the knowledge base needs to know about a task to choose what its prompts cite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// The device candidates run on: a name or alias (`h200`, `m4-max`).
    pub device: String,
    /// The task's kernel language (`[kernel].language`: `c`, `cuda`, `triton`, `python`,
    /// `mlx`). An MLX task's dialect is the device's: Metal on Apple GPUs, CUDA on NVIDIA.
    pub language: String,
    /// The definition's `op_type`, which selects the task family's assertions.
    pub op_type: Option<String>,
    /// Languages of the expertise the task names (`cuda` for `.cu` files). Empty when it names
    /// none: then every layer into the target applies, as in the published full configuration.
    pub expertise_languages: Vec<String>,
}

/// What [`Kb::select`] chose for a task.
#[derive(Debug, Clone)]
pub struct Selection<'a> {
    /// The device the task targets, as the knowledge base describes it.
    pub hardware: &'a HardwareSpec,
    /// The dialect candidates are written in on that device.
    pub dialect: TargetKind,
    /// Translation layers from the expertise's language(s) to the task's target, by id.
    pub layers: Vec<&'a Translation>,
    /// The task family, if its op_type belongs to one.
    pub family: Option<&'a AssertionFamily>,
}

/// The most characters one translation layer's prompt rendering (summary, mapping table,
/// patterns) may have; checked by the tests for every built-in layer.
pub const MAX_LAYER_CHARS: usize = 7000;

/// The most characters a `full` task context may have (device slice, layers, properties);
/// checked by the tests for every built-in device, kernel language and task family.
pub const MAX_TASK_CONTEXT_CHARS: usize = 14000;

impl Kb {
    /// The device, dialect, translation layers and task family for `query`. An unknown device,
    /// or a language the device cannot run (`cuda` on an Apple GPU), is an error.
    pub fn select(&self, query: &TaskQuery) -> Result<Selection<'_>, KbError> {
        let hardware = self.hardware(&query.device)?;
        let language = query.language.trim();
        // A kernel language names its dialect, except `mlx` and `python`, whose kernels take
        // the device's own; anything else may name a dialect itself (`metal`, `cpu`).
        let named = match language.parse::<Language>() {
            Ok(Language::C | Language::Cpp) => Some(TargetKind::Cpu),
            Ok(Language::Cuda | Language::CudaBinding) => Some(TargetKind::Cuda),
            Ok(Language::Triton) => Some(TargetKind::Triton),
            Ok(Language::Python | Language::Mlx) => None,
            Err(_) => language.parse::<TargetKind>().ok(),
        };
        let dialect = match named {
            Some(t) if hardware.targets.contains(&t) => t,
            Some(t) => {
                let runs: Vec<&str> = hardware.targets.iter().map(|t| t.as_str()).collect();
                return Err(KbError::Unsupported(format!(
                    "{} does not run {t} kernels (it runs: {}); a task in '{language}' cannot target it",
                    hardware.name,
                    runs.join(", ")
                )));
            }
            // `mlx` and `python` kernels take the device's own dialect.
            None => hardware.targets[0],
        };
        let layers = self
            .translations()
            .filter(|t| t.dialect == dialect && hardware.targets.contains(&t.dialect))
            .filter(|t| t.languages.iter().any(|l| l.as_str() == language))
            .filter(|t| query.expertise_languages.is_empty() || query.expertise_languages.contains(&t.source))
            .collect();
        let family = query.op_type.as_deref().and_then(|op| self.family_for(op));
        Ok(Selection {
            hardware,
            dialect,
            layers,
            family,
        })
    }

    /// The text a task's prompts cite at `level` (the `target` of the search's task brief).
    pub fn task_context(&self, query: &TaskQuery, level: ContextLevel) -> Result<String, KbError> {
        let selection = self.select(query)?;
        Ok(self.selection_text(&selection, level))
    }

    /// As [`Kb::task_context`], for a selection already made.
    pub fn selection_text(&self, s: &Selection<'_>, level: ContextLevel) -> String {
        match level {
            Context::None => String::new(),
            Context::Hardware => s.hardware.to_markdown(),
            Context::Full => {
                let mut out = self.prompt_slice_for(s.hardware, s.dialect, Context::Full);
                let title_of = |id: &str| self.pattern(id).map(|p| p.title.trim().to_string());
                for layer in &s.layers {
                    out.push('\n');
                    out.push_str(&layer.to_prompt(&title_of));
                }
                out.push_str(&properties_section(s));
                out
            }
        }
    }
}

/// The properties every candidate must keep: the family's, then each layer's for any task and
/// for this family. Empty when there are none.
fn properties_section(s: &Selection<'_>) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(f) = s.family {
        lines.extend(f.properties.iter().map(|p| one_paragraph(p)));
    }
    for layer in &s.layers {
        lines.extend(layer.properties.iter().map(|p| one_paragraph(p)));
        if let Some(f) = s.family {
            lines.extend(layer.family_properties(&f.family).iter().map(|p| one_paragraph(p)));
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Properties every candidate must keep");
    match s.family {
        Some(f) => {
            let _ = writeln!(out, ": {}", f.title.trim());
        }
        None => out.push('\n'),
    }
    for line in lines {
        let _ = writeln!(out, "- {line}");
    }
    out
}
