//! `ksearch import gpumode` with real PyTorch: each test falls back from the meta device to the
//! CPU on its own, and ref_kernel is run for real on generate_input's own values, so that a
//! workload where an output is zero whatever the inputs is left out (said so) instead of
//! becoming a task that `ksearch eval` refuses. The task folders are small ones written for these
//! tests, shaped after GPU MODE's helion gated_deltanet_chunk_fwd_h (its per-chunk states start
//! at zero: with one chunk, that output is all zeros), linalg-eigh (generate_input calls
//! `.item()` for some cases only) and linalg-qr (geqrf has no meta kernel).
//!
//! They need `$KSEARCH_PYTHON` naming an interpreter with PyTorch and NumPy. Without one they are
//! skipped, saying so; `KSEARCH_REQUIRE_TORCH=1` makes that a failure.

mod common;
use common::torch_python;

use ksearch_import::{import_gpumode, ImportError, Imported, Options};
use std::path::Path;

fn import(python: &Path, dir: &Path, yml: &str, reference: &str) -> Result<Imported, ImportError> {
    let folder = dir.join("task");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("task.yml"), yml).unwrap();
    std::fs::write(folder.join("reference.py"), reference).unwrap();
    let mut opts = Options::new(dir.join("out"));
    opts.python = Some(python.to_path_buf());
    import_gpumode(&folder, &opts)
}

/// Per chunk of 4 steps, the state before the chunk (zeros before the first), and x doubled.
/// With T = 4 there is one chunk, and `states` is zero whatever x holds.
const CHUNK_STATES: &str = r#"import torch

C = 4


