//! What the knowledge module's unit tests share: a small attention task written to a
//! temporary folder, and the planner's first prompt for a brief.

use ksearch_search::engine::{Engine, EngineConfig, Event, Request, TaskBrief};
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
    match engine.pending() {
        Some(Request::Plan { messages, .. }) => messages.iter().map(|m| m.content.clone()).collect(),
        other => panic!("expected the planner's init request, got {other:?}"),
    }
}
