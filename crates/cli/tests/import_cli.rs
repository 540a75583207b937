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

/// GPU MODE tests with list-valued arguments (per-group sizes, as reference-kernels'
/// nvfp4_group_gemm gives them): the import crate's sample grouped problem.
#[test]
fn a_gpumode_task_with_list_valued_test_arguments_imports_and_its_seed_passes() {
    let grouped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/fixtures/gpumode/grouped_matmul_py");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grouped");
    let r = import("gpumode", &grouped, &out, &["--stand-in"]);
    assert!(
        r.stdout.contains("2 workloads from 2 tests and 1 benchmarks") && r.stdout.contains("axes m_0, k,"),
        "{}",
        r.stdout
    );
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
    if torch_here("a_gpumode_task_with_list_valued_test_arguments") {
        eval_seed_passes(&out);
    }

    // A list holding what a test cannot pass: the error names the file and the element.
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(grouped.join("reference.py"), bad.join("reference.py")).unwrap();
    std::fs::write(
        bad.join("task.yml"),
        "tests:\n  - {\"m\": [8, null], \"n\": [4, 4], \"k\": 64, \"shapes\": [[3, 5], [6, 7]], \"g\": 2, \"seed\": 1}\n",
    )
    .unwrap();
    let r = ksearch(&[
        "import",
        "gpumode",
        bad.to_str().unwrap(),
        "--out",
        dir.path().join("bad_out").to_str().unwrap(),
        "--stand-in",
    ]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stderr.contains(&format!(
            "{}: tests[0].m[1]: null is not a number, string or boolean, nor a list of them",
            bad.join("task.yml").display()
        )),
        "{}",
        r.stderr
    );
}
