//! `ksearch kb show TARGET` and `ksearch kb list`: what the knowledge base holds for a device or a
//! translation target, where every figure comes from, and exactly what prompts cite.

use anyhow::Context as _;
use ksearch_kb::{ContextLevel, Kb, TaskQuery};

/// `ksearch kb show` and `ksearch kb list`.
#[derive(clap::Subcommand)]
pub(crate) enum KbCommand {
    /// Print a device's figures (with their sources), its patterns and every translation layer
    /// into it; or, for a translation target (metal, mlx-cuda) or layer id, its layers.
    Show {
        /// A device name or alias (cpu, h100, h200, b200, a100, m1-pro ... m3-ultra, m4-max), a
        /// translation target (metal, mlx-cuda) or a layer id (cuda-to-metal).
        target: String,
        /// Print exactly what prompts cite at this context level (none, hardware or full)
        /// instead, for a task on this device.
        #[arg(long, value_name = "LEVEL")]
        prompt: Option<ContextLevel>,
        /// With --prompt: the task (a folder or a built-in name) whose language, op_type and
        /// expertise decide the translation layers and properties cited.
        #[arg(long, value_name = "TASK", conflicts_with_all = ["language", "op_type"])]
        task: Option<String>,
        /// With --prompt: the task's kernel language (c, cuda, triton, python, mlx, cpp,
        /// cuda_binding); default: the device's own dialect.
        #[arg(long, value_name = "LANGUAGE")]
        language: Option<String>,
        /// With --prompt: the definition's op_type (attention, selective_scan, softmax,
        /// rmsnorm, ...), which selects the properties every candidate must keep.
        #[arg(long, value_name = "OP_TYPE")]
        op_type: Option<String>,
    },
    /// List the devices, translation layers and task families the knowledge base knows.
    List,
}

/// Prints what the knowledge base holds for the command; returns the exit status.
pub(crate) fn run(command: &KbCommand) -> anyhow::Result<u8> {
    let kb = crate::knowledge::kb()?;
    let text = match command {
        KbCommand::List => list(&kb),
        KbCommand::Show {
            target,
            prompt: Some(level),
            task,
            language,
            op_type,
        } => prompt(&kb, target, *level, task.as_deref(), language, op_type)?,
        KbCommand::Show {
            target,
            prompt: None,
            task,
            language,
            op_type,
        } => {
            if task.is_some() || language.is_some() || op_type.is_some() {
                anyhow::bail!("--task, --language and --op-type choose what --prompt prints; add --prompt LEVEL");
            }
            format!("{}\n", show(&kb, target)?.trim_end())
        }
    };
    // A reader that stops early (`| head`) is not an error.
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}

/// What prompts cite at `level` for a task on device `target`.
fn prompt(
    kb: &Kb,
    target: &str,
    level: ContextLevel,
    task: Option<&str>,
    language: &Option<String>,
    op_type: &Option<String>,
) -> anyhow::Result<String> {
    if let Some(arg) = task {
        let task = ksearch_spec::Task::load(arg).with_context(|| format!("task '{arg}'"))?;
        let k = crate::knowledge::knowledge_on(kb, &task, target, level)?;
        let mut out = k.target;
        if !k.expertise.is_empty() {
            out.push_str("\n## Existing implementations to adapt\n");
            out.push_str(&k.expertise);
            out.push('\n');
        }
        return Ok(out);
    }
    let hw = kb.hardware(target)?;
    let query = TaskQuery {
        device: target.to_string(),
        language: language.clone().unwrap_or_else(|| hw.targets[0].to_string()),
        op_type: op_type.clone(),
        expertise_languages: Vec::new(),
    };
    Ok(kb.task_context(&query, level)?)
}

/// A device (sources, slice, layers into it), a translation target or a layer.
pub(crate) fn show(kb: &Kb, target: &str) -> anyhow::Result<String> {
    let title_of = |id: &str| kb.pattern(id).map(|p| p.title.trim().to_string());
    let hw = match kb.hardware(target) {
        Ok(hw) => hw,
        Err(not_a_device) => {
            let layers = match kb.translation(target) {
                Some(layer) => vec![layer],
                None => kb.translations_into(target),
            };
            if layers.is_empty() {
                let targets: Vec<String> = kb.translations().map(|t| t.target.clone()).collect();
                anyhow::bail!(
                    "{not_a_device}; translation targets: {}",
                    if targets.is_empty() {
                        "none".to_string()
                    } else {
                        targets.join(", ")
                    }
                );
            }
            let mut out = String::new();
            for layer in layers {
                out.push_str(&layer.details_markdown(&title_of));
                let devices: Vec<&str> = kb.devices_for(layer).iter().map(|h| h.name.as_str()).collect();
                out.push_str(&format!("Devices: {}\n\n", devices.join(", ")));
            }
            return Ok(out);
        }
    };
    let mut out = String::new();
    out.push_str(hw.sources_markdown().trim_end());
    out.push_str("\n\n");
    out.push_str(kb.prompt_slice(target, ksearch_kb::Context::Full)?.trim_end());
    out.push_str("\n\n");
    let layers = kb.translations_for(hw);
    if layers.is_empty() {
        let dialects: Vec<&str> = hw.targets.iter().map(|t| t.as_str()).collect();
        out.push_str(&format!(
            "No translation layer targets {} kernels ({}).\n",
            dialects.join(" or "),
            hw.name
        ));
    }
    for layer in layers {
        out.push_str(&layer.details_markdown(&title_of));
        out.push('\n');
    }
    Ok(out)
}

