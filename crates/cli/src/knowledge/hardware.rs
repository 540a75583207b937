//! A task's hardware figures, the knob limits, and the knob tuner with the knowledge base's
//! pattern priors.

use super::{kb, target_of, Platform};
use anyhow::Context;
use indexmap::IndexMap;
use ksearch_kb::{Kb, FIGURE_META};
use ksearch_search::tuner::Tuner;
use ksearch_spec::Task;
use std::collections::HashMap;

/// The target's hardware figures by name (`l1_kb`, `simd_width`, ...), for knob constraints.
pub(crate) fn hw_figures(kb: &Kb, target: &str) -> anyhow::Result<IndexMap<String, f64>> {
    let spec = kb.hardware(target)?;
    Ok(FIGURE_META
        .iter()
        .filter_map(|m| spec.figures.get(m.key).map(|f| (m.key.to_string(), f.value)))
        .collect())
}

/// The hardware figures of `task`'s target device on this platform (the knob limits of
/// `ksearch sweep`); prints a warning when the device was assumed.
pub(crate) fn task_figures(kb: &Kb, task: &Task) -> anyhow::Result<IndexMap<String, f64>> {
    let target = target_of(kb, task, Platform::current())?;
    if let Some(warning) = &target.warning {
        eprintln!("warning: {warning}");
    }
    hw_figures(kb, &target.device)
}

/// The knob tuner for a task with a template, with its target device's figures on this
/// platform as the knob limits.
pub(crate) fn tuner(task: &Task) -> anyhow::Result<Tuner> {
    let template = task.template.clone().with_context(|| {
        format!(
            "{}: kernel.template: the task has no kernel template, so the knob tuner has nothing to tune; \
             use an LLM (--llm PROVIDER:MODEL) or an agent (--brain agent)",
            task.file("task.toml")
        )
    })?;
    let kb = kb()?;
    let hw = hw_figures(&kb, &target_of(&kb, task, Platform::current())?.device)?;
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