def generate_input(T, zeros, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    if zeros:
        return (torch.zeros(T, 3, device="cuda"),)
    return (torch.randn(T, 3, device="cuda", generator=gen),)


def ref_kernel(data):
    (x,) = data
    chunks = x.reshape(-1, C, 3)
    states = torch.zeros(chunks.shape[0], 3)
    h = torch.zeros(3)
    for c in range(chunks.shape[0]):
        states[c] = h
        h = h + chunks[c].sum(0)
    return states, x * 2
"#;

fn eval_seed(task: &ksearch_spec::Task) -> Result<ksearch_eval::Evaluation, ksearch_eval::EvalError> {
    let seed = task.seed.clone().unwrap();
    let solution = ksearch_spec::Solution::from_source(&seed.path, &seed.path, seed.content, task).unwrap();
    let mut opts = ksearch_eval::EvalOptions::new(7);
    opts.device = Some("cpu".into());
    ksearch_eval::evaluate(task, &solution, &opts, &|m| eprintln!("{m}"))
}

#[test]
fn a_workload_where_an_output_is_zero_whatever_the_inputs_is_left_out_saying_so() {
    let Some(python) = torch_python("gpumode_zero_workload", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let yml = "tests:\n  - {T: 4, zeros: false, seed: 1}\n  - {T: 8, zeros: false, seed: 2}\n  \
               - {T: 12, zeros: true, seed: 3}\nbenchmarks:\n  - {T: 16, zeros: false, seed: 4}\n";
    let imported = import(&python, dir.path(), yml, CHUNK_STATES).unwrap();
    let task = &imported.task;
    // All on the meta device: the stub task.py (the folder has none) no longer answers
    // `__file__` with typing.Any, which broke inspect.getmodule there.
    assert!(
        imported.engine.ends_with("(meta)"),
        "{}: {:?}",
        imported.engine,
        imported.checks
    );
    let uuids: Vec<&str> = task.workloads.iter().map(|w| w.uuid.as_str()).collect();
    // test-0 (one chunk) is left out; test-2's zeros are generate_input's values only, which
    // ksearch does not use (it draws its own), so it stays.
    assert_eq!(uuids, ["test-1", "test-2", "benchmark-0"], "{:?}", imported.checks);
    let why = imported
        .checks
        .iter()
        .find(|c| c.starts_with("test-0 "))
        .unwrap_or_else(|| panic!("{:?}", imported.checks));
    assert!(
        why.contains("\"T\":4") && why.contains("is left out: 'output0' (ref_kernel's output 0) is zero everywhere"),
        "{why}"
    );
    assert!(
        imported.checks.iter().any(|c| c.contains(
            "'output0' is zero everywhere on generate_input's own value \
             for test-2"
        ) && c.contains("kept")),
        "{:?}",
        imported.checks
    );
    // Said in the task too: task.toml and the definition's description.
    let toml = std::fs::read_to_string(dir.path().join("out/task.toml")).unwrap();
    assert!(toml.contains("# Tests and benchmarks left out: test-0"), "{toml}");
    let description = task.definition.description.as_deref().unwrap();
    assert!(
        description.contains("Left out by ksearch import: test-0"),
        "{description}"
    );
    // The seed passes on what is left: ksearch eval does not refuse the reference.
    let eval = eval_seed(task).unwrap_or_else(|e| panic!("{e}"));
    assert!(eval.passed(), "{:?}: {:?}\n{}", eval.status, eval.reason, eval.log);

    // Every workload zero: refused, naming the problem's data as the cause.
    let e = import(
        &python,
        &dir.path().join("all"),
        "tests:\n  - {T: 4, zeros: false, seed: 1}\n",
        CHUNK_STATES,
    )
    .unwrap_err();
    assert!(matches!(e, ImportError::Uncheckable { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("every test and benchmark has an output of ref_kernel that is zero everywhere")
            && e.to_string().contains("the problem's own data"),
        "{e}"
    );
}

/// `.item()` in generate_input for one case (as linalg-eigh's "mixed" case), geqrf (no meta
/// kernel) in ref_kernel for another.
const SOME_NEED_THE_CPU: &str = r#"import torch


def generate_input(n, case, seed):
    x = torch.randn(n, n)
    if case == "scaled":
        x = x / float(x.abs().max().item())
    return x


def ref_kernel(data):
    if data.shape[0] == 6:
        return torch.geqrf(data)[0]
    return data @ data
"#;

#[test]
fn only_the_calls_that_need_the_cpu_run_there() {
    let Some(python) = torch_python("gpumode_per_call_cpu", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let yml = "tests:\n  - {n: 4, case: plain, seed: 1}\n  - {n: 5, case: scaled, seed: 2}\n  \
               - {n: 6, case: plain, seed: 3}\n  - {n: 7, case: plain, seed: 4}\n";
    let imported = import(&python, dir.path(), yml, SOME_NEED_THE_CPU).unwrap();
    assert!(
        imported.engine.ends_with("(meta; the CPU for 2 of 4 calls)"),
        "{}",
        imported.engine
    );
    let note = imported
        .checks
        .iter()
        .find(|c| c.starts_with("on the meta device"))
        .unwrap_or_else(|| panic!("{:?}", imported.checks));
    assert!(
        note.contains("2 of 4 calls failed")
            && note.contains("\"case\": \"scaled\"")
            && note.contains("(1 of them generate_input only, ref_kernel on meta copies of its value)"),
        "{note}"
    );
    let sizes: Vec<i64> = imported.task.workloads.iter().map(|w| w.axes["n"]).collect();
    assert_eq!(sizes, [4, 5, 6, 7]);
}

/// A computed input, as linalg-cholesky's: an SPD matrix built from a random one. ksearch's own
/// draws are not positive definite, so cholesky_ex's factor would be NaN or a failure; the
/// workloads must give the problem's own values instead.
const COMPUTED_SPD: &str = r#"import torch


def generate_input(batch, n, seed):
    gen = torch.Generator()
    gen.manual_seed(seed)
    a = torch.randn(batch, n, n, generator=gen)
    return a @ a.transpose(-1, -2) + n * torch.eye(n)


def ref_kernel(data):
    factor, info = torch.linalg.cholesky_ex(data)
    if bool((info != 0).any()):
        return torch.zeros_like(data)
    return factor
"#;

#[test]
fn a_computed_input_is_given_by_each_workload_from_the_problems_own_values() {
    let Some(python) = torch_python("gpumode_computed_input", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let yml = "test_timeout: 100\nbenchmark_timeout: 200\ntests:\n  - {batch: 2, n: 8, seed: 1}\n  \
               - {batch: 3, n: 5, seed: 2}\nbenchmarks:\n  - {batch: 4, n: 16, seed: 3}\n";
    let imported = import(&python, dir.path(), yml, COMPUTED_SPD).unwrap();
    let out = dir.path().join("out");
    let lines = std::fs::read_to_string(out.join("workloads.jsonl")).unwrap();
    let workloads: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(workloads.len(), 3, "{lines}");
    for w in &workloads {
        // generate_input returns one tensor: the task's one input, named x.
        let given = &w["inputs"]["x"];
        assert_eq!(given["type"], "safetensors", "{w}");
        let path = out.join(given["path"].as_str().unwrap());
        assert!(path.is_file(), "{} is missing", path.display());
    }
    assert!(
        imported
            .checks
            .iter()
            .any(|c| c.starts_with("'x' is computed in generate_input") && c.contains("every workload gives")),
        "{:?}",
        imported.checks
    );
    // task.yml's limits carried over: ksearch's evaluation does tests and benchmarks in one.
    let toml = std::fs::read_to_string(out.join("task.toml")).unwrap();
    assert!(toml.contains("timeout_s = 300"), "{toml}");
    assert_eq!(imported.task.config.evaluation.timeout_s, 300.0);
    // The seed passes on the problem's own SPD matrices (on ksearch's own draws the reference
    // would be zeros, which ksearch eval refuses).
    let eval = eval_seed(&imported.task).unwrap_or_else(|e| panic!("{e}"));
    assert!(eval.passed(), "{:?}: {:?}\n{}", eval.status, eval.reason, eval.log);

    // Without the computed values the reference is refused: what the given inputs fix.
    let stripped: String = lines
        .lines()
        .map(|l| {
            let mut w: serde_json::Value = serde_json::from_str(l).unwrap();
            w["inputs"] = serde_json::json!({});
            format!("{w}\n")
        })
        .collect();
    std::fs::write(out.join("workloads.jsonl"), stripped).unwrap();
    let task = ksearch_spec::Task::load_folder(&out).unwrap();
    let e = eval_seed(&task).map(|e| format!("{:?} {:?}", e.status, e.reason));
    assert!(
        format!("{e:?}").contains("cannot tell a correct kernel from one that writes zeros"),
        "{e:?}"
    );
}
