//! The device a task targets: the platform ksearch runs on, the kernel dialect a task's
//! candidates are written in there, and the device from task.toml's `targets` (or the one
//! assumed when it names none).

use super::KB_ENV;
use ksearch_kb::{Kb, TargetKind};
use ksearch_spec::{Language, Task};
use std::fmt;

/// The platform ksearch runs on. It decides an MLX task's kernel dialect (docs/mlx.md): Metal
/// through `mx.fast.metal_kernel` on macOS, CUDA through `mx.fast.cuda_kernel` on Linux (any
/// other system is taken as Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// macOS: MLX kernels are Metal.
    MacOs,
    /// Linux, and any other system: MLX kernels are CUDA.
    Linux,
}

impl Platform {
    /// The platform this binary was built for.
    pub fn current() -> Platform {
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
pub struct Target {
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
fn dialect_of(language: Language, platform: Platform) -> Option<TargetKind> {
    match language {
        Language::C | Language::Cpp => Some(TargetKind::Cpu),
        Language::Cuda | Language::CudaBinding => Some(TargetKind::Cuda),
        Language::Triton => Some(TargetKind::Triton),
        Language::Mlx => Some(match platform {
            Platform::MacOs => TargetKind::Metal,
            Platform::Linux => TargetKind::Cuda,
        }),
        Language::Python => None,
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
pub fn target_of(kb: &Kb, task: &Task, platform: Platform) -> anyhow::Result<Target> {
    let file = task.file("task.toml");
    let language = task.config.kernel.language;
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
            Language::Mlx => format!(" (mlx tasks on {platform} are written in {d})"),
            Language::C
            | Language::Cuda
            | Language::Triton
            | Language::Python
            | Language::Cpp
            | Language::CudaBinding => String::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::hardware::hw_figures;
    use crate::knowledge::kb;
    use crate::knowledge::prompt::{brief_for, knowledge_for, Knowledge};
    use crate::knowledge::test_support::{attention_task, init_prompt, mlx_task};
    use ksearch_kb::ContextLevel;

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
}
