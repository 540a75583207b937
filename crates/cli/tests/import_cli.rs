//! `ksearch import` and then `ksearch eval` of what it wrote: an imported task's seed must pass
//! ksearch's own checks and, where PyTorch is installed, its evaluation on the CPU. The sample
//! problems under tests/fixtures/gpumode and tests/fixtures/kernelbench were written for these
//! tests.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn python() -> String {
    std::env::var("KSEARCH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether the harness's Python has PyTorch; without it the test says so and stops (CI has
/// none: the import and the static checks are still tested).
fn torch_here(test: &str) -> bool {
    let ok = Command::new(python())
        .args(["-c", "import torch"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("{test}: skipped the evaluation: {} cannot import torch", python());
    }
    ok
}

fn import(kind: &str, problem: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "import",
        kind,
        problem.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let r = ksearch(&args);
    assert_eq!(r.code, 0, "import failed:\n{}\n{}", r.stdout, r.stderr);
    r
}

/// `ksearch eval TASK TASK/seed.py --device cpu --json`, which must pass.
fn eval_seed_passes(task: &Path) -> serde_json::Value {
    let seed = task.join("seed.py");
    let r = ksearch(&[
        "eval",
        task.to_str().unwrap(),
        seed.to_str().unwrap(),
        "--device",
        "cpu",
        "--json",
    ]);
    let j = r.json();
    assert_eq!(j["status"], "passed", "{j}\n{}", r.stderr);
    j
}

#[test]
fn a_gpumode_seed_with_a_helper_module_passes_the_static_checks_and_its_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scaled_sum");
    import("gpumode", &fixture("gpumode/scaled_sum_py"), &out, &["--stand-in"]);
    let seed = std::fs::read_to_string(out.join("seed.py")).unwrap();
    assert!(!seed.contains("__dict__") && !seed.contains("sys.modules"), "{seed}");
    assert!(out.join("modules/utils.py").is_file() && out.join("modules/task.py").is_file());
    // The static checks run before anything is built: a refusal says `rejected` even here.
    let r = ksearch(&[
        "eval",
        out.to_str().unwrap(),
        out.join("seed.py").to_str().unwrap(),
        "--device",
        "cpu",
        "--build-only",
        "--json",
    ]);
    let j = r.json();
    assert_ne!(j["status"], "rejected", "{j}");
    if torch_here("a_gpumode_seed_with_a_helper_module") {
        eval_seed_passes(&out);
    }
}
