//! What a task's prompts cite at a context level: the knowledge base's slice for its device
//! (figures, patterns, translation layers, properties) and its expertise, and the task brief
//! the search starts from.

use super::host::{kb_here, HostCpu};
use super::{target_of, Platform};
use crate::contract::{contract, Setting};
use anyhow::Context;
use ksearch_kb::{ContextLevel, Kb, TaskQuery};
use ksearch_search::engine::TaskBrief;
use ksearch_spec::{Expertise, Task};

/// What a task's prompts cite at one context level.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Knowledge {
    /// The task brief's `target`: figures (hardware, full), patterns, translation layers and
    /// properties to keep (full).
    pub target: String,
    /// The task brief's `expertise`: the task's `[[expertise]]` rendered (full only).
    pub expertise: String,
}

/// What the knowledge base is asked about `task` when its candidates run on `device`.
pub fn task_query(task: &Task, device: &str) -> TaskQuery {
    let mut expertise_languages: Vec<String> = Vec::new();
    for e in &task.expertise {
        if !expertise_languages.iter().any(|l| l == e.language.as_str()) {
            expertise_languages.push(e.language.to_string());
        }
    }
    TaskQuery {
        device: device.to_string(),
        language: task.config.kernel.language.to_string(),
        op_type: Some(task.definition.op_type.clone()),
        expertise_languages,
    }
}

/// What `task`'s prompts cite at `level` (`--context none|hardware|full`) on its target device
/// on `platform` ([`target_of`]). When the device was assumed, the cited text starts with the
/// note saying so (at `hardware` and `full`; `none` cites nothing). A CPU target is this
/// machine's CPU, with the figures detected here ([`super::host`]).
pub fn knowledge_for(kb: &Kb, task: &Task, platform: Platform, level: ContextLevel) -> anyhow::Result<Knowledge> {
    knowledge_with(kb, task, platform, level, host_of(kb, task, platform))
}

/// This machine's CPU when `task` runs on a CPU ([`HostCpu::for_device`]).
fn host_of(kb: &Kb, task: &Task, platform: Platform) -> &'static HostCpu {
    let device = target_of(kb, task, platform).map(|t| t.device).unwrap_or_default();
    HostCpu::for_device(kb, &device)
}

/// As [`knowledge_for`], with `host` as this machine's CPU.
pub(crate) fn knowledge_with(
    kb: &Kb,
    task: &Task,
    platform: Platform,
    level: ContextLevel,
    host: &HostCpu,
) -> anyhow::Result<Knowledge> {
    let target = target_of(kb, task, platform)?;
    let kb = kb_here(kb, &target.device, host)?;
    let mut k = cited(&kb, task, &target.device, level)?;
    if let (Some(note), false) = (&target.note, k.target.is_empty()) {
        k.target = format!("{note}\n{}", k.target);
    }
    Ok(k)
}

/// As [`knowledge_for`], for a chosen device (`m4-max`; what `ksearch kb show DEVICE --prompt
/// LEVEL --task TASK` prints). A CPU is this machine's, as in the prompts.
pub fn knowledge_on(kb: &Kb, task: &Task, device: &str, level: ContextLevel) -> anyhow::Result<Knowledge> {
    let kb = kb_here(kb, device, HostCpu::for_device(kb, device))?;
    cited(&kb, task, device, level)
}

/// What the knowledge base `kb` cites about `task` on `device` at `level`.
fn cited(kb: &Kb, task: &Task, device: &str, level: ContextLevel) -> anyhow::Result<Knowledge> {
    let target = kb
        .task_context(&task_query(task, device), level)
        .with_context(|| format!("the knowledge base for task {}", task.definition.name))?;
    let expertise = match level {
        ContextLevel::Full => render_expertise(&task.expertise),
        ContextLevel::None | ContextLevel::Hardware => String::new(),
    };
    Ok(Knowledge { target, expertise })
}

/// The task brief the search starts from, with the knowledge cited at `level` and the
/// contract of the task's backend: what `ksearch run --context LEVEL` starts the engine with.
/// Prints a warning when the task's device was assumed.
pub fn brief(kb: &Kb, task: &Task, level: ContextLevel) -> anyhow::Result<TaskBrief> {
    if let Some(warning) = target_of(kb, task, Platform::current())?.warning {
        eprintln!("warning: {warning}");
    }
    brief_for(kb, task, Platform::current(), level)
}

