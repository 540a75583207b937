//! The built-in tasks load, list, and their seed kernels pass their own evaluation.

mod common;
use common::*;

#[test]
fn tasks_lists_the_cpu_and_gpu_tasks() {
    let r = ksearch(&["tasks", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let names: Vec<String> = r.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "attention_prefill",
            "gqa_paged_decode",
            "mamba_scan",
            "matmul",
            "mlx_attention",
            "mlx_mamba_scan",
            "mlx_mamba_step",
            "rmsnorm",
            "rmsnorm_llm",
            "softmax",
            "softmax_llm",
            "ssm_scan"
        ]
    );
}

#[test]
fn every_seed_kernel_passes() {
    // Every built-in task whose seed is C runs here; the others need a GPU, so they are skipped
    // by name (their seeds are compile-checked by crates/spec/tests/cuda_seeds_compile.rs, the
    // MLX seeds' CUDA bodies by harness/tests/test_mlx_seeds_compile.py, and evaluated on the
    // GPU by bench/gpu_suite.sh).
    let listed = ksearch(&["tasks", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let mut evaluated = Vec::new();
    for t in listed.json()["tasks"].as_array().unwrap() {
        let (task, language) = (t["name"].as_str().unwrap(), t["language"].as_str().unwrap());
        if language != "c" {
            eprintln!("skipping {task}: its seed is {language}, which this CPU test cannot run");
            continue;
        }
        evaluated.push(task.to_string());
        let r = ksearch(&["eval", task, "--json", "--seed", "11"]);
        assert_eq!(r.code, 0, "{task}: {}\n{}", r.stdout, r.stderr);
        let j = r.json();
        assert_eq!(j["status"], "passed", "{task}");
        assert!(
            j["workloads"].as_array().unwrap().len() >= 3,
            "{task} has several workloads"
        );
    }
    assert_eq!(
        evaluated,
        ["matmul", "rmsnorm", "softmax", "ssm_scan"],
        "the CPU tasks, none skipped"
    );
}

#[test]
fn harness_unit_tests_pass() {
    // The harness's own tests (comparison rules, input generation), run with the interpreter
    // ksearch uses.
    let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harness");
    let python = ksearch_eval::harness::python_with_numpy(&|m| eprintln!("{m}")).expect("a Python with NumPy");
    let out = std::process::Command::new(python)
        .args(["-m", "unittest", "discover", "-s", "tests", "-t", "."])
        .current_dir(&harness)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
