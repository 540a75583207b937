//! The knowledge base as the CLI uses it: the target device of a task, what its prompts cite at
//! a context level (figures, patterns, translation layers, properties, expertise), its hardware
//! figures and the pattern priors for the knob tuner.

use anyhow::Context;
use indexmap::IndexMap;
use ksearch_kb::{ContextLevel, Kb, TaskQuery, FIGURE_META};
use ksearch_search::engine::TaskBrief;
use ksearch_search::tuner::Tuner;
use ksearch_spec::{Expertise, Task};
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

/// What a task's prompts cite at one context level.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Knowledge {
    /// The task brief's `target`: figures (hardware, full), patterns, translation layers and
    /// properties to keep (full).
    pub target: String,
    /// The task brief's `expertise`: the task's `[[expertise]]` rendered (full only).
    pub expertise: String,
}

/// What the knowledge base is asked about `task` when its candidates run on `device`.
pub(crate) fn task_query(task: &Task, device: &str) -> TaskQuery {
    let mut expertise_languages: Vec<String> = Vec::new();
    for e in &task.expertise {
        if !expertise_languages.contains(&e.language) {
            expertise_languages.push(e.language.clone());
        }
    }
    TaskQuery {
        device: device.to_string(),
        language: task.config.kernel.language.clone(),
        op_type: Some(task.definition.op_type.clone()),
        expertise_languages,
    }
}

/// What `task`'s prompts cite at `level` (`--context none|hardware|full`), on its usual device.
pub(crate) fn knowledge(kb: &Kb, task: &Task, level: ContextLevel) -> anyhow::Result<Knowledge> {
    knowledge_on(kb, task, target_of(task), level)
}

/// As [`knowledge`], for a chosen device (`m4-max` for a Metal run).
pub(crate) fn knowledge_on(kb: &Kb, task: &Task, device: &str, level: ContextLevel) -> anyhow::Result<Knowledge> {
    let target = kb
        .task_context(&task_query(task, device), level)
        .with_context(|| format!("the knowledge base for task {}", task.definition.name))?;
    let expertise = match level {
        ContextLevel::Full => render_expertise(&task.expertise),
        ContextLevel::None | ContextLevel::Hardware => String::new(),
    };
    Ok(Knowledge { target, expertise })
}

/// The task brief the search starts from, with the knowledge cited at `level`: what
/// `ksearch run --context LEVEL` starts the engine with.
pub(crate) fn brief(kb: &Kb, task: &Task, level: ContextLevel) -> anyhow::Result<TaskBrief> {
    let Knowledge { target, expertise } = knowledge(kb, task, level)?;
    let mut brief = crate::brief::task_brief(task, target);
    brief.expertise = expertise;
    Ok(brief)
}

