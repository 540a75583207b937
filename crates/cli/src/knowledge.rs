//! The knowledge base as the CLI uses it: the target device of a task, what its prompts cite at
//! a context level (figures, patterns, translation layers, properties, expertise), its hardware
//! figures and the pattern priors for the knob tuner.
//!
//! The knowledge base is the built-in one, with the folder named by `KSEARCH_KB` laid over it
//! when that variable is set (docs/knowledge-base.md).

use anyhow::Context;
use indexmap::IndexMap;
use ksearch_kb::{ContextLevel, Kb, TargetKind, TaskQuery, FIGURE_META};
use ksearch_search::engine::TaskBrief;
use ksearch_search::tuner::Tuner;
use ksearch_spec::{Expertise, Task};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming a folder laid out like the repository's `kb/` whose files
/// add to or replace the built-in ones.
pub(crate) const KB_ENV: &str = "KSEARCH_KB";

/// The platform ksearch runs on. It decides an MLX task's kernel dialect (docs/mlx.md): Metal
/// through `mx.fast.metal_kernel` on macOS, CUDA through `mx.fast.cuda_kernel` on Linux (any
/// other system is taken as Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Platform {
    MacOs,
    Linux,
}

impl Platform {
    /// The platform this binary was built for.
    pub(crate) fn current() -> Platform {
        if cfg!(target_os = "macos") {
            Platform::MacOs
        } else {
            Platform::Linux
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Platform::MacOs => "macOS",
            Platform::Linux => "Linux",
        })
    }
}

/// The device a task's prompts and knob limits are about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The device's name in the knowledge base (`h200`, `apple-m4-max`, `cpu-generic`).
    pub device: String,
    /// Set when task.toml names no device and one was assumed: a line for the prompts (the
    /// figures are an assumption) ...
    pub note: Option<String>,
    /// ... and a warning for the user, naming the file and the field to set.
    pub warning: Option<String>,
}

/// The kernel dialect a task's candidates are written in on `platform`; `None` for `python`,
/// which takes the device's own.
fn dialect_of(language: &str, platform: Platform) -> Option<TargetKind> {
    match language {
        "c" => Some(TargetKind::Cpu),
        "cuda" => Some(TargetKind::Cuda),
        "triton" => Some(TargetKind::Triton),
        "mlx" => Some(match platform {
            Platform::MacOs => TargetKind::Metal,
            Platform::Linux => TargetKind::Cuda,
        }),
        _ => None,
    }
}

/// The device assumed for a dialect when task.toml names none.
fn default_device(dialect: Option<TargetKind>) -> &'static str {
    match dialect {
        Some(TargetKind::Cpu) => "cpu",
        Some(TargetKind::Metal) => "apple-m4-max",
        Some(TargetKind::Cuda | TargetKind::Triton) | None => "h200",
    }
}

/// The device a task's candidates run on, from task.toml's `targets` (device names or aliases
/// of the knowledge base, in order of preference): the first that runs the task's kernel dialect
/// on `platform` (`c`: the CPU; `cuda`, `triton`: that dialect; `mlx`: Metal on macOS, CUDA on
/// Linux; `python`: any). Errors name task.toml and the field: an entry the knowledge base does
/// not know, or entries of which none runs the dialect (an MLX task on macOS naming only NVIDIA
/// GPUs). When `targets` is empty, a `c` task runs on this machine's CPU (`cpu`); any other is
/// given a default device with a note in the prompts and a warning, since its figures are an
/// assumption.
pub(crate) fn target_of(kb: &Kb, task: &Task, platform: Platform) -> anyhow::Result<Target> {
    let file = task.file("task.toml");
    let language = task.config.kernel.language.as_str();
    let dialect = dialect_of(language, platform);
    let runs = |hw: &ksearch_kb::HardwareSpec| dialect.is_none_or(|d| hw.targets.contains(&d));
    let candidates = || -> String {
        let names: Vec<&str> = kb
            .hardware_specs()
            .filter(|h| runs(h))
            .map(|h| h.name.as_str())
            .collect();
        names.join(", ")
    };
    let targets = &task.config.targets;
    let mut chosen = None;
    for (i, name) in targets.iter().enumerate() {
        let hw = kb.hardware(name).map_err(|_| {
            anyhow::anyhow!(
                "{file}: targets[{i}]: '{name}' is not a device of the knowledge base (known: {}); fix the name, \
                 or describe the device in DIR/hardware/{name}.toml and set {KB_ENV}=DIR (docs/knowledge-base.md)",
                kb.hardware_names().join(", ")
            )
        })?;
        if chosen.is_none() && runs(hw) {
            chosen = Some(hw.name.clone());
        }
    }
    if let Some(device) = chosen {
        return Ok(Target {
            device,
            note: None,
            warning: None,
        });
    }
    if let (false, Some(d)) = (targets.is_empty(), dialect) {
        let why = match language {
            "mlx" => format!(" (mlx tasks on {platform} are written in {d})"),
            _ => String::new(),
        };
        anyhow::bail!(
            "{file}: targets: none of {} runs {d} kernels{why}; add a device that does: {}",
            targets.join(", "),
            candidates()
        );
    }
    let hw = kb.hardware(default_device(dialect))?;
    if dialect == Some(TargetKind::Cpu) {
        // The c backend runs on this machine's CPU, which the knowledge base describes once.
        return Ok(Target {
            device: hw.name.clone(),
            note: None,
            warning: None,
        });
    }
    let kernels = dialect.map_or_else(|| format!("'{language}'"), |d| d.to_string());
    Ok(Target {
        device: hw.name.clone(),
        note: Some(format!(
            "Assumed device: the task does not name the device its kernels run on, so these are the {}'s figures \
             (the default for {kernels} kernels); the actual device may differ.",
            hw.display_name.trim()
        )),
        warning: Some(format!(
            "{file}: targets: not set, so ksearch assumes the {} ({}) for the figures the prompts cite and the \
             knob limits; name the device, e.g. targets = [\"{}\"] (devices for {kernels} kernels: {})",
            hw.display_name.trim(),
            hw.name,
            hw.name,
            candidates()
        )),
    })
}

