//! FlashInfer-Bench datasets and solutions as they are: `ksearch eval` of a definition file
//! taken from a dataset's layout (tests/fixtures/fib_dataset, written for these tests: its
//! workloads under workloads/<op_type>/, one input in a safetensors blob), Solution JSON in the
//! current and older layouts, what ksearch refuses (tilelang; bindings are built: fib_bindings.rs), and `ksearch export` of a run's best
//! candidate, checked with FlashInfer-Bench's own pydantic models where they are installed.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dataset() -> PathBuf {
    fixture("fib_dataset")
}

fn definition() -> String {
    dataset()
        .join("definitions/softmax/tiny_fib_softmax.json")
        .display()
        .to_string()
}

fn solution(name: &str) -> String {
    dataset().join("solutions/softmax").join(name).display().to_string()
}

#[test]
fn a_dataset_definition_is_evaluated_with_its_workloads_and_blobs() {
    let r = ksearch(&[
        "eval",
        &definition(),
        &solution("tiny_fib_softmax_c.json"),
        "--json",
        "--seed",
        "5",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "passed");
    assert_eq!(j["task"], "tiny_fib_softmax");
    let uuids: Vec<&str> = j["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["uuid"].as_str().unwrap())
        .collect();
    assert_eq!(uuids, ["random-8x64", "blob-2x8"]);
    // The blob's path is relative to the dataset's root, where it is found: nothing is
    // synthesised in its place.
    assert!(!r.stderr.contains("absent"), "{}", r.stderr);
}

#[test]
fn an_evaluation_is_written_as_flashinfer_bench_traces() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces.jsonl");
    let r = ksearch(&[
        "eval",
        &definition(),
        &solution("tiny_fib_softmax_c.json"),
        "--json",
        "--seed",
        "5",
        "--fib-traces",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&traces)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for t in &lines {
        assert_eq!(t["definition"], "tiny_fib_softmax");
        assert_eq!(t["solution"], "tiny_fib_softmax_c");
        let e = &t["evaluation"];
        assert_eq!(e["status"], "PASSED");
        assert_eq!(e["environment"]["hardware"], "cpu");
        assert!(e["performance"]["latency_ms"].as_f64().unwrap() > 0.0);
        assert!(e["performance"]["speedup_factor"].as_f64().unwrap() > 0.0);
        assert!(e["correctness"]["max_absolute_error"].as_f64().is_some());
    }
    // The workload as the dataset gives it, its blob named relative to the dataset's root.
    assert_eq!(
        lines[1]["workload"]["inputs"]["x"]["path"],
        "./blob/workloads/softmax/tiny_fib_softmax/tiny_fib_softmax_blob-2x8.safetensors"
    );
    // A kernel that does not compile: COMPILE_ERROR on every workload, without metrics.
    let broken = std::fs::read_to_string(solution("tiny_fib_softmax_c.json"))
        .unwrap()
        .replace("double s = 0;", "double s = ;");
    let (_d, bad) = write_temp("broken.json", &broken);
    let r = ksearch(&[
        "eval",
        &definition(),
        bad.to_str().unwrap(),
        "--fib-traces",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let text = std::fs::read_to_string(&traces).unwrap();
    let failed: Vec<serde_json::Value> = text.lines().skip(2).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(failed.len(), 2, "{text}");
    for t in &failed {
        assert_eq!(t["evaluation"]["status"], "COMPILE_ERROR");
        assert!(t["evaluation"].get("correctness").is_none() && t["evaluation"].get("performance").is_none());
    }
    if let Some(python) = fib_python() {
        let done = Command::new(&python)
            .arg(fixture("fib_check_solution.py"))
            .arg(&traces)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&done.stdout);
        assert!(done.status.success(), "FlashInfer-Bench refused the traces:\n{said}");
        assert_eq!(said.matches("ok trace").count(), 4, "{said}");
    }
}

#[test]
fn an_older_solution_layout_is_read() {
    // dependencies: null and an empty build_commands, as FlashInfer-Bench wrote them before.
    let r = ksearch(&[
        "eval",
        &definition(),
        &solution("tiny_fib_softmax_c_old.json"),
        "--json",
        "--seed",
        "5",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "passed");
}

#[test]
fn a_blob_missing_from_the_dataset_is_synthesised_and_named() {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&dataset(), copy.path());
    std::fs::remove_dir_all(copy.path().join("blob")).unwrap();
    let def = copy.path().join("definitions/softmax/tiny_fib_softmax.json");
    let sol = copy.path().join("solutions/softmax/tiny_fib_softmax_c.json");
    let r = ksearch(&[
        "eval",
        def.to_str().unwrap(),
        sol.to_str().unwrap(),
        "--json",
        "--seed",
        "5",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("absent") && r.stderr.contains("tiny_fib_softmax_blob-2x8.safetensors"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_definition_without_workloads_says_where_they_were_looked_for() {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&dataset(), copy.path());
    std::fs::remove_dir_all(copy.path().join("workloads")).unwrap();
    let def = copy.path().join("definitions/softmax/tiny_fib_softmax.json");
    let r = ksearch(&["eval", def.to_str().unwrap(), &solution("tiny_fib_softmax_c.json")]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let wanted = copy.path().join("workloads/softmax/tiny_fib_softmax.jsonl");
    assert!(
        r.stderr
            .contains(&format!("no workloads file found at {}", wanted.display())),
        "{}",
        r.stderr
    );
    // A definition file outside any dataset is refused with the layout it needs.
    let loose = tempfile::tempdir().unwrap();
    let def2 = loose.path().join("softmax.json");
    std::fs::copy(&def, &def2).unwrap();
    let r = ksearch(&["eval", def2.to_str().unwrap(), &solution("tiny_fib_softmax_c.json")]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("definitions/<op_type>/<name>.json"), "{}", r.stderr);
}

#[test]
fn what_ksearch_cannot_build_is_refused_by_name_and_bindings_are_read() {
    // A bound cuda solution is read as cuda_binding (it used to be refused; fib_bindings.rs
    // builds it); tilelang, and c with a binding, are refused by name.
    for (spec, said) in [
        (
            serde_json::json!({"language": "tilelang", "target_hardware": ["NVIDIA_H200"], "entry_point": "k.py::run"}),
            "spec.language: 'tilelang' is not built by ksearch yet",
        ),
        (
            serde_json::json!({"language": "c", "target_hardware": ["cpu"], "entry_point": "k.c::run", "binding": "tvm-ffi"}),
            "spec.binding: 'tvm-ffi': ksearch's c has no binding",
        ),
    ] {
        let (_d, path) = write_temp(
            "refused.json",
            &serde_json::json!({
                "name": "t", "definition": "tiny_fib_softmax", "author": "a", "spec": spec,
                "sources": [{"path": "k.c", "content": "void run(void) {}\n"}, {"path": "k.py", "content": "x = 1\n"}]
            })
            .to_string(),
        );
        let r = ksearch(&["eval", &definition(), path.to_str().unwrap()]);
        assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(said), "{}", r.stderr);
        assert!(r.stderr.contains("extern \"C\""), "{}", r.stderr);
    }
    // Without `binding`, a cuda source written against torch is read as the torch binding:
    // a --build-only says it is a cuda_binding solution (built, or what its toolchain lacks).
    let (_d, path) = write_temp(
        "torch_ext.json",
        &serde_json::json!({
            "name": "t", "definition": "tiny_fib_softmax", "author": "a",
            "spec": {"language": "cuda", "target_hardware": ["NVIDIA_H200"], "entry_point": "k.cu::run"},
            "sources": [{"path": "k.cu", "content": "#include <torch/extension.h>\nvoid run(torch::Tensor x) {}\n"}]
        })
        .to_string(),
    );
    let r = ksearch(&["eval", &definition(), path.to_str().unwrap(), "--build-only", "--json"]);
    let said = format!("{}\n{}", r.stdout, r.stderr);
    assert!(
        said.contains("\"backend\":\"cuda_binding\"") || said.contains("backend cuda_binding builds the torch binding"),
        "{said}"
    );
}

#[test]
fn a_current_pytorch_solution_builds_and_where_torch_is_passes() {
    let sol = solution("tiny_fib_softmax_torch.json");
    let r = ksearch(&["eval", &definition(), &sol, "--device", "cpu", "--build-only", "--json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "built", "{j}");
    assert_eq!(j["provenance"]["backend"], "python");
    if !python_has("torch") {
        eprintln!("a_current_pytorch_solution: skipped the evaluation: no torch");
        return;
    }
    // run(x, y): FlashInfer-Bench's destination-passing style, called without the var axes.
    let r = ksearch(&["eval", &definition(), &sol, "--device", "cpu", "--json", "--seed", "5"]);
    assert_eq!(r.json()["status"], "passed", "{}\n{}", r.stdout, r.stderr);
}

#[test]
fn export_writes_the_best_candidate_as_a_flashinfer_bench_solution() {
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("run");
    let task = fixture("tiny_softmax_tunable");
    let env = [("XDG_CONFIG_HOME", work.path().to_str().unwrap())];
    let r = ksearch_in(
        work.path(),
        &[
            "run",
            task.to_str().unwrap(),
            "--rounds",
            "2",
            "--out",
            run_dir.to_str().unwrap(),
            "--json",
            "--seed",
            "3",
        ],
        &env,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let out = work.path().join("solution.json");
    let r = ksearch(&["export", run_dir.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("exported as cpp"), "{}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(j["definition"], "tiny_softmax");
    assert_eq!(j["author"], "ksearch (the knob tuner)");
    assert_eq!(j["spec"]["language"], "cpp");
    assert_eq!(j["spec"]["target_hardware"], serde_json::json!(["cpu"]));
    assert_eq!(j["spec"]["destination_passing_style"], true);
    let name = j["name"].as_str().unwrap();
    assert!(name.starts_with("tiny_softmax_ksearch_run_c"), "{name}");
    let entry = j["spec"]["entry_point"].as_str().unwrap();
    assert!(entry.ends_with("::softmax"), "{entry}");
    check_schema(&j);
    // The exported kernel is the run's best/ file.
    let file = entry.split("::").next().unwrap();
    let source = j["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == file)
        .unwrap();
    assert_eq!(
        source["content"].as_str().unwrap(),
        std::fs::read_to_string(run_dir.join("best").join(file)).unwrap()
    );
    // Without --out it goes to standard output.
    let r = ksearch(&["export", run_dir.to_str().unwrap()]);
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["name"], j["name"]);
    if let Some(python) = fib_python() {
        let check = fixture("fib_check_solution.py");
        let done = Command::new(&python).arg(&check).arg(&out).output().unwrap();
        let said = String::from_utf8_lossy(&done.stdout);
        assert!(
            done.status.success(),
            "FlashInfer-Bench refused the export:\n{said}\n{}",
            String::from_utf8_lossy(&done.stderr)
        );
        assert!(said.contains(&format!("ok {name} cpp")), "{said}");
    } else {
        eprintln!("export: FlashInfer-Bench's models are not installed: checked against its schema as read from its source only");
    }
}

/// FlashInfer-Bench's Solution schema (flashinfer_bench/data/solution.py): required non-empty
/// strings, its language enum, a non-empty target_hardware, `file::function` with the file
/// among the sources, distinct relative paths, non-empty contents.
fn check_schema(j: &serde_json::Value) {
    for key in ["name", "definition", "author"] {
        assert!(j[key].as_str().is_some_and(|s| !s.is_empty()), "{key}: {j}");
    }
    let spec = &j["spec"];
    assert!(["python", "triton", "cpp", "cuda", "tilelang"].contains(&spec["language"].as_str().unwrap()));
    assert!(!spec["target_hardware"].as_array().unwrap().is_empty());
    let entry = spec["entry_point"].as_str().unwrap();
    assert_eq!(entry.matches("::").count(), 1, "{entry}");
    assert!(
        spec.get("binding").is_none()
            || spec["binding"].is_null()
            || spec["binding"] == "tvm-ffi"
            || spec["binding"] == "torch"
    );
    let sources = j["sources"].as_array().unwrap();
    assert!(!sources.is_empty());
    let paths: Vec<&str> = sources.iter().map(|s| s["path"].as_str().unwrap()).collect();
    for (i, p) in paths.iter().enumerate() {
        assert!(
            !p.is_empty() && !p.starts_with('/') && !p.split('/').any(|c| c == ".."),
            "{p}"
        );
        assert!(!paths[..i].contains(p), "{p} twice");
    }
    assert!(sources.iter().all(|s| !s["content"].as_str().unwrap().is_empty()));
    assert!(paths.contains(&entry.split("::").next().unwrap()));
}

/// A Python with the flashinfer-bench package: `KSEARCH_FIB_PYTHON`, else the workspace's
/// `.venv-fib` (docs/task-format.md says how to make it).
fn fib_python() -> Option<PathBuf> {
    let python = std::env::var_os("KSEARCH_FIB_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-fib/bin/python"));
    let ok = Command::new(&python)
        .args([
            "-c",
            "import importlib.util as u, sys; sys.exit(u.find_spec('flashinfer_bench') is None)",
        ])
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

fn python_has(module: &str) -> bool {
    let python = std::env::var("KSEARCH_PYTHON").unwrap_or_else(|_| "python3".into());
    Command::new(python)
        .args(["-c", &format!("import {module}")])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}