/// The expertise as prompts show it: each entry's origin, language and description, then its
/// files in fenced blocks. Empty when the task names none.
pub(crate) fn render_expertise(list: &[Expertise]) -> String {
    let mut out = String::new();
    for (i, e) in list.iter().enumerate() {
        out.push_str(&format!(
            "### {}. {} ({}): {}\n",
            i + 1,
            e.origin,
            e.language,
            e.description
        ));
        let tag = match e.language.as_str() {
            "triton" | "python" | "mlx" => "python",
            other => other,
        };
        for s in &e.sources {
            // A fence longer than any run of backticks in the file, so the file cannot end it.
            let longest = s.content.split(|c| c != '`').map(str::len).max().unwrap_or(0);
            let fence = "`".repeat(longest.max(2) + 1);
            if e.sources.len() > 1 {
                out.push_str(&format!("File {}:\n", s.path));
            }
            out.push_str(&format!("{fence}{tag}\n{}", s.content));
            if !s.content.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("{fence}\n"));
        }
        out.push('\n');
    }
    out.trim_end().to_string()
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

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_search::engine::{Engine, EngineConfig, Event, Request};

    const DEFINITION: &str = r#"{
      "name": "attn", "op_type": "attention", "axes": {"N": {"type": "var"}, "D": {"type": "const", "value": 64}},
      "inputs": {"q": {"shape": ["N", "D"], "dtype": "float16"}, "k": {"shape": ["N", "D"], "dtype": "float16"},
                 "v": {"shape": ["N", "D"], "dtype": "float16"}},
      "outputs": {"o": {"shape": ["N", "D"], "dtype": "float16"}},
      "reference": "def run(q, k, v):\n    return q\n"
    }"#;
    const CUDA: &str = "__global__ void attn_fwd(const half *q) { /* tiled, online softmax, exp2 */ }\n";

    /// An MLX attention task naming one CUDA kernel as expertise.
    fn mlx_task() -> (tempfile::TempDir, Task) {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("definition.json", DEFINITION);
        write(
            "workloads.jsonl",
            "{\"uuid\": \"w0\", \"axes\": {\"N\": 128}, \"inputs\": {}}\n",
        );
        write(
            "task.toml",
            "targets = [\"h200\"]\n[kernel]\nlanguage = \"mlx\"\n\n[[expertise]]\nfile = \"expertise/attn.cu\"\n\
             description = \"FlashAttention-style CUDA forward kernel\"\n",
        );
        write("expertise/attn.cu", CUDA);
        let task = Task::load_folder(dir.path()).unwrap();
        (dir, task)
    }

    /// The planner's first prompt for a brief, as the engine renders it.
    fn init_prompt(brief: TaskBrief) -> String {
        let mut engine = Engine::new();
        engine
            .apply(&Event::Started {
                task: brief,
                config: EngineConfig::default(),
            })
            .unwrap();
        match engine.pending() {
            Some(Request::Plan { messages, .. }) => messages.iter().map(|m| m.content.clone()).collect(),
            other => panic!("expected the planner's init request, got {other:?}"),
        }
    }

    #[test]
    fn the_prompt_at_each_context_level() {
        let kb = kb().unwrap();
        let (_dir, task) = mlx_task();
        let figures = "4800 GB/s";
        let table = "Primitive mapping (cuda -> mlx-cuda";
        let properties = "Properties every candidate must keep: Attention";
        let expertise = "## Existing implementations to adapt";

        let none = init_prompt(brief(&kb, &task, ContextLevel::None).unwrap());
        for absent in [figures, table, properties, expertise, "## Target"] {
            assert!(!none.contains(absent), "none level contains {absent:?}");
        }

        let hardware = init_prompt(brief(&kb, &task, ContextLevel::Hardware).unwrap());
        assert!(hardware.contains("## Target\n## Target hardware: NVIDIA H200"));
        assert!(hardware.contains(figures));
        for absent in [table, properties, expertise, "Optimisation patterns"] {
            assert!(!hardware.contains(absent), "hardware level contains {absent:?}");
        }

        let full = init_prompt(brief(&kb, &task, ContextLevel::Full).unwrap());
        for present in [
            figures,
            "Optimisation patterns for cuda",
            table,
            "grid = number of threads (gridDim * blockDim)",
            properties,
            expertise,
            "### 1. expertise/attn.cu (cuda): FlashAttention-style CUDA forward kernel\n```cuda\n",
            CUDA,
        ] {
            assert!(full.contains(present), "full level lacks {present:?}\n{full}");
        }
        // The expertise follows the translation layer it is to be read with.
        assert!(full.find(table).unwrap() < full.find(expertise).unwrap());
        // Levels only add: what hardware cites, full cites too.
        let slice = knowledge(&kb, &task, ContextLevel::Hardware).unwrap().target;
        assert!(knowledge(&kb, &task, ContextLevel::Full)
            .unwrap()
            .target
            .starts_with(&slice));
    }

    #[test]
    fn metal_on_an_apple_device_and_no_layer_for_plain_cuda() {
        let kb = kb().unwrap();
        let (_dir, task) = mlx_task();
        let k = knowledge_on(&kb, &task, "m1-max", ContextLevel::Full).unwrap();
        assert!(k.target.contains("Primitive mapping (cuda -> metal") && k.target.contains("400 GB/s"));
        assert!(!k.target.contains("mlx-cuda"));
        // A CUDA task is not translated; the C tasks keep their CPU slice.
        let cuda = Task::load_builtin("mamba_scan").unwrap();
        let k = knowledge(&kb, &cuda, ContextLevel::Full).unwrap();
        assert!(!k.target.contains("Primitive mapping"));
        assert!(k.target.contains("Properties every candidate must keep: Scans"));
        assert!(k.expertise.is_empty());
        let c = Task::load_builtin("softmax").unwrap();
        let k = knowledge(&kb, &c, ContextLevel::Full).unwrap();
        assert!(
            k.target.contains("Generic x86-64 CPU")
                && k.target.contains("Properties every candidate must keep: Softmax")
        );
    }

    #[test]
    fn expertise_rendering() {
        assert_eq!(render_expertise(&[]), "");
        let fenced = Expertise {
            description: "two files".into(),
            language: "triton".into(),
            origin: "best kernel of run runs/x".into(),
            sources: vec![
                ksearch_spec::SourceFile {
                    path: "a.py".into(),
                    content: "doc = '''```python```'''".into(),
                },
                ksearch_spec::SourceFile {
                    path: "b.py".into(),
                    content: "x = 1\n".into(),
                },
            ],
        };
        let text = render_expertise(&[fenced]);
        assert_eq!(
            text,
            "### 1. best kernel of run runs/x (triton): two files\nFile a.py:\n````python\ndoc = '''```python```'''\n````\n\
             File b.py:\n```python\nx = 1\n```"
        );
    }
}
