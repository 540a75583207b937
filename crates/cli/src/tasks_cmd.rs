//! `ksearch tasks [--json]`: the built-in tasks, with their language, workload count and
//! description.

use anyhow::Context;
use ksearch_spec::{builtin_names, Task};
use serde_json::json;

/// Prints the built-in tasks as a table, or as JSON with `json_out`; returns the exit status.
pub(crate) fn run(json_out: bool) -> anyhow::Result<u8> {
    let mut tasks = Vec::new();
    for name in builtin_names() {
        tasks.push(Task::load_builtin(&name).with_context(|| format!("built-in task '{name}' is broken"))?);
    }
    if json_out {
        println!("{}", tasks_json()?);
        return Ok(0);
    }
    let width = tasks.iter().map(|t| t.definition.name.len()).max().unwrap_or(4).max(4);
    println!("{:<width$}  {:<9}  {:>9}  description", "task", "language", "workloads");
    for t in &tasks {
        let summary = t
            .definition
            .description
            .as_deref()
            .map(first_sentence)
            .unwrap_or_default();
        println!(
            "{:<width$}  {:<9}  {:>9}  {}",
            t.definition.name,
            t.config.kernel.language,
            t.workloads.len(),
            summary
        );
    }
    println!("\nEvaluate a task's seed kernel with `ksearch eval TASK`, or your own with `ksearch eval TASK FILE`.");
    Ok(0)
}

fn first_sentence(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.find(". ") {
        Some(i) => line[..=i].to_string(),
        None => line.to_string(),
    }
}

/// The built-in tasks as JSON: `ksearch tasks --json`, and the MCP server's `list_tasks`.
pub(crate) fn tasks_json() -> anyhow::Result<serde_json::Value> {
    let mut list = Vec::new();
    for name in builtin_names() {
        let t = Task::load_builtin(&name).with_context(|| format!("built-in task '{name}' is broken"))?;
        list.push(json!({
            "name": t.definition.name,
            "op_type": t.definition.op_type,
            "workloads": t.workloads.len(),
            "language": t.config.kernel.language,
            "targets": t.config.targets,
            "tunable": t.template.is_some(),
            "description": t.definition.description,
        }));
    }
    Ok(json!({ "tasks": list }))
}
