//! `[[baselines]]` and `[kernel].calling` in task.toml.

use ksearch_spec::{Calling, Task};
use std::path::Path;

const DEFINITION: &str = r#"{
  "name": "vadd", "op_type": "add", "axes": {"N": {"type": "var"}},
  "inputs": {"a": {"shape": ["N"], "dtype": "float32"}, "b": {"shape": ["N"], "dtype": "float32"}},
  "outputs": {"c": {"shape": ["N"], "dtype": "float32"}},
  "reference": "def run(a, b):\n    return a + b\n"
}"#;

fn task_folder(toml: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("definition.json", DEFINITION);
    write(
        "workloads.jsonl",
        "{\"uuid\": \"w0\", \"axes\": {\"N\": 8}, \"inputs\": {}}\n",
    );
    write("task.toml", toml);
    for (name, text) in files {
        write(name, text);
    }
    dir
}

fn load(dir: &Path) -> Result<Task, String> {
    Task::load_folder(dir).map_err(|e| e.to_string())
}

#[test]
fn baselines_become_trusted_solutions_with_the_task_calling_convention() {
    let dir = task_folder(
        r#"
[kernel]
language = "triton"
entry = "vadd"
calling = "returns"

[[baselines]]
name = "torch_add"
file = "baselines/torch_add.py"
entry = "run"
description = "PyTorch's own add"
"#,
        &[("baselines/torch_add.py", "def run(a, b):\n    return a + b\n")],
    );
    let task = load(dir.path()).unwrap();
    assert_eq!(task.config.kernel.calling, Calling::Returns);
    let b = task.baseline("torch_add").unwrap();
    assert_eq!(
        b.spec.language,
        ksearch_spec::Language::Python,
        "a .py baseline is framework code unless declared otherwise"
    );
    assert_eq!(b.spec.entry_point, "torch_add.py::run");
    assert!(!b.spec.destination_passing_style);
    assert_eq!(b.sources[0].content, "def run(a, b):\n    return a + b\n");
    let err = task.baseline("cudnn").unwrap_err().to_string();
    assert!(err.contains("no baseline 'cudnn' (declared: torch_add)"), "{err}");
}

#[test]
fn a_missing_baseline_file_names_the_field_and_the_file() {
    let dir = task_folder(
        "[[baselines]]\nname = \"sdpa\"\nfile = \"baselines/sdpa.py\"\nentry = \"run\"\n",
        &[],
    );
    let err = load(dir.path()).unwrap_err();
    assert!(
        err.contains("task.toml: baselines[0].file: 'baselines/sdpa.py' does not exist"),
        "{err}"
    );
}

#[test]
fn bad_baselines_and_calling_are_rejected_with_their_fields() {
    let dir = task_folder(
        r#"
[kernel]
language = "c"
calling = "tuple"

[[baselines]]
name = "a"
file = "a.txt"
entry = "run"

[[baselines]]
name = "a"
file = "../b.py"
entry = "not an identifier"
"#,
        &[("a.txt", "")],
    );
    let err = load(dir.path()).unwrap_err();
    for expected in [
        "kernel.calling: 'tuple' applies to Python-module candidates",
        "baselines[0].language: is not set and 'a.txt' has no extension",
        "baselines[1].name: 'a' appears twice",
        "baselines[1].entry: 'not an identifier' is not a valid symbol name",
        "baselines[1].file: '../b.py' must not contain",
    ] {
        assert!(err.contains(expected), "missing `{expected}` in:\n{err}");
    }
}

#[test]
fn a_bare_python_file_is_a_python_module_for_python_tasks() {
    let dir = task_folder(
        "[kernel]\nlanguage = \"python\"\nentry = \"ModelNew\"\ncalling = \"returns\"\n",
        &[],
    );
    let task = load(dir.path()).unwrap();
    let sol = ksearch_spec::Solution::from_source("k.py", "k.py", "class ModelNew: pass\n".into(), &task).unwrap();
    assert_eq!(sol.spec.language, ksearch_spec::Language::Python);
    assert!(!sol.spec.destination_passing_style);
}