/// Devices, translation layers and task families, one per line.
pub(crate) fn list(kb: &Kb) -> String {
    let mut out = String::from("Devices (name: kernel dialects):\n");
    for hw in kb.hardware_specs() {
        let dialects: Vec<&str> = hw.targets.iter().map(|t| t.as_str()).collect();
        out.push_str(&format!("  {}: {}\n", hw.name, dialects.join(", ")));
    }
    out.push_str("Translation layers (id: source -> target, for which tasks):\n");
    for t in kb.translations() {
        out.push_str(&format!(
            "  {}: {} -> {}, {} tasks on {} devices\n",
            t.id,
            t.source,
            t.target,
            t.languages.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("/"),
            t.dialect
        ));
    }
    out.push_str("Task families (family: op_types):\n");
    for f in kb.families() {
        out.push_str(&format!("  {}: {}\n", f.family, f.op_types.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A third translation pair, as a user adds it: one data file.
    const TRITON_TO_METAL: &str = include_str!("../../kb/tests/fixtures/triton-to-metal.toml");

    #[test]
    fn a_translation_pair_added_through_ksearch_kb_is_listed_and_shown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("translation")).unwrap();
        std::fs::write(dir.path().join("translation/triton-to-metal.toml"), TRITON_TO_METAL).unwrap();
        let kb = crate::knowledge::kb_with(Some(dir.path())).unwrap();
        assert!(list(&kb).contains("  triton-to-metal: triton -> metal, mlx tasks on metal devices\n"));
        for target in ["metal", "m4-max", "triton-to-metal"] {
            let text = show(&kb, target).unwrap();
            assert!(text.contains("(`triton-to-metal`)"), "{target}: {text}");
        }
        assert!(!show(&kb, "h200").unwrap().contains("triton-to-metal"));
    }

    #[test]
    fn show_every_device_and_target() {
        let kb = crate::knowledge::kb().unwrap();
        for name in kb.hardware_names() {
            let text = show(&kb, name).unwrap();
            assert!(text.starts_with("## Sources:"), "{name}");
            assert!(text.contains("## Target hardware:"), "{name}");
            let hw = kb.hardware(name).unwrap();
            let layers = kb.translations_for(hw);
            for layer in &layers {
                assert!(text.contains(&format!("(`{}`)", layer.id)), "{name} lacks {}", layer.id);
                assert!(text.contains("Primitive mapping"));
            }
            if layers.is_empty() {
                assert!(text.contains("No translation layer targets"), "{name}");
            }
        }
        let m4 = show(&kb, "m4-max").unwrap();
        assert!(m4.contains("(`cuda-to-metal`)") && !m4.contains("(`cuda-to-mlx-cuda`)"));
        assert!(m4.contains("References:") && m4.contains("For attention tasks on metal:"));
        let h200 = show(&kb, "h200").unwrap();
        assert!(h200.contains("(`cuda-to-mlx-cuda`)") && !h200.contains("(`cuda-to-metal`)"));
        let cpu = show(&kb, "cpu").unwrap();
        assert!(cpu.contains("No translation layer targets cpu kernels (cpu-generic)."));
        // A translation target or a layer id shows the layers and their devices.
        let metal = show(&kb, "metal").unwrap();
        assert!(metal.contains("(`cuda-to-metal`)") && metal.contains("Devices: apple-m1-max"));
        assert_eq!(show(&kb, "cuda-to-metal").unwrap(), metal);
        assert!(show(&kb, "mlx-cuda")
            .unwrap()
            .contains("Devices: a100-sxm, b200, h100-sxm, h200"));
        let err = show(&kb, "tpu").unwrap_err().to_string();
        assert!(
            err.contains("no hardware named 'tpu'") && err.contains("translation targets: metal, mlx-cuda"),
            "{err}"
        );
    }

    #[test]
    fn prompt_levels_and_list() {
        let kb = crate::knowledge::kb().unwrap();
        let mlx = Some("mlx".to_string());
        let attention = Some("attention".to_string());
        assert_eq!(
            prompt(&kb, "m4-max", ContextLevel::None, None, &mlx, &attention).unwrap(),
            ""
        );
        let hw = prompt(&kb, "m4-max", ContextLevel::Hardware, None, &mlx, &attention).unwrap();
        assert!(hw.contains("546 GB/s") && !hw.contains("Primitive mapping"));
        let full = prompt(&kb, "m4-max", ContextLevel::Full, None, &mlx, &attention).unwrap();
        assert!(full.contains("Primitive mapping (cuda -> metal") && full.contains("Attention"));
        // Without a language, the device's own dialect: no translation.
        let plain = prompt(&kb, "m4-max", ContextLevel::Full, None, &None, &None).unwrap();
        assert_eq!(plain, kb.prompt_slice("m4-max", ksearch_kb::Context::Full).unwrap());
        // A built-in task chooses for itself.
        let task = prompt(&kb, "h200", ContextLevel::Full, Some("mamba_scan"), &None, &None).unwrap();
        assert!(task.contains("Properties every candidate must keep: Scans"));

        let text = list(&kb);
        for needle in [
            "  apple-m3-ultra: metal\n",
            "  h200: cuda, triton\n",
            "  cuda-to-metal: cuda -> metal, mlx tasks on metal devices\n",
            "  cuda-to-mlx-cuda: cuda -> mlx-cuda, mlx tasks on cuda devices\n",
            "  scan: selective_scan",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
