//! The knowledge base as the CLI uses it: the target device of a task, its slice for prompts,
//! its hardware figures and the pattern priors for the knob tuner.

use anyhow::Context;
use indexmap::IndexMap;
use ksearch_kb::{Kb, FIGURE_META};
use ksearch_search::tuner::Tuner;
use ksearch_spec::Task;
use std::collections::HashMap;

/// The device a task's candidates run on (the `c` backend runs on this machine's CPU).
pub(crate) fn target_of(task: &Task) -> &'static str {
    match task.config.kernel.language.as_str() {
        "c" => "cpu",
        _ => "h200",
    }
}

pub(crate) fn kb() -> anyhow::Result<Kb> {
    Kb::builtin().context("the built-in knowledge base is broken")
}

/// The target's slice of the knowledge base for the planner and coder prompts.
pub(crate) fn prompt_slice(kb: &Kb, task: &Task) -> anyhow::Result<String> {
    Ok(kb.prompt_slice(target_of(task), ksearch_kb::Context::Full)?)
}

/// The target's hardware figures by name (`l1_kb`, `simd_width`, ...), for knob constraints.
pub(crate) fn hw_figures(kb: &Kb, target: &str) -> anyhow::Result<IndexMap<String, f64>> {
    let spec = kb.hardware(target)?;
    Ok(FIGURE_META
        .iter()
        .filter_map(|m| spec.figures.get(m.key).map(|f| (m.key.to_string(), f.value)))
        .collect())
}

/// The knob tuner for a task with a template.
pub(crate) fn tuner(task: &Task) -> anyhow::Result<Tuner> {
    let template = task.template.clone().with_context(|| {
        format!(
            "{}: kernel.template: the task has no kernel template, so the knob tuner has nothing to tune; \
             use an LLM (--llm PROVIDER:MODEL) or an agent (--brain agent)",
            task.file("task.toml")
        )
    })?;
    let kb = kb()?;
    let hw = hw_figures(&kb, target_of(task))?;
    let mut priors = HashMap::new();
    for knob in &template.space.knobs {
        let mut best: Option<f64> = None;
        for tag in &knob.tags {
            let pattern = kb.pattern(tag).with_context(|| {
                format!(
                    "knob '{}' is tagged '{tag}', which is not a pattern of the knowledge base",
                    knob.name
                )
            })?;
            best = Some(best.map_or(pattern.best_prior(), |b: f64| b.max(pattern.best_prior())));
        }
        if let Some(p) = best {
            priors.insert(knob.name.clone(), p);
        }
    }
    Tuner::new(template, hw, priors).map_err(|e| anyhow::anyhow!("{}: {e}", task.file("task.toml")))
}
