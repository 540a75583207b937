//! What the search is told about a task: its text, its backend's contract, the seed.

use ksearch_search::engine::{Source, TaskBrief};
use ksearch_spec::Task;

/// The brief of `task`, with `target` (the knowledge cited about its device) and `convention`
/// (its backend's contract, rendered: [`crate::contract`]).
pub fn task_brief(task: &Task, target: String, convention: String) -> TaskBrief {
    let def = &task.definition;
    let mut text = String::new();
    if let Some(d) = &def.description {
        text.push_str(d.trim());
        text.push_str("\n\n");
    }
    let shape = |dims: &[String]| {
        if dims.is_empty() {
            "scalar".to_string()
        } else {
            format!("[{}]", dims.join(", "))
        }
    };
    text.push_str("Inputs:\n");
    for (name, spec) in &def.inputs {
        text.push_str(&format!("- {name}: {} {}\n", spec.dtype, shape(spec.dims())));
    }
    text.push_str("Outputs:\n");
    for (name, spec) in &def.outputs {
        text.push_str(&format!("- {name}: {} {}\n", spec.dtype, shape(spec.dims())));
    }
    let axes: Vec<String> = def
        .axes
        .iter()
        .map(|(n, a)| match a {
            ksearch_spec::Axis::Const { value, .. } => format!("{n} = {value}"),
            ksearch_spec::Axis::Var { .. } => format!("{n} (varies)"),
        })
        .collect();
    text.push_str(&format!("Axes: {}\n", axes.join(", ")));
    if !def.constraints.is_empty() {
        text.push_str(&format!("Constraints: {}\n", def.constraints.join("; ")));
    }
    let workloads: Vec<String> = task
        .workloads
        .iter()
        .map(|w| format!("{} ({})", w.uuid, axes_label(w)))
        .collect();
    text.push_str(&format!(
        "Workloads (all must pass; speed is the geometric mean over them): {}\n",
        workloads.join(", ")
    ));
    text.push_str(&format!(
        "\nReference ({}):\n```python\n{}\n```",
        def.op_type,
        def.reference.trim_end()
    ));
    let default_file = task
        .seed
        .as_ref()
        .map(|s| s.path.clone())
        .unwrap_or_else(|| crate::contract::default_file(task.config.kernel.language).to_string());
    TaskBrief {
        name: def.name.clone(),
        text,
        language: task.config.kernel.language,
        convention,
        default_file,
        target,
        // Set from the task's [[expertise]] at the full context level (knowledge::brief).
        expertise: String::new(),
        seed: task.seed.as_ref().map(|s| {
            vec![Source {
                path: s.path.clone(),
                content: s.content.clone(),
            }]
        }),
    }
}

fn axes_label(w: &ksearch_spec::Workload) -> String {
    w.axes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brief_carries_the_task_and_the_given_contract() {
        let task = Task::load_builtin("mlx_mamba_step").unwrap();
        let brief = task_brief(&task, "T".into(), "C".into());
        assert_eq!((brief.target.as_str(), brief.convention.as_str()), ("T", "C"));
        assert_eq!(brief.default_file, "seed.toml");
        assert!(brief.text.contains("Reference (") && brief.text.contains("Workloads"));
    }
}
