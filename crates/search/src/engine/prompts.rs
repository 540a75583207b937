//! Prompt templates (files under `prompts/`, rendered with minijinja). Rendering is a pure
//! function of the engine's state, so a replay renders byte-identical prompts and their
//! content keys match the recorded answers.

use minijinja::Environment;
use serde::Serialize;
use std::sync::OnceLock;

const TEMPLATES: &[(&str, &str)] = &[
    ("planner_system.j2", include_str!("../../prompts/planner_system.j2")),
    ("coder_system.j2", include_str!("../../prompts/coder_system.j2")),
    (
        "edit_script_format.j2",
        include_str!("../../prompts/edit_script_format.j2"),
    ),
    ("task_context.j2", include_str!("../../prompts/task_context.j2")),
    ("expertise.j2", include_str!("../../prompts/expertise.j2")),
    ("world_state.j2", include_str!("../../prompts/world_state.j2")),
    ("code_common.j2", include_str!("../../prompts/code_common.j2")),
    ("plan_init.j2", include_str!("../../prompts/plan_init.j2")),
    ("plan_propose.j2", include_str!("../../prompts/plan_propose.j2")),
    ("plan_refine.j2", include_str!("../../prompts/plan_refine.j2")),
    ("plan_too_hard.j2", include_str!("../../prompts/plan_too_hard.j2")),
    ("code_action.j2", include_str!("../../prompts/code_action.j2")),
    ("code_debug.j2", include_str!("../../prompts/code_debug.j2")),
    ("code_improve.j2", include_str!("../../prompts/code_improve.j2")),
    ("code_refine.j2", include_str!("../../prompts/code_refine.j2")),
    ("code_evolve.j2", include_str!("../../prompts/code_evolve.j2")),
];

fn environment() -> &'static Result<Environment<'static>, String> {
    static ENV: OnceLock<Result<Environment<'static>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        // Prompts are plain text: no HTML escaping, keep the final newline as written.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_keep_trailing_newline(true);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .map_err(|e| format!("prompts/{name}: {e}"))?;
        }
        Ok(env)
    })
}

/// Renders template `name` with `context`. An error here is a defect of ours (a template that
/// does not parse or names a missing value), never of the user's input.
pub fn render(name: &str, context: impl Serialize) -> Result<String, String> {
    let env = environment().as_ref().map_err(|e| e.clone())?;
    let template = env.get_template(name).map_err(|e| format!("prompts/{name}: {e}"))?;
    let text = template.render(context).map_err(|e| format!("prompts/{name}: {e:#}"))?;
    Ok(squeeze_blank_lines(&text))
}

/// Template conditionals leave runs of blank lines; one is enough.
fn squeeze_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim().to_string() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        for (name, _) in TEMPLATES {
            assert!(environment().as_ref().unwrap().get_template(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn blank_runs_collapse() {
        assert_eq!(squeeze_blank_lines("a\n\n\n\nb  \n\n"), "a\n\nb\n");
    }
}