/// As [`brief`], on `platform`, without the warning.
pub fn brief_for(kb: &Kb, task: &Task, platform: Platform, level: ContextLevel) -> anyhow::Result<TaskBrief> {
    brief_with(kb, task, platform, level, host_of(kb, task, platform))
}

/// As [`brief_for`], with `host` as this machine's CPU.
pub(crate) fn brief_with(
    kb: &Kb,
    task: &Task,
    platform: Platform,
    level: ContextLevel,
    host: &HostCpu,
) -> anyhow::Result<TaskBrief> {
    let Knowledge { target, expertise } = knowledge_with(kb, task, platform, level, host)?;
    let device = target_of(kb, task, platform)?.device;
    let kb = kb_here(kb, &device, host)?;
    let setting = Setting {
        task,
        device: kb.hardware(&device).ok(),
        platform,
        host: Some(host),
    };
    let convention = contract(&setting).render();
    let mut brief = crate::brief::task_brief(task, target, convention);
    brief.expertise = expertise;
    Ok(brief)
}

/// The expertise as prompts show it: each entry's origin, language and description, then its
/// files in fenced blocks. Empty when the task names none.
pub fn render_expertise(list: &[Expertise]) -> String {
    let mut out = String::new();
    for (i, e) in list.iter().enumerate() {
        out.push_str(&format!(
            "### {}. {} ({}): {}\n",
            i + 1,
            e.origin,
            e.language,
            e.description
        ));
        let tag = e.language.fence_tag();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::kb;
    use crate::knowledge::test_support::{avx512_host, init_prompt, mlx_task, CUDA};

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
        // The C tasks keep their CPU slice: where nothing about this CPU can be detected, the
        // generic entry, saying so.
        let c = Task::load_builtin("softmax").unwrap();
        let k = knowledge_with(&kb, &c, Platform::MacOs, ContextLevel::Full, &HostCpu::default()).unwrap();
        assert!(
            k.target.contains("Generic x86-64 CPU")
                && k.target.contains("Properties every candidate must keep: Softmax"),
            "{}",
            k.target
        );
        assert!(
            k.target.contains("could not be examined")
                && k.target.contains("AVX-512 (16 fp32 lanes) exists on some CPUs only"),
            "{}",
            k.target
        );
    }

    #[test]
    fn a_cpu_tasks_prompt_names_the_detected_figures() {
        let kb = kb().unwrap();
        let host = avx512_host();
        let task = Task::load_builtin("matmul").unwrap();
        let prompt = init_prompt(brief_with(&kb, &task, Platform::Linux, ContextLevel::Hardware, &host).unwrap());
        for present in [
            "## Target hardware: AMD EPYC, this machine (`cpu-generic`)",
            "- 8 cores; 16 fp32 lanes per vector; vector registers 512-bit",
            "L1d 48 KB/core; L2 2048 KB/core; L3 32 MB shared; cache line 64 B",
            "These figures are of the machine that built this brief (the one running `ksearch run`)",
            "ISA extensions: SSE4.2, AVX, AVX2, FMA, F16C, AVX-512 F/DQ/CD/BW/VL/IFMA/VBMI/VNNI/BF16; absent: \
             AVX-512FP16, AMX. Widest vectors: 512-bit (16 fp32 lanes, 32 registers)",
            "with 512-bit registers and fuses a*b+c into one FMA instruction",
            // The contract: the exact compile command and the contraction choice.
            "Build: `cc -O3 -march=native -fPIC -shared -std=c11 -ffp-contract=fast -o candidate.so SOURCES.c -lm` \
             (cc here: cc (Debian 12.2.0-14+deb12u1) 12.2.0).",
            "Arithmetic: FMA contraction is on (-ffp-contract=fast",
        ] {
            assert!(prompt.contains(present), "{present:?} missing from\n{prompt}");
        }
        for absent in [
            "exists on some CPUs only",
            "~32 KB",
            "256-bit",
            "8 fp32 lanes",
            "Generic x86-64",
        ] {
            assert!(!prompt.contains(absent), "{absent:?} in\n{prompt}");
        }
    }

    #[test]
    fn expertise_rendering() {
        assert_eq!(render_expertise(&[]), "");
        let fenced = Expertise {
            description: "two files".into(),
            language: ksearch_spec::Language::Triton,
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