/// The knowledge base: the built-in one, with the folder named by `KSEARCH_KB` laid over it.
pub(crate) fn kb() -> anyhow::Result<Kb> {
    kb_with(overrides_dir().as_deref())
}

/// The folder `KSEARCH_KB` names, if set and not empty.
pub(crate) fn overrides_dir() -> Option<PathBuf> {
    std::env::var_os(KB_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The built-in knowledge base with `dir`'s files (laid out like `kb/`) added or replacing
/// entries of the same name. Every problem names the file and the key.
pub(crate) fn kb_with(dir: Option<&Path>) -> anyhow::Result<Kb> {
    let kb = Kb::builtin().context("the built-in knowledge base is broken")?;
    match dir {
        None => Ok(kb),
        // The error's own text only: an I/O error's cause is already in it.
        Some(dir) => kb.with_dir(dir).map_err(|e| match e.problems().len() {
            0 | 1 => anyhow::anyhow!("{KB_ENV}={}: {e}", dir.display()),
            n => anyhow::anyhow!("{KB_ENV}={}: {n} problems:\n{e}", dir.display()),
        }),
    }
}

/// What `ksearch doctor` says about the knowledge base: whether it loads, what it holds, and
/// which files `KSEARCH_KB` adds or replaces.
pub(crate) fn describe(dir: Option<&Path>) -> (bool, String) {
    let kb = match kb_with(dir) {
        Ok(kb) => kb,
        Err(e) => return (false, format!("{e:#}")),
    };
    let counts = format!(
        "{} devices, {} patterns, {} translation layers, {} task families",
        kb.hardware_names().len(),
        kb.patterns().count(),
        kb.translations().count(),
        kb.families().count()
    );
    match dir {
        None => (true, format!("built-in: {counts} ({KB_ENV} not set)")),
        Some(dir) => {
            let prefix = format!("{}{}", dir.display(), std::path::MAIN_SEPARATOR);
            let ours: Vec<&str> = kb.files().into_iter().filter_map(|f| f.strip_prefix(&prefix)).collect();
            (
                true,
                format!(
                    "built-in + {KB_ENV}={} ({}): {counts}",
                    dir.display(),
                    if ours.is_empty() {
                        "no data files".to_string()
                    } else {
                        ours.join(", ")
                    }
                ),
            )
        }
    }
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

/// What `task`'s prompts cite at `level` (`--context none|hardware|full`) on its target device
/// on `platform` ([`target_of`]). When the device was assumed, the cited text starts with the
/// note saying so (at `hardware` and `full`; `none` cites nothing).
pub(crate) fn knowledge_for(
    kb: &Kb,
    task: &Task,
    platform: Platform,
    level: ContextLevel,
) -> anyhow::Result<Knowledge> {
    let target = target_of(kb, task, platform)?;
    let mut k = knowledge_on(kb, task, &target.device, level)?;
    if let (Some(note), false) = (&target.note, k.target.is_empty()) {
        k.target = format!("{note}\n{}", k.target);
    }
    Ok(k)
}

/// As [`knowledge_for`], for a chosen device (`m4-max`; what `ksearch kb show DEVICE --prompt
/// LEVEL --task TASK` prints).
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
/// Prints a warning when the task's device was assumed.
pub(crate) fn brief(kb: &Kb, task: &Task, level: ContextLevel) -> anyhow::Result<TaskBrief> {
    if let Some(warning) = target_of(kb, task, Platform::current())?.warning {
        eprintln!("warning: {warning}");
    }
    brief_for(kb, task, Platform::current(), level)
}

/// As [`brief`], on `platform`, without the warning.
pub(crate) fn brief_for(kb: &Kb, task: &Task, platform: Platform, level: ContextLevel) -> anyhow::Result<TaskBrief> {
    let Knowledge { target, expertise } = knowledge_for(kb, task, platform, level)?;
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

    fn write(root: &Path, name: &str, text: &str) {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// An attention task with this task.toml and these extra files.
    fn attention_task(toml: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, Task) {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "definition.json", DEFINITION);
        write(
            dir.path(),
            "workloads.jsonl",
            "{\"uuid\": \"w0\", \"axes\": {\"N\": 128}, \"inputs\": {}}\n",
        );
        write(dir.path(), "task.toml", toml);
        for (name, text) in files {
            write(dir.path(), name, text);
        }
        let task = Task::load_folder(dir.path()).unwrap();
        (dir, task)
    }

    /// An MLX attention task naming one CUDA kernel as expertise.
    fn mlx_task() -> (tempfile::TempDir, Task) {
        attention_task(
            "targets = [\"h200\"]\n[kernel]\nlanguage = \"mlx\"\n\n[[expertise]]\nfile = \"expertise/attn.cu\"\n\
             description = \"FlashAttention-style CUDA forward kernel\"\n",
            &[("expertise/attn.cu", CUDA)],
        )
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

        let brief = |level| brief_for(&kb, &task, Platform::Linux, level).unwrap();
        let knowledge = |level| knowledge_for(&kb, &task, Platform::Linux, level).unwrap();
        let none = init_prompt(brief(ContextLevel::None));
        for absent in [figures, table, properties, expertise, "## Target"] {
            assert!(!none.contains(absent), "none level contains {absent:?}");
        }

        let hardware = init_prompt(brief(ContextLevel::Hardware));
        assert!(hardware.contains("## Target\n## Target hardware: NVIDIA H200"));
        assert!(hardware.contains(figures));
        for absent in [table, properties, expertise, "Optimisation patterns"] {
            assert!(!hardware.contains(absent), "hardware level contains {absent:?}");
        }

        let full = init_prompt(brief(ContextLevel::Full));
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
        let slice = knowledge(ContextLevel::Hardware).target;
        assert!(knowledge(ContextLevel::Full).target.starts_with(&slice));
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
        let k = knowledge_for(&kb, &cuda, Platform::Linux, ContextLevel::Full).unwrap();
        assert!(!k.target.contains("Primitive mapping"));
        assert!(k.target.contains("Properties every candidate must keep: Scans"));
        assert!(k.expertise.is_empty());
        let c = Task::load_builtin("softmax").unwrap();
        let k = knowledge_for(&kb, &c, Platform::MacOs, ContextLevel::Full).unwrap();
        assert!(
            k.target.contains("Generic x86-64 CPU")
                && k.target.contains("Properties every candidate must keep: Softmax")
        );
    }

    /// `task` with task.toml's `targets` set to `targets`.
    fn targeting(mut task: Task, targets: &[&str]) -> Task {
        task.config.targets = targets.iter().map(|t| t.to_string()).collect();
        task
    }

    fn device(kb: &Kb, task: &Task, platform: Platform) -> String {
        let target = target_of(kb, task, platform).unwrap();
        assert_eq!((&target.note, &target.warning), (&None, &None), "{}", target.device);
        target.device
    }

    #[test]
    fn the_target_follows_the_task_and_the_platform() {
        let kb = kb().unwrap();
        // An MLX task: Metal on an Apple GPU on macOS, MLX's CUDA backend on the H200 on Linux,
        // each the first of the task's targets that runs the dialect.
        let mlx = Task::load_builtin("mlx_attention").unwrap();
        assert_eq!(device(&kb, &mlx, Platform::MacOs), "apple-m4-max");
        assert_eq!(device(&kb, &mlx, Platform::Linux), "h200");
        let mac = knowledge_for(&kb, &mlx, Platform::MacOs, ContextLevel::Full).unwrap();
        assert!(
            mac.target.starts_with("## Target hardware: Apple M4 Max"),
            "{}",
            mac.target
        );
        assert!(mac.target.contains("546 GB/s") && !mac.target.contains("4800 GB/s"));
        assert!(mac.target.contains("Primitive mapping (cuda -> metal") && !mac.target.contains("mlx-cuda"));
        let linux = knowledge_for(&kb, &mlx, Platform::Linux, ContextLevel::Full).unwrap();
        assert!(linux.target.starts_with("## Target hardware: NVIDIA H200"));
        assert!(linux.target.contains("Primitive mapping (cuda -> mlx-cuda") && !linux.target.contains("-> metal"));
        // The order of `targets` is the order of preference.
        let m1 = targeting(mlx.clone(), &["h100", "m1-max", "m4-max"]);
        assert_eq!(device(&kb, &m1, Platform::MacOs), "apple-m1-max");
        assert_eq!(device(&kb, &m1, Platform::Linux), "h100-sxm");
        // A CUDA task on another GPU gets that GPU's figures and knob limits, not the H200's.
        let cuda = Task::load_builtin("attention_prefill").unwrap();
        assert_eq!(device(&kb, &cuda, Platform::Linux), "h200");
        let h100 = targeting(cuda, &["h100"]);
        assert_eq!(device(&kb, &h100, Platform::Linux), "h100-sxm");
        assert_eq!(device(&kb, &h100, Platform::MacOs), "h100-sxm");
        let k = knowledge_for(&kb, &h100, Platform::Linux, ContextLevel::Hardware).unwrap();
        assert!(k.target.starts_with("## Target hardware: NVIDIA H100"), "{}", k.target);
        assert!(k.target.contains("3350 GB/s") && !k.target.contains("4800"));
        assert_eq!(
            hw_figures(&kb, &device(&kb, &h100, Platform::Linux)).unwrap(),
            hw_figures(&kb, "h100").unwrap()
        );
        // C tasks run on this machine's CPU, named or not.
        let c = Task::load_builtin("softmax").unwrap();
        assert_eq!(device(&kb, &c, Platform::MacOs), "cpu-generic");
        assert_eq!(device(&kb, &targeting(c, &[]), Platform::Linux), "cpu-generic");
        // Python kernels take the device's own dialect: any device.
        let (_dir, py) = attention_task("targets = [\"b200\"]\n[kernel]\nlanguage = \"python\"\n", &[]);
        assert_eq!(device(&kb, &py, Platform::Linux), "b200");
    }

    #[test]
    fn a_target_that_cannot_be_determined() {
        let kb = kb().unwrap();
        let (_dir, task) = mlx_task();
        let file = task.file("task.toml");
        // Targets none of which runs the task's dialect here: an error naming the file and field.
        let err = target_of(&kb, &task, Platform::MacOs).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{file}: targets: none of h200 runs metal kernels (mlx tasks on macOS are written in metal); \
                 add a device that does: apple-m1-max,"
            )),
            "{err}"
        );
        assert!(brief_for(&kb, &task, Platform::MacOs, ContextLevel::Full).is_err());
        let err = target_of(&kb, &targeting(task.clone(), &["cpu"]), Platform::Linux).unwrap_err();
        assert!(
            err.to_string().contains("targets: none of cpu runs cuda kernels"),
            "{err}"
        );
        // A device the knowledge base does not know, wherever it is in the list.
        let err = target_of(&kb, &targeting(task.clone(), &["h200", "mi300x"]), Platform::Linux)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "{file}: targets[1]: 'mi300x' is not a device of the knowledge base (known: a100-sxm,"
            )),
            "{err}"
        );
        assert!(err.contains("set KSEARCH_KB=DIR"), "{err}");

        // No targets: a default device, said so in the prompt and in a warning.
        let none = targeting(task, &[]);
        let target = target_of(&kb, &none, Platform::Linux).unwrap();
        assert_eq!(target.device, "h200");
        let warning = target.warning.unwrap();
        assert!(
            warning.starts_with(&format!("{file}: targets: not set, so ksearch assumes the NVIDIA H200")),
            "{warning}"
        );
        assert!(warning.contains("targets = [\"h200\"] (devices for cuda kernels: a100-sxm, b200, h100-sxm, h200)"));
        let note = target.note.unwrap();
        for level in [ContextLevel::Hardware, ContextLevel::Full] {
            let k = knowledge_for(&kb, &none, Platform::Linux, level).unwrap();
            assert!(
                k.target
                    .starts_with(&format!("{note}\n## Target hardware: NVIDIA H200")),
                "{}",
                k.target
            );
        }
        assert!(note.starts_with("Assumed device: the task does not name the device") && !note.contains(&file));
        let prompt = init_prompt(brief_for(&kb, &none, Platform::Linux, ContextLevel::Hardware).unwrap());
        assert!(prompt.contains(&format!("## Target\n{note}")), "{prompt}");
        // `none` cites nothing, the note included.
        assert_eq!(
            knowledge_for(&kb, &none, Platform::Linux, ContextLevel::None).unwrap(),
            Knowledge::default()
        );
        let mac = target_of(&kb, &none, Platform::MacOs).unwrap();
        assert_eq!(mac.device, "apple-m4-max");
        assert!(mac
            .note
            .unwrap()
            .contains("Apple M4 Max (GPU)'s figures (the default for metal kernels)"));
    }

    /// A third translation pair, as a user adds it: one data file.
    const TRITON_TO_METAL: &str = r#"
