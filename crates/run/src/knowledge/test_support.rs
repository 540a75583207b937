//! What the knowledge module's unit tests share: a small attention task written to a
//! temporary folder, and the planner's first prompt for a brief.

use ksearch_search::engine::{Engine, EngineConfig, EvalSummary, Event, Request, TaskBrief};
use ksearch_spec::Task;
use std::path::Path;

const DEFINITION: &str = r#"{
  "name": "attn", "op_type": "attention", "axes": {"N": {"type": "var"}, "D": {"type": "const", "value": 64}},
  "inputs": {"q": {"shape": ["N", "D"], "dtype": "float16"}, "k": {"shape": ["N", "D"], "dtype": "float16"},
             "v": {"shape": ["N", "D"], "dtype": "float16"}},
  "outputs": {"o": {"shape": ["N", "D"], "dtype": "float16"}},
  "reference": "def run(q, k, v):\n    return q\n"
}"#;
pub(super) const CUDA: &str = "__global__ void attn_fwd(const half *q) { /* tiled, online softmax, exp2 */ }\n";

pub(super) fn write(root: &Path, name: &str, text: &str) {
    let p = root.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// An attention task with this task.toml and these extra files.
pub(super) fn attention_task(toml: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, Task) {
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
pub(super) fn mlx_task() -> (tempfile::TempDir, Task) {
    attention_task(
        "targets = [\"h200\"]\n[kernel]\nlanguage = \"mlx\"\n\n[[expertise]]\nfile = \"expertise/attn.cu\"\n\
         description = \"FlashAttention-style CUDA forward kernel\"\n",
        &[("expertise/attn.cu", CUDA)],
    )
}

/// The planner's first prompt for a brief, as the engine renders it.
pub(super) fn init_prompt(brief: TaskBrief) -> String {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief,
            config: EngineConfig::default(),
        })
        .unwrap();
    // A seed is measured first, here at 1x.
    if let Some(Request::Evaluate { id, candidate_id, .. }) = engine.pending().cloned() {
        let summary = EvalSummary {
            status: "passed".into(),
            reason: None,
            speedup: Some(1.0),
            relative_noise: Some(0.01),
            workloads: vec![],
            log_tail: String::new(),
            suspicious: None,
            resources: vec![],
            profile: None,
            harness: None,
        };
        engine
            .apply(&Event::Evaluated {
                request_id: id,
                candidate_id,
                summary,
            })
            .unwrap();
    }
    match engine.pending() {
        Some(Request::Plan { messages, .. }) => messages.iter().map(|m| m.content.clone()).collect(),
        other => panic!("expected the planner's init request, got {other:?}"),
    }
}

/// The CPU the issue's prompts were wrong about: AVX-512 (the recorded EPYC's /proc/cpuinfo)
/// with a 48 KB L1d and 2 MB L2 per core, 8 cores, as detection would find it.
pub(super) fn avx512_host() -> super::host::HostCpu {
    let info = super::host::parse_cpuinfo(include_str!("fixtures/cpuinfo-epyc-zen4.txt"));
    super::host::HostCpu {
        model: info.model,
        vendor: info.vendor,
        arch: "x86-64".into(),
        flags: info.flags,
        sve_bits: None,
        caches: super::host::Caches {
            l1d_kb: Some(48.0),
            l2_kb: Some(2048.0),
            l2_shared_by: Some(1),
            l3_kb: Some(32768.0),
            l3_shared_by: Some(8),
            line_bytes: Some(64),
        },
        cores: Some(8),
        logical_cpus: Some(8),
        source: "/proc/cpuinfo and /sys/devices/system/cpu/cpu0/cache".into(),
        compiler: Some(super::host::CompilerProbe {
            version: "cc (Debian 12.2.0-14+deb12u1) 12.2.0".into(),
            vector_bits: Some(512),
            fma: true,
        }),
    }
}
