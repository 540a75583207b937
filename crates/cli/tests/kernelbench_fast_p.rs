//! `ksearch show` gives KernelBench's fast_p for runs of tasks imported from KernelBench (their
//! definition carries the `source:kernelbench` tag), and nothing of it for other tasks. The
//! fixture is a C task tagged by the test (an imported KernelBench task needs PyTorch to run).

mod common;
use common::*;

fn search(task: &std::path::Path, work: &std::path::Path, name: &str) -> std::path::PathBuf {
    let run_dir = work.join(name);
    let r = ksearch(&[
        "run",
        task.to_str().unwrap(),
        "--brain",
        "tuner",
        "--rounds",
        "1",
        "--seed",
        "3",
        "--json",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    run_dir
}

/// A copy of the tunable fixture, its template folder too.
fn tunable() -> tempfile::TempDir {
    let task = tempfile::tempdir().unwrap();
    let from = fixture("tiny_softmax_tunable");
    for rel in [
        "definition.json",
        "workloads.jsonl",
        "task.toml",
        "template/knobs.toml",
        "template/kernel.c.j2",
    ] {
        std::fs::create_dir_all(task.path().join(rel).parent().unwrap()).unwrap();
        std::fs::copy(from.join(rel), task.path().join(rel)).unwrap();
    }
    task
}

#[test]
fn show_gives_fast_p_for_a_kernelbench_task_only() {
    let work = tempfile::tempdir().unwrap();
    let tagged = tunable();
    let def_path = tagged.path().join("definition.json");
    let mut def: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&def_path).unwrap()).unwrap();
    def["tags"] = serde_json::json!(["source:kernelbench"]);
    std::fs::write(&def_path, def.to_string()).unwrap();
    let run_dir = search(tagged.path(), work.path(), "kb");

    let shown = ksearch(&["show", run_dir.to_str().unwrap(), "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let j = shown.json();
    let best = j["best_candidate"].as_i64().expect("a best candidate");
    let c = j["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"].as_i64() == Some(best))
        .unwrap()
        .clone();
    let speedup = c["final_speedup"].as_f64().or(c["speedup"].as_f64()).unwrap();
    let f = &j["kernelbench_fast_p"];
    assert_eq!(f["correct"], true, "{f}");
    assert_eq!(f["speedup"].as_f64(), Some(speedup), "{f}");
    for t in f["thresholds"].as_array().unwrap() {
        let (p, fast) = (t[0].as_f64().unwrap(), t[1].as_bool().unwrap());
        assert_eq!(fast, p == 0.0 || speedup > p, "p = {p}, speedup {speedup}: {f}");
    }
    let text = ksearch(&["show", run_dir.to_str().unwrap()]);
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("KernelBench fast_p: fast_0 yes, fast_1 "))
        .unwrap_or_else(|| panic!("no fast_p line:\n{}", text.stdout));
    assert!(line.ends_with(&format!("({speedup:.2}x PyTorch eager)")), "{line}");

    let plain = tunable();
    let run_dir = search(plain.path(), work.path(), "plain");
    let j = ksearch(&["show", run_dir.to_str().unwrap(), "--json"]).json();
    assert!(j["kernelbench_fast_p"].is_null(), "{}", j["kernelbench_fast_p"]);
    let text = ksearch(&["show", run_dir.to_str().unwrap()]);
    assert!(!text.stdout.contains("fast_p"), "{}", text.stdout);
}