schema = 1
id = "triton-to-metal"
source = "triton"
target = "metal"
title = "Triton to Metal (MLX mx.fast.metal_kernel on Apple GPUs)"
dialect = "metal"
languages = ["mlx"]
summary = "A Triton program becomes one threadgroup; its blocks become loops over SIMD-group tiles."

[[mappings]]
from = "tl.program_id(0)"
to = "threadgroup_position_in_grid.x"
constraint = "MLX's grid counts threads, not programs: the grid is programs times the threadgroup size."

[[patterns]]
id = "simd-reductions"
note = "tl.sum and tl.max over a block become simd_sum and simd_max plus one threadgroup step."
"#;

    #[test]
    fn a_translation_pair_added_through_ksearch_kb() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "translation/triton-to-metal.toml", TRITON_TO_METAL);
        let kb = kb_with(Some(dir.path())).unwrap();
        // `ksearch kb list` and `kb show` show it ...
        assert!(crate::kb_cmd::list(&kb).contains("  triton-to-metal: triton -> metal, mlx tasks on metal devices\n"));
        for target in ["metal", "m4-max", "triton-to-metal"] {
            let text = crate::kb_cmd::show(&kb, target).unwrap();
            assert!(text.contains("(`triton-to-metal`)"), "{target}: {text}");
        }
        assert!(!crate::kb_cmd::show(&kb, "h200").unwrap().contains("triton-to-metal"));
        // ... and the prompts of an MLX task adapting a Triton kernel on an Apple GPU cite it.
        let (_task_dir, task) = attention_task(
            "targets = [\"h200\", \"m4-max\"]\n[kernel]\nlanguage = \"mlx\"\n\n[[expertise]]\n\
             file = \"expertise/attn.py\"\nlanguage = \"triton\"\ndescription = \"a Triton attention kernel\"\n",
            &[("expertise/attn.py", "import triton\n")],
        );
        let prompt = init_prompt(brief_for(&kb, &task, Platform::MacOs, ContextLevel::Full).unwrap());
        assert!(prompt.contains("Primitive mapping (triton -> metal"), "{prompt}");
        assert!(prompt.contains("tl.program_id(0)") && !prompt.contains("(cuda -> metal"));
        // The built-in knowledge base has no such layer.
        let builtin =
            init_prompt(brief_for(&kb_with(None).unwrap(), &task, Platform::MacOs, ContextLevel::Full).unwrap());
        assert!(!builtin.contains("Primitive mapping"));
        // `ksearch doctor` names the file it adds.
        let (ok, line) = describe(Some(dir.path()));
        assert!(ok, "{line}");
        assert!(
            line.starts_with(&format!(
                "built-in + KSEARCH_KB={} (translation/triton-to-metal.toml): ",
                dir.path().display()
            )) && line.contains(", 3 translation layers,"),
            "{line}"
        );
        assert!(describe(None).1.starts_with("built-in: "));

        // A malformed file: an error naming it and the key, for every command and for doctor.
        let bad = TRITON_TO_METAL.replace("to = \"threadgroup_position_in_grid.x\"\n", "");
        write(dir.path(), "translation/triton-to-metal.toml", &bad);
        let file = dir
            .path()
            .join("translation/triton-to-metal.toml")
            .display()
            .to_string();
        let err = format!("{:#}", kb_with(Some(dir.path())).unwrap_err());
        assert!(
            err.starts_with(&format!(
                "KSEARCH_KB={}: {file}: mappings[0]: missing field `to`",
                dir.path().display()
            )),
            "{err}"
        );
        assert_eq!(describe(Some(dir.path())), (false, err));
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
